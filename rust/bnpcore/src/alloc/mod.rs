//! Allocation models: stick-breaking DP mixture and finite symmetric-Dirichlet mixture
//! (spec 01 §3.2–§3.6). All quantities are functions of the (effective) counts `N`.
//!
//! DP: `q(u_k) = Beta(η_k1, η_k0)` with optimal `η_k1 = 1 + N_k`, `η_k0 = γ + N^>_k`
//! (`N^>_k = Σ_{ℓ>k} N_ℓ`); `E[ln π_k] = E[ln u_k] + Σ_{ℓ<k} E[ln(1 − u_ℓ)]`;
//! ELBO term at optimal `η`: `Σ_k [c_Beta(1, γ) − c_Beta(1 + N_k, γ + N^>_k)]`.
//!
//! Finite: `q(π) = Dir(θ)` with `θ_k = γ/K + N_k`; ELBO term `c_Dir(γ/K·1) − c_Dir(θ)`
//! (`c_Dir(γ/K·1)` appears once).

pub mod hdp_hmm;

use ndarray::{Array1, ArrayView1};

use crate::error::{Error, Result};
use crate::special::{c_beta, c_dir, digamma};

fn check(n: ArrayView1<f64>, gamma: f64) -> Result<()> {
    if !(gamma > 0.0) || !gamma.is_finite() {
        return Err(Error::param("gamma", format!("concentration must be finite and > 0, got {gamma}")));
    }
    if n.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: "counts `N`".into() });
    }
    Ok(())
}

/// `N^>_k = Σ_{ℓ>k} N_ℓ`, reverse cumulative sum in f64, round-off negatives clamped to 0.
pub fn n_greater(n: ArrayView1<f64>) -> Array1<f64> {
    let k = n.len();
    let mut out = Array1::zeros(k);
    let mut acc: f64 = 0.0;
    for j in (0..k).rev() {
        out[j] = acc.max(0.0);
        acc += n[j].max(0.0);
    }
    out
}

/// Optimal Beta parameters `(η_1, η_0)` of the sticks.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn dp_eta(n: ArrayView1<f64>, gamma: f64) -> Result<(Array1<f64>, Array1<f64>)> {
    check(n, gamma)?;
    let eta1 = n.mapv(|v| 1.0 + v.max(0.0));
    let eta0 = n_greater(n).mapv(|v| gamma + v);
    Ok((eta1, eta0))
}

/// `E_q[ln π_k]` of the DP mixture.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn dp_e_log_pi(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    let (e1, e0) = dp_eta(n, gamma)?;
    let mut out = Array1::zeros(n.len());
    let mut acc = 0.0;
    for k in 0..n.len() {
        let t = digamma(e1[k] + e0[k]);
        out[k] = digamma(e1[k]) - t + acc;
        acc += digamma(e0[k]) - t;
    }
    Ok(out)
}

/// `E_q[π_k] = û_k Π_{ℓ<k} (1 − û_ℓ)`.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn dp_e_pi(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    let (e1, e0) = dp_eta(n, gamma)?;
    let mut out = Array1::zeros(n.len());
    let mut rest = 1.0;
    for k in 0..n.len() {
        let u = e1[k] / (e1[k] + e0[k]);
        out[k] = u * rest;
        rest *= 1.0 - u;
    }
    Ok(out)
}

/// Allocation ELBO term of the DP mixture at optimal `η`.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn dp_elbo(n: ArrayView1<f64>, gamma: f64) -> Result<f64> {
    let (e1, e0) = dp_eta(n, gamma)?;
    let c0 = c_beta(1.0, gamma);
    Ok((0..n.len()).map(|k| c0 - c_beta(e1[k], e0[k])).sum())
}

/// Optimal Dirichlet parameters `θ_k = γ/K + N_k` of the finite mixture.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn finite_theta(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    check(n, gamma)?;
    let a = gamma / n.len().max(1) as f64;
    Ok(n.mapv(|v| a + v.max(0.0)))
}

/// `E_q[ln π_k] = ψ(θ_k) − ψ(Σθ)` of the finite mixture.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn finite_e_log_pi(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    let th = finite_theta(n, gamma)?;
    let t = digamma(th.sum());
    Ok(th.mapv(|v| digamma(v) - t))
}

/// Allocation ELBO term of the finite mixture at optimal `θ`.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn finite_elbo(n: ArrayView1<f64>, gamma: f64) -> Result<f64> {
    let th = finite_theta(n, gamma)?;
    let prior = Array1::from_elem(n.len(), gamma / n.len().max(1) as f64);
    Ok(c_dir(prior.as_slice().expect("contiguous")) - c_dir(th.as_slice().expect("contiguous")))
}

/// An allocation model chosen at run time: `E[ln π]` and the ELBO term as functions of the
/// counts `N` only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Alloc {
    /// stick-breaking DP mixture with concentration `gamma`
    Dp {
        /// concentration `γ`
        gamma: f64,
    },
    /// finite mixture with a symmetric `Dirichlet(γ/K)` prior
    Finite {
        /// concentration `γ`
        gamma: f64,
    },
}

impl Alloc {
    /// Check the concentration.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] naming `gamma` if it is not finite and > 0.
    pub fn check(&self) -> Result<()> {
        let (Alloc::Dp { gamma } | Alloc::Finite { gamma }) = *self;
        check(Array1::<f64>::zeros(0).view(), gamma)
    }

    /// `E_q[ln π_k]` at the optimal allocation posterior for counts `n`.
    ///
    /// # Errors
    /// Invalid `gamma` or non-finite counts.
    pub fn e_log_pi(&self, n: ArrayView1<f64>) -> Result<Array1<f64>> {
        match *self {
            Alloc::Dp { gamma } => dp_e_log_pi(n, gamma),
            Alloc::Finite { gamma } => finite_e_log_pi(n, gamma),
        }
    }

    /// Allocation ELBO term at the optimal allocation posterior for counts `n`.
    ///
    /// # Errors
    /// Invalid `gamma` or non-finite counts.
    pub fn elbo(&self, n: ArrayView1<f64>) -> Result<f64> {
        match *self {
            Alloc::Dp { gamma } => dp_elbo(n, gamma),
            Alloc::Finite { gamma } => finite_elbo(n, gamma),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn eta0_uses_counts_of_later_clusters() {
        let (e1, e0) = dp_eta(array![3.0, 2.0, 1.0].view(), 0.5).unwrap();
        assert_eq!(e1.to_vec(), vec![4.0, 3.0, 2.0]);
        assert_eq!(e0.to_vec(), vec![3.5, 1.5, 0.5]);
    }

    #[test]
    fn prior_expected_weights() {
        // with N = 0: E[π_k] = γ^{k-1}/(1+γ)^k
        let g: f64 = 2.0;
        let e = dp_e_pi(Array1::zeros(4).view(), g).unwrap();
        for k in 0..4 {
            let want = g.powi(k as i32) / (1.0 + g).powi(k as i32 + 1);
            assert!((e[k] - want).abs() < 1e-15);
        }
    }

    #[test]
    fn empty_clusters_at_the_end_cost_nothing() {
        let a = dp_elbo(array![5.0, 3.0].view(), 1.5).unwrap();
        let b = dp_elbo(array![5.0, 3.0, 0.0].view(), 1.5).unwrap();
        assert!((a - b).abs() < 1e-12);
    }
}
