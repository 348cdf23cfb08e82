//! Finite mixture with a symmetric `Dirichlet(γ/K)` prior on the weights (Hughes thesis §2.5–§2.6).
//!
//! `q(π) = Dir(θ)` with optimal `θ_k = γ/K + N_k`; `E[ln π_k] = ψ(θ_k) − ψ(Σθ)`,
//! `E[π_k] = θ_k/Σθ`, ELBO term `c_Dir(γ/K·1) − c_Dir(θ)` (`c_Dir(γ/K·1)` counted once). The prior
//! depends on `K`, so the model is not nested in the truncation.

use ndarray::{Array1, Array2, ArrayView1};

use super::check;
use crate::error::Result;
use crate::special::{c_dir, digamma, gammaln};

/// Optimal Dirichlet parameters `θ_k = γ/K + N_k` (counts clamped at 0).
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn theta(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    check(n, gamma)?;
    let a = gamma / n.len().max(1) as f64;
    Ok(n.mapv(|v| a + v.max(0.0)))
}

/// `E_q[ln π_k] = ψ(θ_k) − ψ(Σθ)`.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn e_log_pi(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    let th = theta(n, gamma)?;
    let t = digamma(th.sum());
    Ok(th.mapv(|v| digamma(v) - t))
}

/// `E_q[π_k] = θ_k / Σθ` (sums to 1).
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn e_pi(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    let th = theta(n, gamma)?;
    let t = th.sum();
    Ok(th.mapv(|v| v / t))
}

/// Allocation ELBO term at the optimal `θ`.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn elbo(n: ArrayView1<f64>, gamma: f64) -> Result<f64> {
    let th = theta(n, gamma)?;
    let prior = Array1::from_elem(n.len(), gamma / n.len().max(1) as f64);
    Ok(c_dir(prior.as_slice().expect("contiguous")) - c_dir(th.as_slice().expect("contiguous")))
}

/// Exact change of the allocation ELBO term when clusters `i < j` merge, for every pair: the
/// merged model has `K − 1` clusters, so its prior is `Dir(γ/(K−1))`. With `a' = γ/(K−1)`,
/// `L(N) = ln Γ(γ) − K ln Γ(γ/K) − ln Γ(γ + ΣN) + Σ_k ln Γ(γ/K + N_k)` and
///
/// `Δ_ij = L(merged) − L(N) = [(K−1)(−ln Γ(a')) + T' − ln Γ(a' + N_i) − ln Γ(a' + N_j) + ln Γ(a' + N_i + N_j)]
///        − [K(−ln Γ(γ/K)) + T]`
///
/// where `T = Σ_k ln Γ(γ/K + N_k)`, `T' = Σ_k ln Γ(a' + N_k)` (the `ln Γ(γ) − ln Γ(γ + ΣN)` parts
/// cancel): `O(K)` set-up, `O(1)` per pair. Entry `[i, j]` for `i < j`; `-inf` elsewhere.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn merge_delta(n: ArrayView1<f64>, gamma: f64) -> Result<Array2<f64>> {
    check(n, gamma)?;
    let k = n.len();
    let mut out = Array2::from_elem((k, k), f64::NEG_INFINITY);
    if k < 2 {
        return Ok(out);
    }
    let nc: Vec<f64> = n.iter().map(|v| v.max(0.0)).collect();
    let a = gamma / k as f64;
    let a1 = gamma / (k - 1) as f64;
    let t: f64 = nc.iter().map(|&v| gammaln(a + v)).sum();
    let g1: Vec<f64> = nc.iter().map(|&v| gammaln(a1 + v)).collect();
    let t1: f64 = g1.iter().sum();
    let base = -(k as f64) * gammaln(a) + t;
    let merged0 = -((k - 1) as f64) * gammaln(a1) + t1;
    for i in 0..k {
        for j in i + 1..k {
            out[[i, j]] = merged0 - g1[i] - g1[j] + gammaln(a1 + nc[i] + nc[j]) - base;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn expected_weights_sum_to_one() {
        let e = e_pi(array![3.0, 0.0, 1.5].view(), 2.0).unwrap();
        assert!((e.sum() - 1.0).abs() < 1e-15);
    }

    #[test]
    fn merge_delta_is_the_elbo_difference() {
        let n = array![7.0, 0.5, 3.0, 12.0];
        let g = 2.5;
        let d = merge_delta(n.view(), g).unwrap();
        let base = elbo(n.view(), g).unwrap();
        for i in 0..4 {
            for j in i + 1..4 {
                let mut m: Vec<f64> = n.to_vec();
                m[i] += m[j];
                m.remove(j);
                let want = elbo(Array1::from(m).view(), g).unwrap() - base;
                assert!((d[[i, j]] - want).abs() < 1e-10, "{i} {j}: {} vs {want}", d[[i, j]]);
            }
        }
        assert_eq!(d[[1, 0]], f64::NEG_INFINITY);
    }
}
