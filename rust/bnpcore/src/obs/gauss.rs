//! Full-covariance Gaussian with a Normal-Wishart prior, and zero-mean Gaussian with a Wishart
//! prior (Hughes thesis §2.2, §3.6.1; Bishop 2006 §10.2).
//!
//! Prior `Λ ~ W(ν, B⁻¹)` (so `E[Λ] = ν B⁻¹`), `μ | Λ ~ N(m, (κΛ)⁻¹)`. Posterior
//! `κ̂ = κ + N`, `ν̂ = ν + N`, `m̂ = (κ m + Sx)/κ̂`, `B̂ = B + Sxx + κ m mᵀ − κ̂ m̂ m̂ᵀ`
//! (zero mean: `ν̂ = ν + N`, `B̂ = B + Sxx`).
//!
//! `E_q[log F(x|φ_k)] = −D/2 ln 2π + ½ E ln|Λ_k| − ½ (D/κ̂_k + ν̂_k (x − m̂_k)ᵀ B̂_k⁻¹ (x − m̂_k))`
//! with `E ln|Λ| = Σ_d ψ((ν̂+1−d)/2) + D ln 2 − ln|B̂|`. The Mahalanobis term is
//! `‖(x − m̂)ᵀ L⁻ᵀ‖²` with `B̂ = L Lᵀ`, evaluated for a block of rows as one GEMM per cluster.
//!
//! Log normaliser `c_NW = −D/2 ln 2π + D/2 ln κ + ν/2 ln|B| − νD/2 ln 2 − ln Γ_D(ν/2)`
//! (`c_W` drops the first two terms).

use std::f64::consts::PI;

