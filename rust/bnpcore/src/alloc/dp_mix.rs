//! Dirichlet-process mixture allocation (Hughes thesis §3.2–§3.4; Hughes & Sudderth, NIPS 2013).
//!
//! `q(u_k) = Beta(η_k1, η_k0)` with optimal `η_k1 = 1 + N_k`, `η_k0 = γ + N^>_k`; the ELBO term at
//! the optimum is `Σ_k [c_B(1, γ) − c_B(1 + N_k, γ + N^>_k)]` with
//! `c_B(a, b) = ln Γ(a + b) − ln Γ(a) − ln Γ(b)`. Empty clusters at the end cost nothing, so the
//! model is nested in the truncation `K`.

use ndarray::{Array1, Array2, ArrayView1};

use super::{check, stick};
use crate::error::Result;
use crate::special::c_beta;

/// Optimal Beta parameters `(η_1, η_0)` of the sticks.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn eta(n: ArrayView1<f64>, gamma: f64) -> Result<(Array1<f64>, Array1<f64>)> {
    check(n, gamma)?;
    let eta1 = n.mapv(|v| 1.0 + v.max(0.0));
    let eta0 = stick::n_greater(n).mapv(|v| gamma + v);
    Ok((eta1, eta0))
}

/// `E_q[ln π_k]` at the optimal sticks.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn e_log_pi(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    let (e1, e0) = eta(n, gamma)?;
    Ok(stick::e_log_pi(e1.view(), e0.view()))
}

/// `E_q[π_k]` at the optimal sticks (sums to less than 1).
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn e_pi(n: ArrayView1<f64>, gamma: f64) -> Result<Array1<f64>> {
    let (e1, e0) = eta(n, gamma)?;
    Ok(stick::e_pi(e1.view(), e0.view()))
}

/// Allocation ELBO term at the optimal sticks.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn elbo(n: ArrayView1<f64>, gamma: f64) -> Result<f64> {
    let (e1, e0) = eta(n, gamma)?;
    let c0 = c_beta(1.0, gamma);
    Ok((0..n.len()).map(|k| c0 - c_beta(e1[k], e0[k])).sum())
}

/// Exact change of the allocation ELBO term when clusters `i < j` merge (`N_i ← N_i + N_j`,
/// column `j` removed), for every pair, in `O(K²)` (Hughes thesis §4.1):
///
/// `Δ_ij = c_B(η̂_j) − c_B(1, γ) + c_B(η̂_i) − c_B(η̂_i1 + N_j, η̂_i0 − N_j)
///        + Σ_{i<k<j} [c_B(η̂_k) − c_B(η̂_k1, η̂_k0 − N_j)]`
///
/// with `η̂` the optimal sticks before the merge (counts clamped at 0, `η̂_k0 − N_j` clamped at
/// `γ` against round-off). Entry `[i, j]` for `i < j`; `-inf` elsewhere. For each `j` the middle
/// sums are suffix sums over `k = j−1, …, i+1`.
///
/// # Errors
/// Invalid `gamma` or non-finite counts.
pub fn merge_delta(n: ArrayView1<f64>, gamma: f64) -> Result<Array2<f64>> {
    let (e1, e0) = eta(n, gamma)?;
    let k = n.len();
    let mut out = Array2::from_elem((k, k), f64::NEG_INFINITY);
    let cb: Vec<f64> = (0..k).map(|q| c_beta(e1[q], e0[q])).collect();
    let cb0 = c_beta(1.0, gamma);
    for j in 1..k {
        let nj = n[j].max(0.0);
        // suffix = Σ_{i<k<j} g_j(k), accumulated from k = j−1 down
        let mut suffix = 0.0;
        for i in (0..j).rev() {
            let e0m = (e0[i] - nj).max(gamma);
            let own = cb[i] - c_beta(e1[i] + nj, e0m);
            out[[i, j]] = cb[j] - cb0 + own + suffix;
            suffix += cb[i] - c_beta(e1[i], e0m);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn eta0_uses_counts_of_later_clusters() {
        let (e1, e0) = eta(array![3.0, 2.0, 1.0].view(), 0.5).unwrap();
        assert_eq!(e1.to_vec(), vec![4.0, 3.0, 2.0]);
        assert_eq!(e0.to_vec(), vec![3.5, 1.5, 0.5]);
    }

    #[test]
    fn prior_expected_weights() {
        // with N = 0: E[π_k] = γ^{k-1}/(1+γ)^k
        let g: f64 = 2.0;
        let e = e_pi(Array1::zeros(4).view(), g).unwrap();
        for k in 0..4 {
            let want = g.powi(k as i32) / (1.0 + g).powi(k as i32 + 1);
            assert!((e[k] - want).abs() < 1e-15);
        }
    }

    #[test]
    fn empty_clusters_at_the_end_cost_nothing() {
        let a = elbo(array![5.0, 3.0].view(), 1.5).unwrap();
        let b = elbo(array![5.0, 3.0, 0.0].view(), 1.5).unwrap();
        assert!((a - b).abs() < 1e-12);
    }

    #[test]
    fn merge_delta_is_the_elbo_difference() {
        let n = array![7.0, 0.5, 3.0, 12.0, 1.0];
        let g = 1.7;
        let d = merge_delta(n.view(), g).unwrap();
        let base = elbo(n.view(), g).unwrap();
        for i in 0..5 {
            for j in 0..5 {
                if i < j {
                    let mut m: Vec<f64> = n.to_vec();
                    m[i] += m[j];
                    m.remove(j);
                    let want = elbo(Array1::from(m).view(), g).unwrap() - base;
                    assert!((d[[i, j]] - want).abs() < 1e-10, "{i} {j}: {} vs {want}", d[[i, j]]);
                } else {
                    assert_eq!(d[[i, j]], f64::NEG_INFINITY);
                }
            }
        }
    }
}
