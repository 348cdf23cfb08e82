//! Multinomial (bag of words) with a Dirichlet prior (Hughes thesis §2.2.1, §3.6.2).
//!
//! `log F(x|β_k) = Σ_v x_v ln β_kv` (`h = 0`: probability of the token sequence).
//! Posterior `λ̂_kv = λ̄_v + S_kv`; `E_q[log F] = Σ_v x_v (ψ(λ̂_kv) − ψ(Σ_w λ̂_kw))` (one GEMM);
//! `c_Dir(λ) = ln Γ(Σλ) − Σ ln Γ(λ_v)`.

use ndarray::{Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::{check_shape_finite, lin_sum_from_stats, FeatureMap, LogLikTable, ObsModel};
use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::special::{c_dir, digamma};

/// Multinomial observation model.
#[derive(Debug, Clone)]
pub struct Mult {
    lam: Array1<f64>,
    c0: f64,
}

/// Posterior Dirichlet parameters `λ̂` (`K × V`).
#[derive(Debug, Clone)]
pub struct MultPost {
    /// `λ̂_kv`
    pub lam: Array2<f64>,
}

/// Smoothed word distributions for k-means++ seeding.
#[derive(Debug, Clone)]
pub struct MultDivPrep {
    beta: Array2<f64>,
    log_beta: Array2<f64>,
    count: Array1<f64>,
    neg_ent: Array1<f64>,
}

impl Mult {
    /// Dirichlet prior with pseudo-counts `λ̄` (length `V`).
    ///
    /// # Errors
    /// Empty vocabulary or pseudo-counts that are not finite and positive.
    pub fn new(lam: Array1<f64>) -> Result<Self> {
        if lam.is_empty() {
            return Err(Error::shape("prior_count", "(V,) with V >= 1", "(0,)"));
        }
        if lam.iter().any(|&l| !(l > 0.0) || !l.is_finite()) {
            return Err(Error::param("prior_count", "Dirichlet pseudo-counts must be finite and > 0"));
        }
        let c0 = c_dir(lam.as_slice().expect("contiguous"));
        Ok(Mult { lam, c0 })
    }
}

impl ObsModel for Mult {
    type Post = MultPost;
    type DivPrep = MultDivPrep;

    fn kind(&self) -> &'static str {
        "mult"
    }
    fn n_features(&self) -> usize {
        self.lam.len()
    }
    fn stat_dim(&self) -> usize {
        self.lam.len()
    }
    fn check_data(&self, x: ArrayView2<f64>, name: &str) -> Result<()> {
        check_shape_finite(x, self.n_features(), name)?;
        if x.iter().any(|&v| v < 0.0) {
            return Err(Error::data(name, "word counts must be non-negative"));
        }
        if x.iter().any(|&v| v != v.round()) {
            return Err(Error::data(name, "word counts must be integers"));
        }
        Ok(())
    }
    fn check_sparse_values(&self, values: &[f64], name: &str) -> Result<()> {
        if values.iter().any(|&v| !v.is_finite()) {
            return Err(Error::NonFinite { what: format!("`{name}`") });
        }
        if values.iter().any(|&v| v < 0.0) {
            return Err(Error::data(name, "word counts must be non-negative"));
        }
        if values.iter().any(|&v| v != v.round()) {
            return Err(Error::data(name, "word counts must be integers"));
        }
        Ok(())
    }
    fn h_sum(&self, _x: ArrayView2<f64>) -> f64 {
        0.0
    }
    fn posterior(&self, _n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<MultPost> {
        // built element by element: row-major whatever the layout of `s` (c_post needs contiguous rows)
        let lam = Array2::from_shape_fn(s.dim(), |(k, v)| s[[k, v]].max(0.0) + self.lam[v]);
        Ok(MultPost { lam })
    }
    fn c_prior(&self) -> f64 {
        self.c0
    }
    fn c_post_from_stats(&self, _n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Array1<f64>> {
        // `c_post(&posterior(n, s)?)` row by row in parallel (each row's arithmetic in the same
        // order, so bit-identical) without the K × V posterior: ELBOs and merge scores call it
        // with V in the thousands
        let v = s.ncols();
        let per: Vec<f64> = (0..s.nrows())
            .into_par_iter()
            .map_init(
                || vec![0.0; v],
                |buf, k| {
                    for (w, (b, &x)) in buf.iter_mut().zip(s.row(k).iter()).enumerate() {
                        *b = x.max(0.0) + self.lam[w];
                    }
                    c_dir(buf)
                },
            )
            .collect();
        Ok(Array1::from(per))
    }
    fn c_post(&self, post: &MultPost) -> Array1<f64> {
        Array1::from_iter(post.lam.rows().into_iter().map(|r| c_dir(r.as_slice().expect("contiguous"))))
    }
    fn e_log_lik_table(&self, post: &MultPost) -> LogLikTable {
        let k = post.lam.nrows();
        let mut w = post.lam.t().mapv(digamma);
        for j in 0..k {
            let tot = digamma(post.lam.row(j).sum());
            w.column_mut(j).mapv_inplace(|v| v - tot);
        }
        LogLikTable::Lin { feat: FeatureMap::Identity, w, cst: Array1::zeros(k) }
    }
    fn plugin_table(&self, post: &MultPost) -> Result<LogLikTable> {
        let k = post.lam.nrows();
        let mut w = post.lam.t().to_owned();
        for j in 0..k {
            let tot = post.lam.row(j).sum();
            w.column_mut(j).mapv_inplace(|v| (v / tot).ln());
        }
        Ok(LogLikTable::Lin { feat: FeatureMap::Identity, w, cst: Array1::zeros(k) })
    }
    fn feature_map(&self) -> FeatureMap {
        FeatureMap::Identity
    }
    fn summarize_block(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>, s: ArrayViewMut2<f64>) {
        gemm(1.0, resp.t(), x, 1.0, s);
    }
    fn e_log_lik_sum_from_stats(&self, post: &MultPost, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64> {
        lin_sum_from_stats(&self.e_log_lik_table(post), n, s)
    }
    fn point_estimates(&self, post: &MultPost) -> Vec<(&'static str, ArrayD<f64>)> {
        let tot = post.lam.sum_axis(Axis(1)).insert_axis(Axis(1));
        vec![("means", (&post.lam / &tot).into_dyn())]
    }
    fn div_prepare(&self, x: ArrayView2<f64>) -> Result<MultDivPrep> {
        let count = x.sum_axis(Axis(1));
        let lam_tot = self.lam.sum();
        let mut beta = &x + &self.lam;
        for (mut r, &c) in beta.rows_mut().into_iter().zip(count.iter()) {
            r /= c + lam_tot;
        }
        let log_beta = beta.mapv(f64::ln);
        let neg_ent = (&beta * &log_beta).sum_axis(Axis(1));
        Ok(MultDivPrep { beta, log_beta, count, neg_ent })
    }
    fn div_to(&self, p: &MultDivPrep, i: usize, out: &mut [f64]) {
        let li = p.log_beta.row(i);
        out.par_iter_mut().enumerate().for_each(|(n, o)| {
            let cross = p.beta.row(n).dot(&li);
            *o = (p.count[n] * (p.neg_ent[n] - cross)).max(0.0);
        });
    }
}
