//! Diagonal-covariance Gaussian with a Normal-Gamma prior (the Normal-Gamma conjugate pair; Bishop 2006 §2.3.6).
//!
//! Per dimension `λ_d ~ Gamma(ν/2, β_d/2)`, `μ_d | λ_d ~ N(m_d, (κ λ_d)⁻¹)`. Posterior
//! `κ̂ = κ + N`, `ν̂ = ν + N`, `m̂_d = (κ m_d + Sx_d)/κ̂`, `β̂_d = β_d + Sx2_d + κ m_d² − κ̂ m̂_d²`.
//! `E_q[log F(x|φ_k)] = Σ_d [−½ ln 2π + ½ E ln λ_kd − ½ (1/κ̂_k + E λ_kd (x_d − m̂_kd)²)]` with
//! `E λ = ν̂/β̂`, `E ln λ = ψ(ν̂/2) − ln(β̂/2)`: one GEMM of `[x, x²]` with a `2D × K` matrix.
//! `c_NG = Σ_d [−½ ln 2π + ½ ln κ + ν/2 ln(β_d/2) − ln Γ(ν/2)]`.

use std::f64::consts::PI;

use ndarray::{s, Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::{lin_sum_from_stats, FeatureMap, LogLikTable, ObsModel};
use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::special::{digamma, gammaln};

/// Diagonal Gaussian observation model.
#[derive(Debug, Clone)]
pub struct DiagGauss {
    d: usize,
    nu: f64,
    kappa: f64,
    m: Array1<f64>,
    beta: Array1<f64>,
    c0: f64,
}

/// Posterior of all clusters of a [`DiagGauss`] model.
#[derive(Debug, Clone)]
pub struct DiagGaussPost {
    /// `ν̂_k`
    pub nu: Array1<f64>,
    /// `κ̂_k`
    pub kappa: Array1<f64>,
    /// `m̂_kd`
    pub mean: Array2<f64>,
    /// `β̂_kd`
    pub beta: Array2<f64>,
}

impl DiagGauss {
    /// Normal-Gamma prior `(ν, κ, m, β)`.
    ///
    /// # Errors
    /// Non-positive `ν`, `κ` or `β_d`, shape mismatch or non-finite values.
    pub fn new(nu: f64, kappa: f64, m: Array1<f64>, beta: Array1<f64>) -> Result<Self> {
        let d = beta.len();
        if d == 0 {
            return Err(Error::shape("prior_covariance", "(D,) with D >= 1", "(0,)"));
        }
        if m.len() != d {
            return Err(Error::shape("prior_mean", format!("({d},)"), format!("({},)", m.len())));
        }
        if !(nu > 0.0) || !nu.is_finite() {
            return Err(Error::param("prior_dof", format!("must be > 0, got {nu}")));
        }
        if !(kappa > 0.0) || !kappa.is_finite() {
            return Err(Error::param("prior_mean_precision", format!("must be > 0, got {kappa}")));
        }
        if m.iter().any(|v| !v.is_finite()) {
            return Err(Error::NonFinite { what: "prior mean".into() });
        }
        if beta.iter().any(|&b| !(b > 0.0) || !b.is_finite()) {
            return Err(Error::param("prior_covariance", "all prior variances must be finite and > 0"));
        }
        let mut g = DiagGauss { d, nu, kappa, m, beta, c0: 0.0 };
        g.c0 = g.c_func(nu, kappa, g.beta.view());
        Ok(g)
    }

    fn c_func(&self, nu: f64, kappa: f64, beta: ArrayView1<f64>) -> f64 {
        let per = -0.5 * (2.0 * PI).ln() + 0.5 * kappa.ln() - gammaln(0.5 * nu);
        beta.iter().map(|&b| per + 0.5 * nu * (0.5 * b).ln()).sum()
    }

    fn table(&self, post: &DiagGaussPost, plugin: bool) -> Result<LogLikTable> {
        let d = self.d;
        let k = post.nu.len();
        let mut w = Array2::zeros((2 * d, k));
        let mut cst = Array1::zeros(k);
        for j in 0..k {
            let mut c = 0.0;
            for dd in 0..d {
                let (p, half_log_p) = if plugin {
                    let denom = post.nu[j] - 2.0;
                    if !(denom > 0.0) {
                        return Err(Error::param("prior_dof", "posterior-mean variance needs nu_hat > 2"));
                    }
                    let p = denom / post.beta[[j, dd]];
                    (p, 0.5 * p.ln())
                } else {
                    let p = post.nu[j] / post.beta[[j, dd]];
                    (p, 0.5 * (digamma(0.5 * post.nu[j]) - (0.5 * post.beta[[j, dd]]).ln()))
                };
                let m = post.mean[[j, dd]];
                w[[dd, j]] = p * m;
                w[[d + dd, j]] = -0.5 * p;
                c += -0.5 * (2.0 * PI).ln() + half_log_p - 0.5 * p * m * m;
                if !plugin {
                    c -= 0.5 / post.kappa[j];
                }
            }
            cst[j] = c;
        }
        Ok(LogLikTable::Lin { feat: FeatureMap::WithSquares, w, cst })
    }

    fn prior_var(&self) -> Array1<f64> {
        let denom = if self.nu > 2.0 { self.nu - 2.0 } else { self.nu };
        &self.beta / denom
    }
}

impl ObsModel for DiagGauss {
    type Post = DiagGaussPost;
    type DivPrep = Array2<f64>;

    fn kind(&self) -> &'static str {
        "diag_gauss"
    }
    fn n_features(&self) -> usize {
        self.d
    }
    fn stat_dim(&self) -> usize {
        2 * self.d
    }
    fn h_sum(&self, x: ArrayView2<f64>) -> f64 {
        -0.5 * (x.nrows() * self.d) as f64 * (2.0 * PI).ln()
    }

    fn posterior(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<DiagGaussPost> {
        let d = self.d;
        let k = n.len();
        let mut post =
            DiagGaussPost { nu: Array1::zeros(k), kappa: Array1::zeros(k), mean: Array2::zeros((k, d)), beta: Array2::zeros((k, d)) };
        for j in 0..k {
            let nk = n[j].max(0.0);
            let kap = self.kappa + nk;
            post.nu[j] = self.nu + nk;
            post.kappa[j] = kap;
            for dd in 0..d {
                let sx = s[[j, dd]];
                let sx2 = s[[j, d + dd]];
                let m = (self.kappa * self.m[dd] + sx) / kap;
                let b = self.beta[dd] + sx2 + self.kappa * self.m[dd] * self.m[dd] - kap * m * m;
                if !(b > 0.0) || !b.is_finite() {
                    return Err(Error::NotPositiveDefinite { component: j, what: "posterior Gamma rate".into() });
                }
                post.mean[[j, dd]] = m;
                post.beta[[j, dd]] = b;
            }
        }
        Ok(post)
    }

    fn c_prior(&self) -> f64 {
        self.c0
    }
    fn c_post(&self, post: &DiagGaussPost) -> Array1<f64> {
        Array1::from_iter((0..post.nu.len()).map(|k| self.c_func(post.nu[k], post.kappa[k], post.beta.row(k))))
    }
    fn e_log_lik_table(&self, post: &DiagGaussPost) -> LogLikTable {
        self.table(post, false).expect("expectation table cannot fail")
    }
    fn plugin_table(&self, post: &DiagGaussPost) -> Result<LogLikTable> {
        self.table(post, true)
    }

    fn feature_map(&self) -> FeatureMap {
        FeatureMap::WithSquares
    }
    fn summarize_block(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>, mut s: ArrayViewMut2<f64>) {
        let d = self.d;
        gemm(1.0, resp.t(), x, 1.0, s.slice_mut(s![.., 0..d]));
        let sq = x.mapv(|v| v * v);
        gemm(1.0, resp.t(), sq.view(), 1.0, s.slice_mut(s![.., d..2 * d]));
    }

    fn e_log_lik_sum_from_stats(&self, post: &DiagGaussPost, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64> {
        lin_sum_from_stats(&self.e_log_lik_table(post), n, s)
    }

    fn point_estimates(&self, post: &DiagGaussPost) -> Vec<(&'static str, ArrayD<f64>)> {
        let denom = post.nu.mapv(|v| v - 2.0).insert_axis(Axis(1));
        vec![
            ("means", post.mean.clone().into_dyn()),
            ("covariances", (&post.beta / &denom).into_dyn()),
            ("dof", post.nu.clone().into_dyn()),
        ]
    }

    fn div_prepare(&self, x: ArrayView2<f64>) -> Result<Array2<f64>> {
        let inv_sd = self.prior_var().mapv(|v| 1.0 / v.sqrt());
        Ok(&x * &inv_sd)
    }

    fn div_to(&self, t: &Array2<f64>, i: usize, out: &mut [f64]) {
        let c = t.row(i).to_owned();
        out.par_iter_mut().zip(t.axis_iter(Axis(0)).into_par_iter()).for_each(|(o, tn)| {
            *o = 0.5 * tn.iter().zip(c.iter()).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
        });
    }
}