use ndarray::{s, Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::{FeatureMap, LogLikTable, ObsModel};
use crate::error::{Error, Result};
use crate::linalg::{cholesky, cholesky_lower_in_place, gemm, inv_lower, logdet_from_chol, logdet_spd, trace_inv_times};
use crate::special::{multidigamma_sum, multigammaln};

/// Gaussian observation model (full covariance, optionally zero mean).
#[derive(Debug, Clone)]
pub struct Gauss {
    d: usize,
    zero_mean: bool,
    nu: f64,
    kappa: f64,
    m: Array1<f64>,
    b: Array2<f64>,
    c0: f64,
    /// prior `κ m mᵀ` (zero for zero mean)
    kmm: Array2<f64>,
}

/// Posterior of all clusters of a [`Gauss`] model.
#[derive(Debug, Clone)]
pub struct GaussPost {
    /// `ν̂_k`
    pub nu: Array1<f64>,
    /// `κ̂_k` (unused for zero mean)
    pub kappa: Array1<f64>,
    /// `m̂_k` (`K × D`, zeros for zero mean)
    pub mean: Array2<f64>,
    /// `B̂_k`
    pub b: Vec<Array2<f64>>,
    /// inverse Cholesky factors `L_k⁻¹`
    pub chol_inv: Vec<Array2<f64>>,
    /// `ln |B̂_k|`
    pub logdet: Array1<f64>,
}

impl Gauss {
    /// Full-covariance Gaussian with Normal-Wishart prior `(ν, κ, m, B)`.
    ///
    /// # Errors
    /// `ν ≤ D − 1`, `κ ≤ 0`, shape mismatch, non-finite values or `B` not positive definite.
    pub fn new(nu: f64, kappa: f64, m: Array1<f64>, b: Array2<f64>) -> Result<Self> {
        Self::build(false, nu, kappa, m, b)
    }

    /// Zero-mean Gaussian with Wishart prior `(ν, B)`.
    ///
    /// # Errors
    /// `ν ≤ D − 1`, non-finite values or `B` not positive definite.
    pub fn zero_mean(nu: f64, b: Array2<f64>) -> Result<Self> {
        let d = b.nrows();
        Self::build(true, nu, 1.0, Array1::zeros(d), b)
    }

    fn build(zero_mean: bool, nu: f64, kappa: f64, m: Array1<f64>, b: Array2<f64>) -> Result<Self> {
        let d = b.nrows();
        if d == 0 || b.ncols() != d {
            return Err(Error::shape("prior_covariance", "(D, D) with D >= 1", format!("{:?}", b.dim())));
        }
        if m.len() != d {
            return Err(Error::shape("prior_mean", format!("({d},)"), format!("({},)", m.len())));
        }
        if !(nu > d as f64 - 1.0) || !nu.is_finite() {
            return Err(Error::param("prior_dof", format!("must be > n_features - 1 = {}, got {nu}", d - 1)));
        }
        if !(kappa > 0.0) || !kappa.is_finite() {
            return Err(Error::param("prior_mean_precision", format!("must be > 0, got {kappa}")));
        }
        if m.iter().chain(b.iter()).any(|v| !v.is_finite()) {
            return Err(Error::NonFinite { what: "prior mean/covariance".into() });
        }
        let bs = (&b + &b.t()) * 0.5;
        let l = cholesky(bs.view(), 0, "prior scale")
            .map_err(|_| Error::param("prior_covariance", "the prior scale matrix is not positive definite"))?;
        let mut g = Gauss { d, zero_mean, nu, kappa, m: m.clone(), b: bs, c0: 0.0, kmm: Array2::zeros((d, d)) };
        if !zero_mean {
            let mc = m.view().insert_axis(Axis(1));
            g.kmm = mc.dot(&mc.t()) * kappa;
        }
        g.c0 = g.c_func(nu, kappa, logdet_from_chol(l.view()));
        Ok(g)
    }

    /// Whether this is the zero-mean model.
    pub fn is_zero_mean(&self) -> bool {
        self.zero_mean
    }

    fn c_func(&self, nu: f64, kappa: f64, logdet_b: f64) -> f64 {
        let d = self.d as f64;
        let mut c = 0.5 * nu * logdet_b - 0.5 * nu * d * 2f64.ln() - multigammaln(0.5 * nu, self.d);
        if !self.zero_mean {
            c += -0.5 * d * (2.0 * PI).ln() + 0.5 * d * kappa.ln();
        }
        c
    }

    fn sxx_offset(&self) -> usize {
        if self.zero_mean {
            0
        } else {
            self.d
        }
    }

    /// Vech table of `−½ (x − m̂_k)ᵀ (scale_k B̂_k⁻¹) (x − m̂_k) + cst_k` (see [`FeatureMap::Vech`]).
    fn vech_table(&self, post: &GaussPost, scale: ArrayView1<f64>, mut cst: Array1<f64>) -> LogLikTable {
        let d = self.d;
        let k = post.nu.len();
        // tables centre at the prior mean (full-covariance model)
        let fm = FeatureMap::Vech { d, linear: !self.zero_mean, center: if self.zero_mean { None } else { Some(self.m.clone()) } };
        let f = fm.dim(d);
        let lin = if self.zero_mean { 0 } else { d };
        let mut w = Array2::<f64>::zeros((f, k));
        let cols: Vec<(Array1<f64>, f64)> = (0..k)
            .into_par_iter()
            .map(|j| {
                // Λ = scale · L⁻ᵀ L⁻¹
                let li = &post.chol_inv[j];
                let mut lam = Array2::<f64>::zeros((d, d));
                gemm(scale[j], li.t(), li.view(), 0.0, lam.view_mut());
                let mut col = Array1::<f64>::zeros(f);
                let mut p = lin;
                for i in 0..d {
                    col[p] = -0.5 * lam[[i, i]];
                    p += 1;
                    for jj in i + 1..d {
                        col[p] = -0.5 * (lam[[i, jj]] + lam[[jj, i]]);
                        p += 1;
                    }
                }
                let mut extra = 0.0;
                if !self.zero_mean {
                    // δ = m̂ − c: −½(y − δ)ᵀΛ(y − δ) = −½ yᵀΛy + (Λδ)·y − ½ δᵀΛδ
                    let delta = &post.mean.row(j) - &self.m;
                    let ld = lam.dot(&delta);
                    for i in 0..d {
                        col[i] = ld[i];
                    }
                    extra = -0.5 * delta.dot(&ld);
                }
                (col, extra)
            })
            .collect();
        for (j, (col, extra)) in cols.into_iter().enumerate() {
            w.column_mut(j).assign(&col);
            cst[j] += extra;
        }
        LogLikTable::Lin { feat: fm, w, cst }
    }

    fn e_logdet_lambda(&self, post: &GaussPost, k: usize) -> f64 {
        multidigamma_sum(post.nu[k], self.d) + self.d as f64 * 2f64.ln() - post.logdet[k]
    }
}

/// Scratch of [`Gauss::merged_pair_term`] (one per thread).
#[derive(Default)]
pub(crate) struct PairScratch {
    row: Vec<f64>,
    l: Vec<f64>,
    col: Vec<f64>,
}

impl Gauss {
    /// `c(λ̄) − c(λ̄ ⊕ (N_a + N_b, S_a + S_b))` for summary rows `sa`, `sb` (contiguous, finite),
    /// with the arithmetic of [`ObsModel::c_post_from_stats`] on the summed row — the same bits —
    /// but without its temporary `D × D` arrays: the symmetrised posterior scale's lower triangle
    /// is written straight into a reused buffer and factored there. `None` if a summed entry is
    /// not finite (the caller reports it as the unfused path does); `component` tags a
    /// factorisation error.
    pub(crate) fn merged_pair_term(
        &self,
        na: f64,
        nb: f64,
        sa: &[f64],
        sb: &[f64],
        component: usize,
        sc: &mut PairScratch,
    ) -> Option<Result<f64>> {
        let d = self.d;
        let off = self.sxx_offset();
        let nm = na + nb;
        // the summed row (the unfused path's merged row), checked as that path checks it (a fold
        // without early exit vectorises)
        sc.row.clear();
        sc.row.extend(sa.iter().zip(sb).map(|(x, y)| x + y));
        if !nm.is_finite() || !sc.row.iter().fold(true, |ok, v| ok & v.is_finite()) {
            return None;
        }
        let row = &sc.row;
        let nk = nm.max(0.0);
        let nu = self.nu + nk;
        // full covariance: m̂ and κ̂ m̂ m̂ᵀ through the same array operations as the unfused path
        let (kappa, mm) = if self.zero_mean {
            (self.kappa, None)
        } else {
            let kappa = self.kappa + nk;
            let mean = (&self.m * self.kappa + ArrayView1::from(&row[..d])) / kappa;
            let mc = mean.view().insert_axis(Axis(1));
            (kappa, Some(mc.dot(&mc.t()) * kappa))
        };
        sc.l.resize(d * d, 0.0);
        sc.col.resize(d, 0.0);
        // (borrowed where the prior's arrays are in standard layout, as they usually are)
        let (pb, kmm) = (self.b.as_standard_layout(), self.kmm.as_standard_layout());
        let (pb, kmm) = (pb.as_slice().expect("standard layout"), kmm.as_slice().expect("standard layout"));
        // B̂_ij = B_ij + Sxx_ij (+ κ m_i m_j − κ̂ m̂_i m̂_j), then (B̂_ij + B̂_ji) / 2
        let sxx = &row[off..off + d * d];
        let bhat = |i: usize, j: usize| -> f64 {
            let q = i * d + j;
            match &mm {
                None => pb[q] + sxx[q],
                Some(mm) => ((pb[q] + sxx[q]) + kmm[q]) - mm[[i, j]],
            }
        };
        for i in 0..d {
            for j in 0..=i {
                sc.l[i * d + j] = (bhat(i, j) + bhat(j, i)) * 0.5;
            }
        }
        Some(cholesky_lower_in_place(&mut sc.l, d, &mut sc.col, component, "posterior scale B").map(|()| {
            let l = ArrayView2::from_shape((d, d), &sc.l[..d * d]).expect("d × d");
            self.c0 - self.c_func(nu, kappa, logdet_from_chol(l))
        }))
    }
}

/// The `D × D` block `Sxx` of a statistic row, copied (the row may be a strided view, e.g. of a
/// Fortran-ordered `S`).
fn sxx_block(row: ArrayView1<f64>, off: usize, d: usize) -> Array2<f64> {
    Array2::from_shape_fn((d, d), |(i, j)| row[off + i * d + j])
}

impl ObsModel for Gauss {
    type Post = GaussPost;
    type DivPrep = Array2<f64>;

    fn kind(&self) -> &'static str {
        if self.zero_mean {
            "zero_mean_gauss"
        } else {
            "gauss"
        }
    }
    fn n_features(&self) -> usize {
        self.d
    }
    fn stat_dim(&self) -> usize {
        self.sxx_offset() + self.d * self.d
    }
    fn h_sum(&self, x: ArrayView2<f64>) -> f64 {
        -0.5 * (x.nrows() * self.d) as f64 * (2.0 * PI).ln()
    }

    fn posterior(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<GaussPost> {
        let d = self.d;
        let k = n.len();
        let off = self.sxx_offset();
        let per: Vec<Result<(f64, f64, Array1<f64>, Array2<f64>, Array2<f64>, f64)>> = (0..k)
            .into_par_iter()
            .map(|j| {
                let nk = n[j].max(0.0);
                let row = s.row(j);
                let sxx = sxx_block(row, off, d);
                let nu = self.nu + nk;
                let (kappa, mean, mut b) = if self.zero_mean {
                    (self.kappa, Array1::zeros(d), &self.b + &sxx)
                } else {
                    let kappa = self.kappa + nk;
                    let mean = (&self.m * self.kappa + row.slice(s![0..d])) / kappa;
                    let mc = mean.view().insert_axis(Axis(1));
                    let b = &self.b + &sxx + &self.kmm - &(mc.dot(&mc.t()) * kappa);
                    (kappa, mean, b)
                };
                let bt = b.t().to_owned();
                b = (&b + &bt) * 0.5;
                let l = cholesky(b.view(), j, "posterior scale B")?;
                let logdet = logdet_from_chol(l.view());
                Ok((nu, kappa, mean, b, inv_lower(l.view()), logdet))
            })
            .collect();
        let mut post = GaussPost {
            nu: Array1::zeros(k),
            kappa: Array1::zeros(k),
            mean: Array2::zeros((k, d)),
            b: Vec::with_capacity(k),
            chol_inv: Vec::with_capacity(k),
            logdet: Array1::zeros(k),
        };
        for (j, r) in per.into_iter().enumerate() {
            let (nu, kappa, mean, b, li, logdet) = r?;
            post.nu[j] = nu;
            post.kappa[j] = kappa;
            post.mean.row_mut(j).assign(&mean);
            post.b.push(b);
            post.chol_inv.push(li);
            post.logdet[j] = logdet;
        }
        Ok(post)
    }

    fn c_prior(&self) -> f64 {
        self.c0
    }

    fn c_post(&self, post: &GaussPost) -> Array1<f64> {
        Array1::from_iter((0..post.nu.len()).map(|k| self.c_func(post.nu[k], post.kappa[k], post.logdet[k])))
    }

    fn c_post_from_stats(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Array1<f64>> {
        // the arithmetic of `posterior` up to the log-determinant (no inverse factor, no stored
        // matrices), then `c_post`'s formula: bit-identical to `c_post(&posterior(n, s)?)`
        let d = self.d;
        let off = self.sxx_offset();
        let per: Vec<Result<f64>> = (0..n.len())
            .into_par_iter()
            .map(|j| {
                let nk = n[j].max(0.0);
                let row = s.row(j);
                let sxx = sxx_block(row, off, d);
                let nu = self.nu + nk;
                let (kappa, b) = if self.zero_mean {
                    (self.kappa, &self.b + &sxx)
                } else {
                    let kappa = self.kappa + nk;
                    let mean = (&self.m * self.kappa + row.slice(s![0..d])) / kappa;
                    let mc = mean.view().insert_axis(Axis(1));
                    (kappa, &self.b + &sxx + &self.kmm - &(mc.dot(&mc.t()) * kappa))
                };
                let b = (&b + &b.t()) * 0.5;
                let logdet = logdet_spd(b.view(), j, "posterior scale B")?;
                Ok(self.c_func(nu, kappa, logdet))
            })
            .collect();
        per.into_iter().collect::<Result<Vec<f64>>>().map(Array1::from)
    }

    fn e_log_lik_table(&self, post: &GaussPost) -> LogLikTable {
        let d = self.d as f64;
        let k = post.nu.len();
        let mut cst = Array1::zeros(k);
        for j in 0..k {
            let mut c = -0.5 * d * (2.0 * PI).ln() + 0.5 * self.e_logdet_lambda(post, j);
            if !self.zero_mean {
                c -= 0.5 * d / post.kappa[j];
            }
            cst[j] = c;
        }
        // E[Λ_k] = ν̂_k B̂_k⁻¹
        self.vech_table(post, post.nu.view(), cst)
    }

    fn plugin_table(&self, post: &GaussPost) -> Result<LogLikTable> {
        // N(x | m̂, Σ̂) with Σ̂ = B̂ / (ν̂ − D − 1), Σ̂⁻¹ = (ν̂ − D − 1) B̂⁻¹
        let d = self.d as f64;
        let k = post.nu.len();
        let mut cst = Array1::zeros(k);
        let mut scale = Array1::zeros(k);
        for j in 0..k {
            let sc = post.nu[j] - d - 1.0;
            if !(sc > 0.0) {
                return Err(Error::param(
                    "prior_dof",
                    format!("posterior-mean covariance needs nu_hat > D + 1 (cluster {j} has {})", post.nu[j]),
                ));
            }
            let logdet_sigma = post.logdet[j] - d * sc.ln();
            cst[j] = -0.5 * d * (2.0 * PI).ln() - 0.5 * logdet_sigma;
            scale[j] = sc;
        }
        Ok(self.vech_table(post, scale.view(), cst))
    }

    fn summarize_block(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>, mut s: ArrayViewMut2<f64>) {
        let fm = self.feature_map();
        let mut buf = Vec::new();
        let phi = fm.apply(x, &mut buf);
        let k = resp.ncols();
        let mut acc = Array2::<f64>::zeros((k, phi.ncols()));
        gemm(1.0, resp.t(), phi, 0.0, acc.view_mut());
        let n = resp.sum_axis(Axis(0));
        s += &self.acc_finish(n.view(), acc);
    }

    fn feature_map(&self) -> FeatureMap {
        FeatureMap::Vech { d: self.d, linear: !self.zero_mean, center: None }
    }

    fn acc_finish(&self, _n: ArrayView1<f64>, acc: Array2<f64>) -> Array2<f64> {
        let d = self.d;
        let k = acc.nrows();
        let off = self.sxx_offset();
        let lin = if self.zero_mean { 0 } else { d };
        let mut out = Array2::<f64>::zeros((k, self.stat_dim()));
        for j in 0..k {
            let a = acc.row(j);
            let a = a.as_slice().expect("contiguous");
            let mut o = out.row_mut(j);
            let o = o.as_slice_mut().expect("contiguous");
            let mut p = lin;
            for i in 0..d {
                for jj in i..d {
                    let v = a[p];
                    o[off + i * d + jj] = v;
                    o[off + jj * d + i] = v;
                    p += 1;
                }
            }
            if !self.zero_mean {
                o[..d].copy_from_slice(&a[..d]);
            }
        }
        out
    }

    fn e_log_lik_sum_from_stats(&self, post: &GaussPost, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64> {
        let d = self.d;
        let df = d as f64;
        let off = self.sxx_offset();
        Array1::from_iter((0..n.len()).map(|k| {
            let nk = n[k];
            let row = s.row(k);
            let sxx = sxx_block(row, off, d);
            let mut c = -0.5 * df * (2.0 * PI).ln() + 0.5 * self.e_logdet_lambda(post, k);
            let mut m2 = sxx;
            if !self.zero_mean {
                c -= 0.5 * df / post.kappa[k];
                let sx = row.slice(s![0..d]).insert_axis(Axis(1));
                let mm = post.mean.row(k).insert_axis(Axis(1));
                let cross = sx.dot(&mm.t());
                m2 = m2 - &cross - cross.t() + &(mm.dot(&mm.t()) * nk);
            }
            nk * c - 0.5 * post.nu[k] * trace_inv_times(post.chol_inv[k].view(), m2.view())
        }))
    }

    fn point_estimates(&self, post: &GaussPost) -> Vec<(&'static str, ArrayD<f64>)> {
        let d = self.d;
        let k = post.nu.len();
        let mut cov = ndarray::Array3::<f64>::zeros((k, d, d));
        for j in 0..k {
            let denom = post.nu[j] - d as f64 - 1.0;
            cov.slice_mut(s![j, .., ..]).assign(&(&post.b[j] / denom));
        }
        let mut out = vec![("covariances", cov.into_dyn())];
        if !self.zero_mean {
            out.insert(0, ("means", post.mean.clone().into_dyn()));
        }
        out.push(("dof", post.nu.clone().into_dyn()));
        out
    }

    fn div_prepare(&self, x: ArrayView2<f64>) -> Result<Array2<f64>> {
        // whiten with the prior expected covariance Σ0 = B / (ν − D − 1) (or B/ν if ν ≤ D + 1)
        let denom = if self.nu > self.d as f64 + 1.0 { self.nu - self.d as f64 - 1.0 } else { self.nu };
        let sigma0 = &self.b / denom;
        let l = cholesky(sigma0.view(), 0, "prior covariance")?;
        let li = inv_lower(l.view());
        let mut t = Array2::zeros(x.dim());
        gemm(1.0, x, li.t(), 0.0, t.view_mut());
        Ok(t)
    }

    fn div_to(&self, t: &Array2<f64>, i: usize, out: &mut [f64]) {
        let c = t.row(i).to_owned();
        let cc: f64 = c.dot(&c);
        let zero_mean = self.zero_mean;
        out.par_iter_mut().zip(t.axis_iter(Axis(0)).into_par_iter()).for_each(|(o, tn)| {
            if zero_mean {
                // KL between N(0,(I + t tᵀ)/2) and N(0,(I + c cᵀ)/2), whitened coordinates
                let tt: f64 = tn.dot(&tn);
                let ct: f64 = tn.dot(&c);
                let v = 0.5 * (tt - (cc + ct * ct) / (1.0 + cc) - (1.0 + tt).ln() + (1.0 + cc).ln());
                *o = v.max(0.0);
            } else {
                let mut acc = 0.0;
                for (a, b) in tn.iter().zip(c.iter()) {
                    acc += (a - b) * (a - b);
                }
                *o = 0.5 * acc;
            }
        });
    }
}
