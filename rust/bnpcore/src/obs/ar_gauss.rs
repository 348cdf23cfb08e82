//! First-order auto-regressive Gaussian with a Matrix-Normal-Wishart prior (Hughes thesis Eq. 6.3;
//! Fox et al. 2014 for the motion-capture use).
//!
//! `x_t | z_t = k ~ N(A_k p_t, Λ_k⁻¹)` with the covariate `p_t = x_{t−1}` (`F` outputs, `E` inputs).
//! Prior `Λ ~ W(ν, B⁻¹)`, `A | Λ ~ MN(M, Λ⁻¹, V⁻¹)` (`vec A ~ N(vec M, V⁻¹ ⊗ Λ⁻¹)`).
//!
//! **Data layout.** A row of the data matrix is `y = [x, p]` (`F + E` columns, e.g.
//! `np.hstack([X[1:], X[:-1]])` inside each sequence). The statistic row is `vec(Σ r y yᵀ)`, whose
//! blocks are `Sxx = Σ r x xᵀ`, `Sxp = Σ r x pᵀ`, `Spp = Σ r p pᵀ` — the zero-mean Gaussian
//! statistic of `y`, so summaries reuse that model's feature map.
//!
//! **Posterior.** `ν̂ = ν + N`, `V̂ = V + Spp`, `M̂ = (Sxp + M V) V̂⁻¹`,
//! `B̂ = B + Sxx + M V Mᵀ − M̂ V̂ M̂ᵀ`.
//!
//! **Expected log-likelihood.** `E_q[log p(x|p, φ_k)] = −F/2 ln 2π + ½ E ln|Λ| −
//! ½ [ν̂ (x − M̂p)ᵀ B̂⁻¹ (x − M̂p) + F pᵀ V̂⁻¹ p]`, `E ln|Λ| = Σ_i ψ((ν̂+1−i)/2) + F ln 2 − ln|B̂|`:
//! a quadratic form `−½ yᵀ Q y + cst` with `Q = ν̂ [I, −M̂]ᵀ B̂⁻¹ [I, −M̂] + F [0 0; 0 V̂⁻¹]`.
//!
//! **Log normaliser** (sign convention of Hughes thesis §2.2: ELBO data term `Σh + Σ_k [c(prior) − c(post_k)]`):
//! `c = ν/2 ln|B| − νF/2 ln 2 − ln Γ_F(ν/2) + F/2 ln|V|`, with `h(x) = −F/2 ln 2π` per row.

use std::f64::consts::PI;

use ndarray::{s, Array1, Array2, Array3, ArrayD, ArrayView1, ArrayView2, ArrayViewMut2};

use super::{FeatureMap, Gauss, LogLikTable, ObsModel};
use crate::error::{Error, Result};
use crate::linalg::{cholesky, inv_lower, logdet_from_chol};
use crate::special::{multidigamma_sum, multigammaln};

/// Auto-regressive Gaussian observation model.
#[derive(Debug, Clone)]
pub struct ArGauss {
    f: usize,
    e: usize,
    nu: f64,
    b: Array2<f64>,
    v: Array2<f64>,
    /// `M V Mᵀ` of the prior
    mvm: Array2<f64>,
    /// `M V` of the prior
    mv: Array2<f64>,
    c0: f64,
    /// zero-mean Gaussian on `y = [x, p]`, used only for its statistics (`vec(Σ r y yᵀ)`)
    stats: Box<Gauss>,
}

/// Posterior of all states of an [`ArGauss`] model.
#[derive(Debug, Clone)]
pub struct ArGaussPost {
    /// `ν̂_k`
    pub nu: Array1<f64>,
    /// `M̂_k` (`F × E` each)
    pub mean: Vec<Array2<f64>>,
    /// `B̂_k`
    pub b: Vec<Array2<f64>>,
    /// `B̂_k⁻¹`
    pub b_inv: Vec<Array2<f64>>,
    /// `V̂_k⁻¹`
    pub v_inv: Vec<Array2<f64>>,
    /// `ln|B̂_k|`
    pub logdet_b: Array1<f64>,
    /// `ln|V̂_k|`
    pub logdet_v: Array1<f64>,
}

fn sym(a: &Array2<f64>) -> Array2<f64> {
    (a + &a.t()) * 0.5
}

fn spd_inv_logdet(a: &Array2<f64>, k: usize, what: &str) -> Result<(Array2<f64>, f64)> {
    let l = cholesky(a.view(), k, what)?;
    let li = inv_lower(l.view());
    Ok((li.t().dot(&li), logdet_from_chol(l.view())))
}

