//! Allocation models: how the clusters' weights are modelled, and everything that follows from
//! that alone — the expected log weights `E[ln π]` the local step adds to the log-likelihoods,
//! the expected weights, the allocation term of the ELBO and its exact change under a merge.
//!
//! * [`dp_mix`]: stick-breaking Dirichlet-process mixture (Hughes thesis §3.2–§3.4), built on the
//!   stick-breaking expectations of [`stick`] (shared with the top levels of the HDP models);
//! * [`finite_mix`]: finite mixture with a symmetric `Dirichlet(γ/K)` prior;
//! * [`Alloc::Fixed`]: given log weights and no allocation ELBO term, so an allocation model
//!   written elsewhere (e.g. in Python) can drive the local step with its own weights.
//!
//! For the mixtures every quantity is a function of the (effective) counts `N` only: the
//! allocation part of the summaries is `N`, and the allocation global step is the closed-form
//! optimum (`η̂` or `θ̂`) computed from `N` whenever it is needed, so there is no allocation state
//! to keep beyond the hyperparameter.
//!
//! # Why an enum
//! [`Alloc`] is an enum (as [`crate::obs::Obs`] is), not a trait object or a generic parameter:
//! the bindings choose the model at run time from Python; the local step needs only
//! [`Alloc::segment_weights`] once per call (`O(K)`, negligible next to the `O(N·K)` kernel), so
//! monomorphising the kernels over the allocation model would only multiply compile time; and a
//! closed set keeps every `match` exhaustive, so a new family (HDP topic model, HDP-HMM) is one
//! module, one variant and the compiler lists every place that must learn about it. The value is
//! immutable and cheap to clone (`Fixed` holds one `K`-vector).
//!
//! # How log weights enter a segment of rows
//! The local step works on *segments* of rows that share their allocation: [`SegmentWeights`]
//! says what the allocation model contributes to one segment. For mixtures a segment is one row
//! and the contribution is one vector `E[ln π]` added to every row's log-likelihoods.

pub mod dp_mix;
pub mod finite_mix;
pub mod hdp_topic;
pub mod stick;

use ndarray::{Array1, Array2, ArrayView1};

use crate::error::{Error, Result};

/// Checks shared by the mixtures: `gamma` finite and > 0, counts finite.
pub(crate) fn check(n: ArrayView1<f64>, gamma: f64) -> Result<()> {
    if !(gamma > 0.0) || !gamma.is_finite() {
        return Err(Error::param("gamma", format!("concentration must be finite and > 0, got {gamma}")));
    }
    if n.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: "counts `N`".into() });
    }
    Ok(())
}

/// How the allocation model's log weights enter one *segment* of rows of the local step: the
/// rows that share one allocation distribution.
///
/// * mixtures (implemented): every row is its own segment and all rows share the global weights,
///   so the contribution is one vector `E[ln π_k]` added to each row's log-likelihoods
///   ([`SegmentWeights::Rows`]);
/// * topic models (room left): a segment is one document's tokens; the document's weights
///   `E[ln π_dk]` come from a per-document fixed point over the global `E[ln β_k]` and the
///   document's own responsibilities, so the contribution is the global part and the local step
///   iterates per document;
/// * HMMs (room left): a segment is one sequence; the contribution is the start and transition
///   log weights `E[ln π_0k]`, `E[ln π_jk]`, entering through forward-backward instead of a
///   per-row sum.
///
/// The enum is `non_exhaustive` so these variants can be added without breaking matches
/// outside the crate.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SegmentWeights {
    /// One row per segment: `W_nk = E[log F(x_n|φ_k)] + e_log_pi[k]`.
    Rows {
        /// `E[ln π_k]`, one entry per cluster (`-inf` allowed: the cluster is never used)
        e_log_pi: Array1<f64>,
    },
}

/// An allocation model chosen at run time (see the module docs for why this is an enum).
#[derive(Debug, Clone, PartialEq)]
pub enum Alloc {
    /// stick-breaking DP mixture with concentration `gamma` ([`dp_mix`])
    Dp {
        /// concentration `γ`
        gamma: f64,
    },
    /// finite mixture with a symmetric `Dirichlet(γ/K)` prior ([`finite_mix`])
    Finite {
        /// concentration `γ`
        gamma: f64,
    },
    /// given log weights, whatever the counts; allocation ELBO term 0 (the caller accounts for
    /// its own allocation term)
    Fixed {
        /// `E[ln π_k]` used by every local step (length `K`)
        log_weights: Array1<f64>,
    },
}

impl Alloc {
    /// Check the hyperparameters.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] naming `gamma` if it is not finite and > 0.
    pub fn check(&self) -> Result<()> {
        match self {
            Alloc::Dp { gamma } | Alloc::Finite { gamma } => check(Array1::<f64>::zeros(0).view(), *gamma),
            Alloc::Fixed { .. } => Ok(()),
        }
    }

