//! Bernoulli (binary vectors) with a Beta prior per dimension (the Beta-Bernoulli conjugate pair).
//!
//! Posterior `λ̂_kd1 = λ̄_d1 + S_kd`, `λ̂_kd0 = λ̄_d0 + N_k − S_kd`;
//! `E_q[log F] = Σ_d [x_d E ln θ_kd + (1 − x_d) E ln(1 − θ_kd)]` = `x·(E ln θ − E ln(1−θ)) + Σ_d E ln(1−θ)`
//! (one GEMM); `c = Σ_d c_Beta(λ̂_kd1, λ̂_kd0)`.

use ndarray::{Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::{check_shape_finite, lin_sum_from_stats, FeatureMap, LogLikTable, ObsModel};
use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::special::{c_beta, digamma};

/// Bernoulli observation model.
#[derive(Debug, Clone)]
pub struct Bern {
    lam1: Array1<f64>,
    lam0: Array1<f64>,
    c0: f64,
}

/// Posterior Beta parameters (`K × D` each).
#[derive(Debug, Clone)]
pub struct BernPost {
    /// `λ̂_kd1`
    pub lam1: Array2<f64>,
    /// `λ̂_kd0`
    pub lam0: Array2<f64>,
}

impl Bern {
    /// Beta prior with pseudo-counts `(λ̄_1, λ̄_0)` per dimension.
    ///
    /// # Errors
    /// Length mismatch or pseudo-counts that are not finite and positive.
    pub fn new(lam1: Array1<f64>, lam0: Array1<f64>) -> Result<Self> {
        if lam1.is_empty() || lam1.len() != lam0.len() {
            return Err(Error::shape("prior_count", "two (D,) arrays with D >= 1", format!("({},), ({},)", lam1.len(), lam0.len())));
        }
        if lam1.iter().chain(lam0.iter()).any(|&l| !(l > 0.0) || !l.is_finite()) {
            return Err(Error::param("prior_count", "Beta pseudo-counts must be finite and > 0"));
        }
        let c0 = lam1.iter().zip(lam0.iter()).map(|(&a, &b)| c_beta(a, b)).sum();
        Ok(Bern { lam1, lam0, c0 })
    }
}

impl ObsModel for Bern {
    type Post = BernPost;
    type DivPrep = Array2<f64>;

    fn kind(&self) -> &'static str {
        "bern"
    }
    fn n_features(&self) -> usize {
        self.lam1.len()
    }
    fn stat_dim(&self) -> usize {
        self.lam1.len()
    }
    fn check_data(&self, x: ArrayView2<f64>, name: &str) -> Result<()> {
        check_shape_finite(x, self.n_features(), name)?;
        if x.iter().any(|&v| v != 0.0 && v != 1.0) {
            return Err(Error::data(name, "Bernoulli data must contain only 0 and 1"));
        }
        Ok(())
    }
    fn check_sparse_values(&self, values: &[f64], name: &str) -> Result<()> {
        if values.iter().any(|&v| v != 0.0 && v != 1.0) {
            return Err(Error::data(name, "Bernoulli data must contain only 0 and 1"));
        }
        Ok(())
    }
    fn h_sum(&self, _x: ArrayView2<f64>) -> f64 {
        0.0
    }
    fn posterior(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<BernPost> {
        let k = n.len();
        let d = self.lam1.len();
        let mut lam1 = Array2::zeros((k, d));
        let mut lam0 = Array2::zeros((k, d));
        for j in 0..k {
            let nk = n[j].max(0.0);
            for dd in 0..d {
                let sv = s[[j, dd]].clamp(0.0, nk);
                lam1[[j, dd]] = self.lam1[dd] + sv;
                lam0[[j, dd]] = self.lam0[dd] + nk - sv;
            }
        }
        Ok(BernPost { lam1, lam0 })
    }
    fn c_prior(&self) -> f64 {
        self.c0
    }
    fn c_post(&self, post: &BernPost) -> Array1<f64> {
        Array1::from_iter(
            post.lam1.rows().into_iter().zip(post.lam0.rows()).map(|(a, b)| a.iter().zip(b.iter()).map(|(&x, &y)| c_beta(x, y)).sum()),
        )
    }
    fn e_log_lik_table(&self, post: &BernPost) -> LogLikTable {
        let (k, d) = post.lam1.dim();
        let mut w = Array2::zeros((d, k));
        let mut cst = Array1::zeros(k);
        for j in 0..k {
            for dd in 0..d {
                let (a, b) = (post.lam1[[j, dd]], post.lam0[[j, dd]]);
                let t = digamma(a + b);
                let e1 = digamma(a) - t;
                let e0 = digamma(b) - t;
                w[[dd, j]] = e1 - e0;
                cst[j] += e0;
            }
        }
        LogLikTable::Lin { feat: FeatureMap::Identity, w, cst }
    }
    fn plugin_table(&self, post: &BernPost) -> Result<LogLikTable> {
        let (k, d) = post.lam1.dim();
        let mut w = Array2::zeros((d, k));
        let mut cst = Array1::zeros(k);
        for j in 0..k {
            for dd in 0..d {
                let (a, b) = (post.lam1[[j, dd]], post.lam0[[j, dd]]);
                let l1 = (a / (a + b)).ln();
                let l0 = (b / (a + b)).ln();
                w[[dd, j]] = l1 - l0;
                cst[j] += l0;
            }
        }
        Ok(LogLikTable::Lin { feat: FeatureMap::Identity, w, cst })
    }
    fn feature_map(&self) -> FeatureMap {
        FeatureMap::Identity
    }
    fn summarize_block(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>, s: ArrayViewMut2<f64>) {
        gemm(1.0, resp.t(), x, 1.0, s);
    }
    fn e_log_lik_sum_from_stats(&self, post: &BernPost, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64> {
        lin_sum_from_stats(&self.e_log_lik_table(post), n, s)
    }
    fn point_estimates(&self, post: &BernPost) -> Vec<(&'static str, ArrayD<f64>)> {
        vec![("means", (&post.lam1 / &(&post.lam1 + &post.lam0)).into_dyn())]
    }
    fn div_prepare(&self, x: ArrayView2<f64>) -> Result<Array2<f64>> {
        let denom = &(&self.lam1 + &self.lam0) + 1.0;
        Ok((&x + &self.lam1) / &denom)
    }
    fn div_to(&self, t: &Array2<f64>, i: usize, out: &mut [f64]) {
        let c = t.row(i).to_owned();
        out.par_iter_mut().zip(t.axis_iter(Axis(0)).into_par_iter()).for_each(|(o, tn)| {
            let mut acc: f64 = 0.0;
            for (&a, &b) in tn.iter().zip(c.iter()) {
                acc += a * (a / b).ln() + (1.0 - a) * ((1.0 - a) / (1.0 - b)).ln();
            }
            *o = acc.max(0.0);
        });
    }
}