impl ArGauss {
    /// Prior `(ν, B, M, V)`: `B` is `F × F`, `M` is `F × E`, `V` is `E × E`.
    ///
    /// # Errors
    /// Shape mismatch, `ν ≤ F − 1`, non-finite values, `B` or `V` not positive definite.
    pub fn new(nu: f64, b: Array2<f64>, m: Array2<f64>, v: Array2<f64>) -> Result<Self> {
        let f = b.nrows();
        if f == 0 || b.ncols() != f {
            return Err(Error::shape("prior_covariance", "(F, F) with F >= 1", format!("{:?}", b.dim())));
        }
        let e = v.nrows();
        if e == 0 || v.ncols() != e {
            return Err(Error::shape("prior_input_precision", "(E, E) with E >= 1", format!("{:?}", v.dim())));
        }
        if m.dim() != (f, e) {
            return Err(Error::shape("prior_ar_mean", format!("({f}, {e})"), format!("{:?}", m.dim())));
        }
        if !(nu > f as f64 - 1.0) || !nu.is_finite() {
            return Err(Error::param("prior_dof", format!("must be > n_outputs - 1 = {}, got {nu}", f - 1)));
        }
        if b.iter().chain(m.iter()).chain(v.iter()).any(|x| !x.is_finite()) {
            return Err(Error::NonFinite { what: "AR prior".into() });
        }
        let (b, v) = (sym(&b), sym(&v));
        let (_, ldb) = spd_inv_logdet(&b, 0, "prior scale B")
            .map_err(|_| Error::param("prior_covariance", "the prior scale matrix is not positive definite"))?;
        let (_, ldv) = spd_inv_logdet(&v, 0, "prior input precision V")
            .map_err(|_| Error::param("prior_input_precision", "the prior precision V is not positive definite"))?;
        let mv = m.dot(&v);
        let mvm = sym(&mv.dot(&m.t()));
        let stats = Box::new(Gauss::zero_mean((f + e) as f64 + 1.0, Array2::eye(f + e))?);
        let mut g = ArGauss { f, e, nu, b, v, mvm, mv, c0: 0.0, stats };
        g.c0 = g.c_func(nu, ldb, ldv);
        Ok(g)
    }

    /// Number of outputs `F` (columns of `x`).
    pub fn n_outputs(&self) -> usize {
        self.f
    }

    fn c_func(&self, nu: f64, logdet_b: f64, logdet_v: f64) -> f64 {
        let f = self.f as f64;
        0.5 * nu * logdet_b - 0.5 * nu * f * 2f64.ln() - multigammaln(0.5 * nu, self.f) + 0.5 * f * logdet_v
    }

    fn e_logdet_lambda(&self, post: &ArGaussPost, k: usize) -> f64 {
        multidigamma_sum(post.nu[k], self.f) + self.f as f64 * 2f64.ln() - post.logdet_b[k]
    }

    /// `Q = s [I, −M̂]ᵀ Λ̃ [I, −M̂] + w [0 0; 0 V̂⁻¹]` with `Λ̃` the given output precision.
    fn quad(&self, lam: &Array2<f64>, mean: &Array2<f64>, v_inv: Option<&Array2<f64>>, w: f64) -> Array2<f64> {
        let (f, e) = (self.f, self.e);
        let d = f + e;
        let mut q = Array2::zeros((d, d));
        let lm = lam.dot(mean); // F × E
        q.slice_mut(s![..f, ..f]).assign(lam);
        q.slice_mut(s![..f, f..]).assign(&(-&lm));
        q.slice_mut(s![f.., ..f]).assign(&(-&lm.t()));
        let mut pp = mean.t().dot(&lm);
        if let Some(vi) = v_inv {
            pp = pp + vi * w;
        }
        q.slice_mut(s![f.., f..]).assign(&pp);
        sym(&q)
    }

    /// Vech table of `−½ yᵀ Q_k y + cst_k`.
    fn vech_table(&self, qs: &[Array2<f64>], cst: Array1<f64>) -> LogLikTable {
        let d = self.f + self.e;
        let fm = FeatureMap::Vech { d, linear: false, center: None };
        let mut w = Array2::<f64>::zeros((fm.dim(d), qs.len()));
        for (k, q) in qs.iter().enumerate() {
            let mut p = 0;
            for i in 0..d {
                w[[p, k]] = -0.5 * q[[i, i]];
                p += 1;
                for j in i + 1..d {
                    w[[p, k]] = -q[[i, j]];
                    p += 1;
                }
            }
        }
        LogLikTable::Lin { feat: fm, w, cst }
    }