    /// Name of the model: `"dp"`, `"finite"` or `"fixed"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Alloc::Dp { .. } => "dp",
            Alloc::Finite { .. } => "finite",
            Alloc::Fixed { .. } => "fixed",
        }
    }

    /// Concentration `γ` (none for [`Alloc::Fixed`]).
    pub fn gamma(&self) -> Option<f64> {
        match self {
            Alloc::Dp { gamma } | Alloc::Finite { gamma } => Some(*gamma),
            Alloc::Fixed { .. } => None,
        }
    }

    /// `Fixed` log weights checked against the number of clusters.
    fn fixed(log_weights: &Array1<f64>, n: ArrayView1<f64>) -> Result<()> {
        if log_weights.len() != n.len() {
            return Err(Error::shape(
                "e_log_pi",
                format!("({},) (one fixed log weight per cluster)", n.len()),
                format!("({},)", log_weights.len()),
            ));
        }
        Ok(())
    }

    /// `E_q[ln π_k]` at the optimal allocation posterior for counts `n`.
    ///
    /// # Errors
    /// Invalid `gamma` or non-finite counts; for `Fixed`, a length other than `n.len()`.
    pub fn e_log_pi(&self, n: ArrayView1<f64>) -> Result<Array1<f64>> {
        match self {
            Alloc::Dp { gamma } => dp_mix::e_log_pi(n, *gamma),
            Alloc::Finite { gamma } => finite_mix::e_log_pi(n, *gamma),
            Alloc::Fixed { log_weights } => Self::fixed(log_weights, n).map(|()| log_weights.clone()),
        }
    }

    /// `E_q[π_k]` at the optimal allocation posterior (DP: sums to less than 1, the rest being
    /// the sticks beyond the truncation; `Fixed`: `exp` of the log weights as given).
    ///
    /// # Errors
    /// As [`Alloc::e_log_pi`].
    pub fn e_pi(&self, n: ArrayView1<f64>) -> Result<Array1<f64>> {
        match self {
            Alloc::Dp { gamma } => dp_mix::e_pi(n, *gamma),
            Alloc::Finite { gamma } => finite_mix::e_pi(n, *gamma),
            Alloc::Fixed { log_weights } => Self::fixed(log_weights, n).map(|()| log_weights.mapv(f64::exp)),
        }
    }

    /// Allocation ELBO term at the optimal allocation posterior for counts `n` (0 for `Fixed`).
    ///
    /// # Errors
    /// As [`Alloc::e_log_pi`].
    pub fn elbo(&self, n: ArrayView1<f64>) -> Result<f64> {
        match self {
            Alloc::Dp { gamma } => dp_mix::elbo(n, *gamma),
            Alloc::Finite { gamma } => finite_mix::elbo(n, *gamma),
            Alloc::Fixed { log_weights } => Self::fixed(log_weights, n).map(|()| 0.0),
        }
    }

    /// Exact change of [`Alloc::elbo`] when clusters `i < j` merge (`N_i ← N_i + N_j`, cluster
    /// `j` removed), for all pairs at once in `O(K²)`: entry `[i, j]` for `i < j`, `-inf`
    /// elsewhere (0 on the strict upper triangle for `Fixed`).
    ///
    /// # Errors
    /// As [`Alloc::e_log_pi`].
    pub fn merge_delta(&self, n: ArrayView1<f64>) -> Result<Array2<f64>> {
        match self {
            Alloc::Dp { gamma } => dp_mix::merge_delta(n, *gamma),
            Alloc::Finite { gamma } => finite_mix::merge_delta(n, *gamma),
            Alloc::Fixed { log_weights } => {
                Self::fixed(log_weights, n)?;
                let k = n.len();
                Ok(Array2::from_shape_fn((k, k), |(i, j)| if i < j { 0.0 } else { f64::NEG_INFINITY }))
            }
        }
    }

    /// What the allocation model adds to each segment of rows in the local step, for counts `n`
    /// (see [`SegmentWeights`]).
    ///
    /// # Errors
    /// As [`Alloc::e_log_pi`].
    pub fn segment_weights(&self, n: ArrayView1<f64>) -> Result<SegmentWeights> {
        Ok(SegmentWeights::Rows { e_log_pi: self.e_log_pi(n)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn fixed_weights_need_one_entry_per_cluster() {
        let a = Alloc::Fixed { log_weights: array![-1.0, -2.0] };
        assert_eq!(a.e_log_pi(array![3.0, 4.0].view()).unwrap(), array![-1.0, -2.0]);
        assert_eq!(a.elbo(array![3.0, 4.0].view()).unwrap(), 0.0);
        assert!(matches!(a.e_log_pi(array![3.0].view()), Err(Error::Shape { .. })));
        let d = a.merge_delta(array![3.0, 4.0].view()).unwrap();
        assert_eq!(d, array![[f64::NEG_INFINITY, 0.0], [f64::NEG_INFINITY, f64::NEG_INFINITY]]);
    }

    #[test]
    fn invalid_gamma_is_named() {
        for a in [Alloc::Dp { gamma: 0.0 }, Alloc::Finite { gamma: f64::NAN }] {
            assert!(matches!(a.check(), Err(Error::InvalidParam { ref name, .. }) if name == "gamma"));
            assert!(a.merge_delta(array![1.0].view()).is_err());
        }
    }
}
