//! Stick-breaking expectations shared by every model with a Dirichlet-process level: the DP
//! mixture, the top level of the HDP topic model and of the HDP-HMM (Hughes thesis §3.1, §5.1, §6.1).
//!
//! Stick `k` has `q(u_k) = Beta(η_k1, η_k0)` and weight `π_k = u_k Π_{ℓ<k} (1 − u_ℓ)`. These
//! functions take the Beta parameters as they are (optimal or not), so a model whose sticks are
//! optimised numerically (the HDP top level) uses them as well as the DP mixture, whose optimal
//! sticks are closed-form functions of the counts ([`super::dp_mix`]).

use ndarray::{Array1, ArrayView1};

use crate::special::digamma;

/// `N^>_k = Σ_{ℓ>k} N_ℓ`: reverse cumulative sum in f64 of the counts clamped at 0 (round-off
/// negatives), summed from the last cluster down.
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

/// `E_q[ln π_k] = E[ln u_k] + Σ_{ℓ<k} E[ln(1 − u_ℓ)]` with `E[ln u] = ψ(η_1) − ψ(η_1 + η_0)` and
/// `E[ln(1 − u)] = ψ(η_0) − ψ(η_1 + η_0)`. `eta1` and `eta0` have the same length.
pub fn e_log_pi(eta1: ArrayView1<f64>, eta0: ArrayView1<f64>) -> Array1<f64> {
    let mut out = Array1::zeros(eta1.len());
    let mut acc = 0.0;
    for k in 0..eta1.len() {
        let t = digamma(eta1[k] + eta0[k]);
        out[k] = digamma(eta1[k]) - t + acc;
        acc += digamma(eta0[k]) - t;
    }
    out
}

/// `E_q[π_k] = û_k Π_{ℓ<k} (1 − û_ℓ)`, `û = η_1/(η_1 + η_0)`. The entries sum to
/// `1 − Π_k (1 − û_k) < 1`: the rest is the mass of the sticks beyond the truncation.
pub fn e_pi(eta1: ArrayView1<f64>, eta0: ArrayView1<f64>) -> Array1<f64> {
    let mut out = Array1::zeros(eta1.len());
    let mut rest = 1.0;
    for k in 0..eta1.len() {
        let u = eta1[k] / (eta1[k] + eta0[k]);
        out[k] = u * rest;
        rest *= 1.0 - u;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn n_greater_sums_later_clusters_and_clamps() {
        assert_eq!(n_greater(array![3.0, -1e-14, 2.0, 1.0].view()).to_vec(), vec![3.0, 3.0, 1.0, 0.0]);
    }

    #[test]
    fn expected_log_weights_below_log_expected_weights() {
        // Jensen: E[ln π_k] ≤ ln E[π_k]
        let (e1, e0) = (array![2.0, 3.5, 1.0], array![4.0, 1.5, 0.5]);
        let (a, b) = (e_log_pi(e1.view(), e0.view()), e_pi(e1.view(), e0.view()));
        for k in 0..3 {
            assert!(a[k] < b[k].ln());
        }
        assert!(b.sum() < 1.0);
    }
}