    fn blocks(&self, row: ArrayView1<f64>) -> (Array2<f64>, Array2<f64>, Array2<f64>) {
        let (f, d) = (self.f, self.f + self.e);
        let full = Array2::from_shape_fn((d, d), |(i, j)| row[i * d + j]);
        (full.slice(s![..f, ..f]).to_owned(), full.slice(s![..f, f..]).to_owned(), full.slice(s![f.., f..]).to_owned())
    }
}

impl ObsModel for ArGauss {
    type Post = ArGaussPost;
    /// (k-means++ seeding uses the likelihood-gap divergence of [`ArGauss::div_to`])
    type DivPrep = Array2<f64>;

    fn kind(&self) -> &'static str {
        "ar_gauss"
    }
    fn n_features(&self) -> usize {
        self.f + self.e
    }
    fn stat_dim(&self) -> usize {
        (self.f + self.e) * (self.f + self.e)
    }
    fn h_sum(&self, x: ArrayView2<f64>) -> f64 {
        -0.5 * (x.nrows() * self.f) as f64 * (2.0 * PI).ln()
    }

    fn posterior(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<ArGaussPost> {
        let k = n.len();
        let mut post = ArGaussPost {
            nu: Array1::zeros(k),
            mean: Vec::with_capacity(k),
            b: Vec::with_capacity(k),
            b_inv: Vec::with_capacity(k),
            v_inv: Vec::with_capacity(k),
            logdet_b: Array1::zeros(k),
            logdet_v: Array1::zeros(k),
        };
        for j in 0..k {
            let (sxx, sxp, spp) = self.blocks(s.row(j));
            let vh = sym(&(&self.v + &spp));
            let (vi, ldv) = spd_inv_logdet(&vh, j, "posterior input precision V")?;
            let mh = (&sxp + &self.mv).dot(&vi);
            let bh = sym(&(&self.b + &sxx + &self.mvm - &mh.dot(&vh).dot(&mh.t())));
            let (bi, ldb) = spd_inv_logdet(&bh, j, "posterior scale B")?;
            post.nu[j] = self.nu + n[j].max(0.0);
            post.mean.push(mh);
            post.b.push(bh);
            post.b_inv.push(bi);
            post.v_inv.push(vi);
            post.logdet_b[j] = ldb;
            post.logdet_v[j] = ldv;
        }
        Ok(post)
    }

    fn c_prior(&self) -> f64 {
        self.c0
    }

    fn c_post(&self, post: &ArGaussPost) -> Array1<f64> {
        Array1::from_iter((0..post.nu.len()).map(|k| self.c_func(post.nu[k], post.logdet_b[k], post.logdet_v[k])))
    }

    fn e_log_lik_table(&self, post: &ArGaussPost) -> LogLikTable {
        let f = self.f as f64;
        let k = post.nu.len();
        let qs: Vec<Array2<f64>> =
            (0..k).map(|j| self.quad(&(&post.b_inv[j] * post.nu[j]), &post.mean[j], Some(&post.v_inv[j]), f)).collect();
        let cst = Array1::from_iter((0..k).map(|j| -0.5 * f * (2.0 * PI).ln() + 0.5 * self.e_logdet_lambda(post, j)));
        self.vech_table(&qs, cst)
    }

    fn plugin_table(&self, post: &ArGaussPost) -> Result<LogLikTable> {
        // N(x | M̂ p, Σ̂) with Σ̂ = B̂ / (ν̂ − F − 1)
        let f = self.f as f64;
        let k = post.nu.len();
        let mut qs = Vec::with_capacity(k);
        let mut cst = Array1::zeros(k);
        for j in 0..k {
            let sc = post.nu[j] - f - 1.0;
            if !(sc > 0.0) {
                return Err(Error::param(
                    "prior_dof",
                    format!("posterior-mean covariance needs nu_hat > F + 1 (state {j} has {})", post.nu[j]),
                ));
            }
            qs.push(self.quad(&(&post.b_inv[j] * sc), &post.mean[j], None, 0.0));
            cst[j] = -0.5 * f * (2.0 * PI).ln() - 0.5 * (post.logdet_b[j] - f * sc.ln());
        }
        Ok(self.vech_table(&qs, cst))
    }

    fn summarize_block(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>, s: ArrayViewMut2<f64>) {
        self.stats.summarize_block(x, resp, s);
    }

    fn feature_map(&self) -> FeatureMap {
        self.stats.feature_map()
    }

    fn acc_finish(&self, n: ArrayView1<f64>, acc: Array2<f64>) -> Array2<f64> {
        self.stats.acc_finish(n, acc)
    }

    fn e_log_lik_sum_from_stats(&self, post: &ArGaussPost, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64> {
        let f = self.f as f64;
        let d = self.f + self.e;
        Array1::from_iter((0..n.len()).map(|j| {
            let q = self.quad(&(&post.b_inv[j] * post.nu[j]), &post.mean[j], Some(&post.v_inv[j]), f);
            let row = s.row(j);
            let mut tr = 0.0;
            for a in 0..d {
                for b in 0..d {
                    tr += q[[a, b]] * row[a * d + b];
                }
            }
            n[j] * (-0.5 * f * (2.0 * PI).ln() + 0.5 * self.e_logdet_lambda(post, j)) - 0.5 * tr
        }))
    }

    fn point_estimates(&self, post: &ArGaussPost) -> Vec<(&'static str, ArrayD<f64>)> {
        let (f, e) = (self.f, self.e);
        let k = post.nu.len();
        let mut a = Array3::<f64>::zeros((k, f, e));
        let mut cov = Array3::<f64>::zeros((k, f, f));
        for j in 0..k {
            a.slice_mut(s![j, .., ..]).assign(&post.mean[j]);
            cov.slice_mut(s![j, .., ..]).assign(&(&post.b[j] / (post.nu[j] - f as f64 - 1.0)));
        }
        vec![("ar_coefs", a.into_dyn()), ("covariances", cov.into_dyn()), ("dof", post.nu.clone().into_dyn())]
    }

    fn div_prepare(&self, x: ArrayView2<f64>) -> Result<Array2<f64>> {
        self.check_data(x, "X")?;
        Ok(x.as_standard_layout().into_owned())
    }

    /// Likelihood-gap divergence of every row to row `i`: with `q_i` the posterior after the one
    /// atom `y_i`, `D(y_n, y_i) = max(0, E_{q_i} log p(y_i) − E_{q_i} log p(y_n))` — zero at
    /// `n = i`, large for rows the atom's regression explains badly. (A regression has no
    /// Bregman divergence between smoothed atoms; this gap plays its role in k-means++ seeding
    /// and in the seeds of a birth's fresh fit.)
    fn div_to(&self, prep: &Array2<f64>, i: usize, out: &mut [f64]) {
        let d = self.f + self.e;
        let mut s1 = Array2::<f64>::zeros((1, d * d));
        self.stats.summarize_block(prep.slice(s![i..i + 1, ..]), Array2::<f64>::ones((1, 1)).view(), s1.view_mut());
        let n1 = Array1::<f64>::ones(1);
        let Ok(post) = self.posterior(n1.view(), s1.view()) else {
            out.iter_mut().for_each(|o| *o = 0.0);
            return;
        };
        let ell = super::eval_table(&self.e_log_lik_table(&post), prep.view());
        let own = ell[[i, 0]];
        for (o, &v) in out.iter_mut().zip(ell.column(0).iter()) {
            *o = (own - v).max(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn table_matches_the_direct_formula() {
        let m = ArGauss::new(4.5, array![[2.0, 0.3], [0.3, 1.0]], array![[0.5, 0.0], [0.1, 0.9]], array![[1.5, 0.2], [0.2, 0.8]]).unwrap();
        let y = array![[0.3, -1.2, 0.7, 0.1], [1.0, 0.5, -0.4, 2.0], [-0.2, 0.3, 0.9, -1.1]];
        let resp = array![[1.0, 0.0], [0.3, 0.7], [0.5, 0.5]];
        let mut s = Array2::zeros((2, 16));
        m.summarize_block(y.view(), resp.view(), s.view_mut());
        let n = resp.sum_axis(ndarray::Axis(0));
        let post = m.posterior(n.view(), s.view()).unwrap();
        let table = m.e_log_lik_table(&post);
        let c = super::super::eval_table(&table, y.view());
        for t in 0..3 {
            let x: Array1<f64> = y.slice(s![t, ..2]).to_owned();
            let p: Array1<f64> = y.slice(s![t, 2..]).to_owned();
            for k in 0..2 {
                let r: Array1<f64> = &x - &post.mean[k].dot(&p);
                let br: Array1<f64> = post.b_inv[k].dot(&r);
                let vp: Array1<f64> = post.v_inv[k].dot(&p);
                let want = -(2.0 * PI).ln() + 0.5 * m.e_logdet_lambda(&post, k) - 0.5 * (post.nu[k] * r.dot(&br) + 2.0 * p.dot(&vp));
                assert!((c[[t, k]] - want).abs() < 1e-12 * want.abs().max(1.0), "{t} {k}");
            }
        }
        let sum = m.e_log_lik_sum_from_stats(&post, n.view(), s.view());
        for k in 0..2 {
            let want: f64 = (0..3).map(|t| resp[[t, k]] * c[[t, k]]).sum();
            assert!((sum[k] - want).abs() < 1e-10 * want.abs().max(1.0));
        }
    }
}
