//! Exponential-family observation models with conjugate priors (Hughes thesis §2.2, §3.6).
//!
//! Every model implements [`ObsModel`]. Its global parameters are the posterior
//! `λ̂_k = λ̄ ⊕ (N_k, S_k)`, built from *effective summaries* by [`ObsModel::posterior`]. The
//! local step only needs a [`LogLikTable`]: a per-cluster linear or quadratic form whose
//! evaluation on a block of rows is one or a few dense matrix products.
//!
//! | model | prior | statistic row `S_k` |
//! |---|---|---|
//! | [`Gauss`] (full covariance) | Normal-Wishart | `[Σ r x, vec(Σ r x xᵀ)]` |
//! | [`Gauss`] (zero mean) | Wishart | `vec(Σ r x xᵀ)` |
//! | [`DiagGauss`] | Normal-Gamma | `[Σ r x, Σ r x²]` |
//! | [`Mult`] | Dirichlet | `Σ r x` (word counts) |
//! | [`Bern`] | Beta | `Σ r x` |
//! | [`ArGauss`] (auto-regressive, HMMs) | Matrix-Normal-Wishart | `vec(Σ r y yᵀ)`, `y = [x, x_prev]` |

mod ar_gauss;
mod bern;
mod diag_gauss;
mod gauss;
mod mult;

pub use ar_gauss::{ArGauss, ArGaussPost};
pub use bern::Bern;
pub use diag_gauss::DiagGauss;
pub use gauss::Gauss;
pub use mult::Mult;

use ndarray::{s, Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::linalg::gemm;

/// `y = x − center` (or `x`), `y` as long as `x`.
#[inline(always)]
fn centre_row(x: ArrayView1<f64>, center: Option<&[f64]>, y: &mut [f64]) {
    match (x.as_slice(), center) {
        (Some(xs), Some(c)) => y.iter_mut().zip(xs.iter().zip(c)).for_each(|(v, (&a, &b))| *v = a - b),
        (Some(xs), None) => y.copy_from_slice(xs),
        (None, Some(c)) => y.iter_mut().zip(x.iter().zip(c)).for_each(|(v, (&a, &b))| *v = a - b),
        (None, None) => y.iter_mut().zip(x.iter()).for_each(|(v, &a)| *v = a),
    }
}

/// `[y, vech(y yᵀ)]` (or `vech(y yᵀ)` without `linear`) of one row, `y = x − center` (in `y`,
/// `D` long), into `out` (`F` long), the products in a fixed order: the arithmetic of
/// [`FeatureMap::apply`] (also the birth fits' per-row features).
#[inline(always)]
pub(crate) fn vech_row(x: ArrayView1<f64>, center: Option<&[f64]>, linear: bool, y: &mut [f64], out: &mut [f64]) {
    let d = x.len();
    let y = &mut y[..d];
    centre_row(x, center, y);
    let lin = if linear { d } else { 0 };
    out[..lin].copy_from_slice(&y[..lin]);
    let mut rest = &mut out[lin..];
    for i in 0..d {
        let yi = y[i];
        let (seg, tail) = rest.split_at_mut(d - i);
        seg.iter_mut().zip(&y[i..]).for_each(|(s, &yj)| *s = yi * yj);
        rest = tail;
    }
}

/// [`vech_row`] of every row into `out` (`rows × F`, row-major).
#[inline(always)]
fn vech_rows_impl(x: ArrayView2<f64>, center: Option<&[f64]>, linear: bool, out: &mut [f64]) {
    let d = x.ncols();
    let f = if linear { d } else { 0 } + d * (d + 1) / 2;
    let mut y = vec![0.0; d];
    for (n, o) in out.chunks_exact_mut(f).take(x.nrows()).enumerate() {
        vech_row(x.row(n), center, linear, &mut y, o);
    }
}

/// AVX version of [`vech_rows_impl`]: each segment `y_i · y[i..]` is written four products at a
/// time, the last store of a segment running up to three entries into the next one, which that
/// segment's own stores then overwrite (so `out` needs three entries of slack after the last
/// row); the products are the same.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn vech_rows_avx(x: ArrayView2<f64>, center: Option<&[f64]>, linear: bool, out: &mut [f64]) {
    use std::arch::x86_64::*;
    let d = x.ncols();
    let lin = if linear { d } else { 0 };
    let f = lin + d * (d + 1) / 2;
    assert!(out.len() >= x.nrows() * f + 3, "vech_rows: feature buffer without slack");
    // y with three zeros of padding, so every four-wide load stays inside it
    let mut y = vec![0.0; d + 3];
    for n in 0..x.nrows() {
        centre_row(x.row(n), center, &mut y[..d]);
        let o = &mut out[n * f..];
        o[..lin].copy_from_slice(&y[..lin]);
        let mut p = lin;
        for i in 0..d {
            let yi = _mm256_set1_pd(y[i]);
            let mut j = i;
            while j < d {
                // SAFETY: j + 4 ≤ d + 3 = y.len(); the store ends at p + (j − i) + 4 ≤ p + (d − i) + 3,
                // at most three entries past this segment: inside the next segment or row, or the
                // buffer's slack after the last row (asserted above).
                unsafe {
                    let v = _mm256_mul_pd(yi, _mm256_loadu_pd(y.as_ptr().add(j)));
                    _mm256_storeu_pd(o.as_mut_ptr().add(p + (j - i)), v);
                }
                j += 4;
            }
            p += d - i;
        }
    }
}

/// [`vech_rows_impl`] with 256-bit vectors where available (the same products); `out` holds
/// the rows' features and three entries of slack.
fn vech_rows(x: ArrayView2<f64>, center: Option<&[f64]>, linear: bool, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above).
            return unsafe { vech_rows_avx(x, center, linear, out) };
        }
    }
    vech_rows_impl(x, center, linear, out)
}

/// Per-cluster log-likelihood form evaluated by the local step: linear in a feature map,
/// `out[n,k] = φ(x_n) · W[:,k] + cst_k`.
///
/// Every model's summary statistic is linear in the same features, so the local step builds
/// `φ` once per row tile and uses it twice: `W = φ(X) Wt` (log weights) and `Acc += Rᵀ φ(X)`
/// (summaries, see [`ObsModel::acc_finish`]). Both are large matrix products.
#[derive(Debug, Clone)]
pub enum LogLikTable {
    /// `out[n,k] = φ(x_n) · W[:,k] + cst_k` with a feature map `φ`.
    Lin {
        /// feature map applied to the rows
        feat: FeatureMap,
        /// `F × K` weights
        w: Array2<f64>,
        /// `K` constants
        cst: Array1<f64>,
    },
}

/// Feature map of a [`LogLikTable`].
#[derive(Debug, Clone, PartialEq)]
pub enum FeatureMap {
    /// `φ(x) = x`
    Identity,
    /// `φ(x) = [x, x²]` (diagonal Gaussians)
    WithSquares,
    /// Full-covariance Gaussians ("vech" form): with `y = x − c`,
    /// `φ(x) = [y, vech(y yᵀ)]` (zero mean: no linear part), where `vech(y yᵀ) = (y_i y_j)_{i ≤ j}`
    /// row by row. A quadratic form is then `yᵀ A y = vech(y yᵀ) · vech'(A)` with the
    /// off-diagonal entries of `vech'(A)` doubled, which halves the work of the whitening
    /// formulation (`D(D+1)/2` instead of `D²` per row and cluster). Log-likelihood tables of
    /// the full-covariance model centre at the prior mean (no cancellation for data far from
    /// the origin); summaries use `c = 0` (raw moments, as accurate as a direct `Σ r x xᵀ`).
    Vech {
        /// data dimension
        d: usize,
        /// whether `y` itself is part of the features (full-covariance model)
        linear: bool,
        /// centre `c`, or `None` for `c = 0`
        center: Option<Array1<f64>>,
    },
}

/// Number of entries of `vech` of a `d × d` matrix.
pub fn vech_len(d: usize) -> usize {
    d * (d + 1) / 2
}

impl FeatureMap {
    /// Feature dimension for `d` data columns.
    pub fn dim(&self, d: usize) -> usize {
        match self {
            FeatureMap::Identity => d,
            FeatureMap::WithSquares => 2 * d,
            FeatureMap::Vech { d, linear, .. } => vech_len(*d) + if *linear { *d } else { 0 },
        }
    }

    /// Features of a block of rows, always in standard (row-major) layout. Returns `x` itself for
    /// the identity map on row-major data, otherwise a view of `buf` (resized as needed, never
    /// shrunk).
    pub fn apply<'a>(&self, x: ArrayView2<'a, f64>, buf: &'a mut Vec<f64>) -> ArrayView2<'a, f64> {
        let rows = x.nrows();
        let d = x.ncols();
        let f = self.dim(d);
        if let FeatureMap::Identity = self {
            if x.is_standard_layout() {
                return x;
            }
        }
        // (three entries of slack for the vectorised `vech` of the last row)
        if buf.len() < rows * f + 3 {
            buf.resize(rows * f + 3, 0.0);
        }
        let out = &mut buf[..rows * f + 3];
        match self {
            FeatureMap::Identity => {
                for (n, xr) in x.rows().into_iter().enumerate() {
                    out[n * f..(n + 1) * f].iter_mut().zip(xr.iter()).for_each(|(o, &v)| *o = v);
                }
            }
            FeatureMap::WithSquares => {
                for (n, xr) in x.rows().into_iter().enumerate() {
                    let o = &mut out[n * f..(n + 1) * f];
                    for j in 0..d {
                        let v = xr[j];
                        o[j] = v;
                        o[d + j] = v * v;
                    }
                }
            }
            FeatureMap::Vech { center, linear, .. } => {
                let center = center.as_ref().map(|c| c.as_slice().expect("contiguous centre"));
                vech_rows(x, center, *linear, out);
            }
        }
        ArrayView2::from_shape((rows, f), &buf[..rows * f]).expect("feature buffer")
    }
}

impl LogLikTable {
    /// Number of clusters in the table.
    pub fn n_clusters(&self) -> usize {
        match self {
            LogLikTable::Lin { cst, .. } => cst.len(),
        }
    }

    /// The feature map of the table.
    pub fn feature_map(&self) -> &FeatureMap {
        match self {
            LogLikTable::Lin { feat, .. } => feat,
        }
    }

    /// Keep only the listed clusters (in that order).
    pub fn select(&self, cols: &[usize]) -> LogLikTable {
        match self {
            LogLikTable::Lin { feat, w, cst } => {
                LogLikTable::Lin { feat: feat.clone(), w: w.select(Axis(1), cols), cst: cst.select(Axis(0), cols) }
            }
        }
    }

    /// Evaluate the table on precomputed features `phi = φ(x)` (`rows × F`): `out` (`rows × K`)
    /// is overwritten with `φ W + cst`.
    pub fn eval_features(&self, phi: ArrayView2<f64>, mut out: ArrayViewMut2<f64>) {
        match self {
            LogLikTable::Lin { w, cst, .. } => {
                gemm(1.0, phi, w.view(), 0.0, out.view_mut());
                let c = cst.as_slice().expect("contiguous");
                for mut row in out.rows_mut() {
                    match row.as_slice_mut() {
                        Some(r) => r.iter_mut().zip(c).for_each(|(o, &v)| *o += v),
                        None => row += cst,
                    }
                }
            }
        }
    }

    /// Evaluate the table on a block of rows: `out` is `rows × K` and is overwritten.
    pub fn eval_block(&self, x: ArrayView2<f64>, out: ArrayViewMut2<f64>) {
        let mut buf = Vec::new();
        let phi = self.feature_map().apply(x, &mut buf);
        self.eval_features(phi, out);
    }
}

/// Interface of an observation model (Hughes thesis §2.2–2.3).
pub trait ObsModel: Send + Sync {
    /// Posterior parameters of all clusters, with cached factorisations.
    type Post: Send + Sync;
    /// Data transformed once for repeated Bregman-divergence evaluations (k-means++).
    type DivPrep: Send + Sync;

    /// Public name (`"gauss"`, `"zero_mean_gauss"`, `"diag_gauss"`, `"mult"`, `"bern"`).
    fn kind(&self) -> &'static str;
    /// Number of data columns `D` (or vocabulary size `V`).
    fn n_features(&self) -> usize;
    /// Length of one statistic row `S_k`.
    fn stat_dim(&self) -> usize;
    /// Check a data block: shape, finiteness and support.
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::NonFinite`] or [`Error::InvalidData`] naming `name`.
    fn check_data(&self, x: ArrayView2<f64>, name: &str) -> Result<()> {
        check_shape_finite(x, self.n_features(), name)
    }
    /// Check the stored values of sparse rows (CSR); models that take sparse rows have the
    /// identity feature map and `h(x) = 0`. The default refuses them.
    ///
    /// # Errors
    /// [`Error::InvalidData`] naming `name`.
    fn check_sparse_values(&self, _values: &[f64], name: &str) -> Result<()> {
        Err(Error::data(name, format!("sparse rows are only taken by count models (mult, bern), not {}", self.kind())))
    }
    /// `Σ_n h(x_n)` for a block.
    fn h_sum(&self, x: ArrayView2<f64>) -> f64;
    /// Global step: posterior from (effective) summaries.
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] if a posterior scale matrix is not positive definite.
    fn posterior(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Self::Post>;
    /// Log normaliser `c(λ̄)` of the prior.
    fn c_prior(&self) -> f64;
    /// Log normalisers `c(λ̂_k)` of every posterior cluster.
    fn c_post(&self, post: &Self::Post) -> Array1<f64>;
    /// `c(λ̂_k)` straight from summaries, equal to `c_post(&posterior(n, s)?)` bit for bit; models
    /// whose posterior keeps more than the normaliser needs (inverse factors) override it so
    /// that objective-only evaluations (the ELBO, all-pairs merge scores) skip that work.
    ///
    /// # Errors
    /// As [`ObsModel::posterior`].
    fn c_post_from_stats(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Array1<f64>> {
        Ok(self.c_post(&self.posterior(n, s)?))
    }
    /// Table of `E_q[log F(x | φ_k)]`.
    fn e_log_lik_table(&self, post: &Self::Post) -> LogLikTable;
    /// Table of the plug-in `log F(x | φ̂_k)` at the posterior-mean point estimates.
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] for a degenerate point estimate.
    fn plugin_table(&self, post: &Self::Post) -> Result<LogLikTable>;
    /// Accumulate `S += Σ_n r_nk s(x_n)` for a block (`resp` is `rows × K`).
    fn summarize_block(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>, s: ArrayViewMut2<f64>);
    /// Feature map of the summaries: the accumulator is `Acc_k = Σ_n r_nk φ(x_n)`. The model's
    /// tables use the same map up to the centre (see [`FeatureMap::Vech`]).
    fn feature_map(&self) -> FeatureMap;
    /// Statistics `S` (`K × stat_dim`) from counts `N` and the feature accumulator `Acc`
    /// (`K × F`). The default is the identity (statistic = features).
    fn acc_finish(&self, _n: ArrayView1<f64>, acc: Array2<f64>) -> Array2<f64> {
        acc
    }
    /// `Σ_n r_nk E_q[log F(x_n|φ_k)]` from summaries `(n, s)`.
    fn e_log_lik_sum_from_stats(&self, post: &Self::Post, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64>;
    /// Point estimates `(name, array)`.
    fn point_estimates(&self, post: &Self::Post) -> Vec<(&'static str, ArrayD<f64>)>;
    /// Transform rows once for Bregman divergences between smoothed atoms (Hughes thesis §2.4.2, Alg. 2.2).
    fn div_prepare(&self, x: ArrayView2<f64>) -> Result<Self::DivPrep>;
    /// Divergence of every prepared row to prepared row `i`: `out[n] = D(μ̃_n, μ̃_i)`.
    fn div_to(&self, prep: &Self::DivPrep, i: usize, out: &mut [f64]);
}

/// Log-likelihoods of finite rows are NaN only when the rows' magnitude overflows the model's
/// quadratic forms (|x| ≳ 1e154 for Gaussians): an error rather than a silent NaN.
fn no_nan(out: Array2<f64>) -> Result<Array2<f64>> {
    if out.iter().any(|v| v.is_nan()) {
        return Err(Error::NonFinite { what: "log-likelihoods of `X` (values too large in magnitude for the model)".into() });
    }
    Ok(out)
}

/// Shape and finiteness check shared by the models.
pub(crate) fn check_shape_finite(x: ArrayView2<f64>, d: usize, name: &str) -> Result<()> {
    if x.ncols() != d {
        return Err(Error::shape(name, format!("(n_samples, {d})"), format!("{:?}", x.dim())));
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: format!("`{name}`") });
    }
    Ok(())
}

/// `S` has a row per entry of `N` and `stat_dim` columns.
fn check_summary_shape(n: ArrayView1<f64>, s: ArrayView2<f64>, stat_dim: usize) -> Result<()> {
    if s.nrows() != n.len() || s.ncols() != stat_dim {
        return Err(Error::shape("S", format!("({}, {stat_dim})", n.len()), format!("{:?}", s.dim())));
    }
    Ok(())
}

/// The error of summaries with a non-finite entry (also for pooled ones, see
/// [`Obs::elbo_data_per_pair`]).
fn summaries_not_finite() -> Error {
    Error::NonFinite { what: "summaries `N`/`S`".into() }
}

/// Check `(N, S)` summaries against a model.
pub(crate) fn check_summaries(n: ArrayView1<f64>, s: ArrayView2<f64>, stat_dim: usize) -> Result<()> {
    check_summary_shape(n, s, stat_dim)?;
    if n.iter().chain(s.iter()).any(|v| !v.is_finite()) {
        return Err(summaries_not_finite());
    }
    Ok(())
}

/// Memo of per-cluster data terms `c(λ̄) − c(λ̄ ⊕ (N_k, S_k))` keyed by the exact bits of
/// `(N_k, S_k)`, for callers that evaluate the objective of many summaries differing in a few
/// clusters (a move's candidate, the memoized algorithm's checks): a cluster whose summaries
/// are bit for bit those of an earlier call gets the value computed then, which is the value a
/// new computation would give (each cluster's term is computed from its own row alone), so
/// [`Obs::elbo_data_per_cluster_cached`] returns the same bits as
/// [`Obs::elbo_data_per_cluster`]. A hit is confirmed by comparing the whole row, never by the
/// hash alone. The memo holds at most [`TermCache::MAX_BYTES`] of rows and is emptied when a
/// new entry would pass that; it belongs to one observation model (its values depend on the
/// prior).
#[derive(Debug, Default)]
pub struct TermCache {
    inner: std::sync::Mutex<TermCacheInner>,
}

#[derive(Debug, Default)]
struct TermCacheInner {
    map: std::collections::HashMap<u64, (u64, Box<[f64]>, f64)>,
    bytes: usize,
}

impl TermCache {
    /// Budget of the stored rows, in bytes.
    pub const MAX_BYTES: usize = 64 << 20;

    /// Number of stored entries (tests, diagnostics).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop every entry (e.g. when a fit ends: the memo is only useful while summaries change
    /// a few clusters at a time).
    pub fn clear(&self) {
        let mut memo = self.lock();
        memo.map = Default::default();
        memo.bytes = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TermCacheInner> {
        // a panic while the lock was held cannot leave a wrong entry (entries are inserted
        // whole), so a poisoned memo is still valid
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clone for TermCache {
    /// A clone starts empty (a memo, not state).
    fn clone(&self) -> Self {
        TermCache::default()
    }
}

/// Hash of the bits of `n` and of every eighth entry of `row` (FxHash-style mixing): a hit is
/// confirmed by comparing whole rows, so the hash only has to spread keys, and reading an
/// eighth of the row keeps a lookup at about one pass over the summaries.
fn term_key(n: f64, row: ArrayView1<f64>) -> u64 {
    const MUL: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = n.to_bits().wrapping_mul(MUL);
    for v in row.iter().step_by(8) {
        h = (h.rotate_left(5) ^ v.to_bits()).wrapping_mul(MUL);
    }
    h
}

fn same_bits(a: &[f64], b: ArrayView1<f64>) -> bool {
    match b.as_slice() {
        // (compares bits: +0 and −0, equal as numbers, are different keys)
        Some(b) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
        None => a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits()),
    }
}

/// Any observation model, for callers that choose the model at run time (e.g. the bindings).
#[derive(Debug, Clone)]
pub enum Obs {
    /// full-covariance or zero-mean Gaussian
    Gauss(Gauss),
    /// diagonal Gaussian
    DiagGauss(DiagGauss),
    /// multinomial
    Mult(Mult),
    /// Bernoulli
    Bern(Bern),
    /// first-order auto-regressive Gaussian (rows `[x_t, x_{t−1}]`)
    ArGauss(ArGauss),
}

/// Run `$body` with `$m` bound to the concrete model inside an [`Obs`].
#[macro_export]
macro_rules! with_obs {
    ($obs:expr, $m:ident => $body:expr) => {
        match $obs {
            $crate::obs::Obs::Gauss($m) => $body,
            $crate::obs::Obs::DiagGauss($m) => $body,
            $crate::obs::Obs::Mult($m) => $body,
            $crate::obs::Obs::Bern($m) => $body,
            $crate::obs::Obs::ArGauss($m) => $body,
        }
    };
}

impl Obs {
    /// Public name of the model.
    pub fn kind(&self) -> &'static str {
        with_obs!(self, m => m.kind())
    }
    /// Number of data columns.
    pub fn n_features(&self) -> usize {
        with_obs!(self, m => m.n_features())
    }
    /// Length of a statistic row.
    pub fn stat_dim(&self) -> usize {
        with_obs!(self, m => m.stat_dim())
    }
    /// See [`ObsModel::check_data`].
    ///
    /// # Errors
    /// As [`ObsModel::check_data`].
    pub fn check_data(&self, x: ArrayView2<f64>, name: &str) -> Result<()> {
        with_obs!(self, m => m.check_data(x, name))
    }
    /// See [`ObsModel::h_sum`].
    pub fn h_sum(&self, x: ArrayView2<f64>) -> f64 {
        with_obs!(self, m => m.h_sum(x))
    }

    /// Summaries `(N, S)` of a block with dense responsibilities `resp` (`n × K`).
    ///
    /// # Errors
    /// Shape or finiteness errors.
    pub fn summarize(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>) -> Result<(Array1<f64>, Array2<f64>)> {
        self.check_data(x, "X")?;
        if resp.nrows() != x.nrows() {
            return Err(Error::shape("resp", format!("({}, K)", x.nrows()), format!("{:?}", resp.dim())));
        }
        let k = resp.ncols();
        let sd = self.stat_dim();
        let n = resp.sum_axis(Axis(0));
        let s = crate::parallel::tree_reduce(
            x.nrows(),
            crate::parallel::CHUNK_ROWS,
            &|a, b| {
                let mut s = Array2::<f64>::zeros((k, sd));
                with_obs!(self, m => m.summarize_block(x.slice(s![a..b, ..]), resp.slice(s![a..b, ..]), s.view_mut()));
                s
            },
            &|a, b| a + b,
        )
        .unwrap_or_else(|| Array2::zeros((k, sd)));
        Ok((n, s))
    }

    /// `E_q[log F(x_n|φ_k)]` for every row and cluster, posterior from `(n_post, s_post)`.
    ///
    /// # Errors
    /// Shape/finiteness errors, or a non-positive-definite posterior.
    pub fn e_log_lik(&self, x: ArrayView2<f64>, n_post: ArrayView1<f64>, s_post: ArrayView2<f64>) -> Result<Array2<f64>> {
        self.check_data(x, "X")?;
        let table = self.e_log_lik_table(n_post, s_post)?;
        no_nan(eval_table(&table, x))
    }

    /// The [`LogLikTable`] of `E_q[log F]` for posterior `(n_post, s_post)`.
    ///
    /// # Errors
    /// Shape/finiteness errors, or a non-positive-definite posterior.
    pub fn e_log_lik_table(&self, n_post: ArrayView1<f64>, s_post: ArrayView2<f64>) -> Result<LogLikTable> {
        check_summaries(n_post, s_post, self.stat_dim())?;
        with_obs!(self, m => { let p = m.posterior(n_post, s_post)?; Ok(m.e_log_lik_table(&p)) })
    }

    /// Plug-in `log F(x_n | φ̂_k)` at the point estimates of posterior `(n_post, s_post)`.
    ///
    /// # Errors
    /// Shape/finiteness errors, or a degenerate posterior.
    pub fn log_density(&self, x: ArrayView2<f64>, n_post: ArrayView1<f64>, s_post: ArrayView2<f64>) -> Result<Array2<f64>> {
        self.check_data(x, "X")?;
        no_nan(eval_table(&self.plugin_table_of(n_post, s_post)?, x))
    }

    /// The [`LogLikTable`] of the plug-in `log F(x | φ̂_k)` for posterior `(n_post, s_post)`.
    fn plugin_table_of(&self, n_post: ArrayView1<f64>, s_post: ArrayView2<f64>) -> Result<LogLikTable> {
        check_summaries(n_post, s_post, self.stat_dim())?;
        with_obs!(self, m => { let p = m.posterior(n_post, s_post)?; m.plugin_table(&p) })
    }

    /// [`Obs::log_density`] of CSR rows (`mult`, `bern`): `O(nnz · K)`.
    ///
    /// # Errors
    /// As [`Obs::log_density`]; sparse rows for a Gaussian model.
    pub fn log_density_csr(&self, x: &crate::local::CsrRows, n_post: ArrayView1<f64>, s_post: ArrayView2<f64>) -> Result<Array2<f64>> {
        let table = self.plugin_table_of(n_post, s_post)?;
        with_obs!(self, m => crate::local::check_csr_rows(m, x, &table))?;
        no_nan(crate::local::eval_table_csr(&table, x))
    }

    /// Observation part of the ELBO without `Σh`: `Σ_k [c(λ̄) − c(λ̄ ⊕ (N_k, S_k))]`.
    ///
    /// # Errors
    /// Shape/finiteness errors, or a non-positive-definite posterior.
    pub fn elbo_data(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<f64> {
        Ok(self.elbo_data_per_cluster(n, s)?.sum())
    }

    /// Per-cluster terms `c(λ̄) − c(λ̄ ⊕ (N_k, S_k))`.
    ///
    /// # Errors
    /// Shape/finiteness errors, or a non-positive-definite posterior.
    pub fn elbo_data_per_cluster(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Array1<f64>> {
        check_summaries(n, s, self.stat_dim())?;
        with_obs!(self, m => {
            let c0 = m.c_prior();
            Ok(m.c_post_from_stats(n, s)?.mapv(|c| c0 - c))
        })
    }

    /// [`Self::elbo_data_per_cluster`] through a [`TermCache`] (the same bits; only clusters
    /// whose `(N_k, S_k)` the memo has not seen are computed).
    ///
    /// # Errors
    /// As [`Self::elbo_data_per_cluster`].
    pub fn elbo_data_per_cluster_cached(&self, cache: &TermCache, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Array1<f64>> {
        check_summary_shape(n, s, self.stat_dim())?;
        // (a hit's row is bit for bit a row that passed the finiteness check when it was
        // stored; misses are checked by the computation below)
        let keys: Vec<u64> = (0..n.len()).into_par_iter().map(|j| term_key(n[j], s.row(j))).collect();
        let mut out = Array1::<f64>::zeros(n.len());
        let found: Vec<Option<f64>> = {
            let memo = cache.lock();
            let map = &memo.map;
            (0..n.len())
                .into_par_iter()
                .map(|j| match map.get(&keys[j]) {
                    Some((nb, row, v)) if *nb == n[j].to_bits() && same_bits(row, s.row(j)) => Some(*v),
                    _ => None,
                })
                .collect()
        };
        let mut miss = Vec::new();
        for (j, f) in found.into_iter().enumerate() {
            match f {
                Some(v) => out[j] = v,
                None => miss.push(j),
            }
        }
        if miss.is_empty() {
            return Ok(out);
        }
        let (n_m, s_m) = (n.select(Axis(0), &miss), s.select(Axis(0), &miss));
        let vals = self.elbo_data_per_cluster(n_m.view(), s_m.view())?;
        let mut memo = cache.lock();
        let row_bytes = s.ncols() * std::mem::size_of::<f64>();
        for (i, &j) in miss.iter().enumerate() {
            out[j] = vals[i];
            if memo.bytes + row_bytes > TermCache::MAX_BYTES {
                memo.map.clear();
                memo.bytes = 0;
            }
            if row_bytes <= TermCache::MAX_BYTES {
                let old = memo.map.insert(keys[j], (n[j].to_bits(), s.row(j).to_vec().into_boxed_slice(), vals[i]));
                memo.bytes += row_bytes;
                if let Some((_, r, _)) = old {
                    memo.bytes -= r.len() * std::mem::size_of::<f64>();
                }
            }
        }
        Ok(out)
    }

    /// [`Self::elbo_data`] through a [`TermCache`] (the same bits).
    ///
    /// # Errors
    /// As [`Self::elbo_data`].
    pub fn elbo_data_cached(&self, cache: &TermCache, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<f64> {
        Ok(self.elbo_data_per_cluster_cached(cache, n, s)?.sum())
    }

    /// Per-pair terms of merged clusters: `c(λ̄) − c(λ̄ ⊕ (N_a + N_b, S_a + S_b))` for every
    /// pair `(a[i], b[i])` of positions — [`Self::elbo_data_per_cluster`] of the pooled
    /// summaries (bit-identical for the Gaussians; for the multinomial equal to round-off, see
    /// `Mult::c_post_pairs`), built a chunk of pairs at a time so that scoring many pairs never
    /// holds every pooled `S` at once.
    ///
    /// # Errors
    /// Shape/finiteness errors, a position out of range or `a`, `b` of different lengths, or a
    /// non-positive-definite posterior.
    pub fn elbo_data_per_pair(&self, n: ArrayView1<f64>, s: ArrayView2<f64>, a: &[usize], b: &[usize]) -> Result<Array1<f64>> {
        check_summaries(n, s, self.stat_dim())?;
        if a.len() != b.len() {
            return Err(Error::shape("b", a.len(), b.len()));
        }
        let k = n.len();
        if let Some(&bad) = a.iter().chain(b).find(|&&p| p >= k) {
            return Err(Error::param("pairs", format!("position {bad} out of range for {k} clusters")));
        }
        if let Obs::Mult(m) = self {
            let c0 = m.c_prior();
            return Ok(Array1::from_iter(m.c_post_pairs(s, a, b).into_iter().map(|c| c0 - c)));
        }
        let dim = s.ncols().max(1);
        let chunk = ((1usize << 20) / dim).max(1);
        if let (Obs::Gauss(g), Some(rows)) = (self, s.as_slice()) {
            // fused: each pair's summed row straight into its factorisation; per chunk of pairs,
            // as below, a non-finite summed entry first, then the first failed factorisation
            let row = |j: usize| &rows[j * dim..(j + 1) * dim];
            let per: Vec<Option<Result<f64>>> = (0..a.len())
                .into_par_iter()
                .map_init(gauss::PairScratch::default, |sc, i| g.merged_pair_term(n[a[i]], n[b[i]], row(a[i]), row(b[i]), i % chunk, sc))
                .collect();
            let mut out = Vec::with_capacity(a.len());
            for part in per.chunks(chunk) {
                if part.iter().any(Option::is_none) {
                    return Err(summaries_not_finite());
                }
                for v in part {
                    out.push(v.clone().expect("checked just above")?);
                }
            }
            return Ok(Array1::from(out));
        }
        let mut out = Vec::with_capacity(a.len());
        for lo in (0..a.len()).step_by(chunk) {
            let hi = (lo + chunk).min(a.len());
            let nm = Array1::from_iter((lo..hi).map(|i| n[a[i]] + n[b[i]]));
            let mut sm = Array2::<f64>::zeros((hi - lo, s.ncols()));
            sm.axis_iter_mut(ndarray::Axis(0)).into_par_iter().enumerate().for_each(|(r, mut row)| {
                let (sa, sb) = (s.row(a[lo + r]), s.row(b[lo + r]));
                for ((o, &x), &y) in row.iter_mut().zip(sa.iter()).zip(sb.iter()) {
                    *o = x + y;
                }
            });
            out.extend(self.elbo_data_per_cluster(nm.view(), sm.view())?);
        }
        Ok(Array1::from(out))
    }

    /// Log normaliser of the prior.
    pub fn c_prior(&self) -> f64 {
        with_obs!(self, m => m.c_prior())
    }

    /// See [`ObsModel::e_log_lik_sum_from_stats`].
    ///
    /// # Errors
    /// Shape/finiteness errors, or a non-positive-definite posterior.
    pub fn e_log_lik_sum_from_stats(
        &self,
        n_post: ArrayView1<f64>,
        s_post: ArrayView2<f64>,
        n: ArrayView1<f64>,
        s: ArrayView2<f64>,
    ) -> Result<Array1<f64>> {
        check_summaries(n_post, s_post, self.stat_dim())?;
        check_summaries(n, s, self.stat_dim())?;
        if n.len() != n_post.len() {
            return Err(Error::shape("N", n_post.len(), n.len()));
        }
        with_obs!(self, m => { let p = m.posterior(n_post, s_post)?; Ok(m.e_log_lik_sum_from_stats(&p, n, s)) })
    }

    /// Point estimates of the posterior `(n, s)`.
    ///
    /// # Errors
    /// Shape/finiteness errors, or a non-positive-definite posterior.
    pub fn point_estimates(&self, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Vec<(&'static str, ArrayD<f64>)>> {
        check_summaries(n, s, self.stat_dim())?;
        with_obs!(self, m => { let p = m.posterior(n, s)?; Ok(m.point_estimates(&p)) })
    }

    /// Divergences `D(μ̃_n, μ̃_i)` of every row to row `i` (k-means++ seeding).
    ///
    /// # Errors
    /// Shape/finiteness errors, `i` out of range.
    pub fn smoothed_divergence(&self, x: ArrayView2<f64>, i: usize) -> Result<Array1<f64>> {
        self.check_data(x, "X")?;
        if i >= x.nrows() {
            return Err(Error::param("i", format!("row index {i} out of range for {} rows", x.nrows())));
        }
        with_obs!(self, m => {
            let prep = m.div_prepare(x)?;
            let mut out = vec![0.0; x.nrows()];
            m.div_to(&prep, i, &mut out);
            Ok(Array1::from(out))
        })
    }

    /// Bregman k-means++ seeding (Hughes thesis Alg. 2.2): returns `len(uniforms)`
    /// distinct row indices. Randomness comes from `uniforms` (values in `[0, 1)`), so the caller
    /// owns the random stream. Row `n_k` is drawn with probability `∝ min_{ℓ<k} D(μ̃_n, μ̃_{n_ℓ})`;
    /// if all remaining divergences are zero, uniformly among the rows not chosen yet.
    ///
    /// # Errors
    /// More centres than rows, bad data, uniforms outside `[0, 1)`.
    pub fn kmeanspp(&self, x: ArrayView2<f64>, uniforms: ArrayView1<f64>) -> Result<Vec<usize>> {
        with_obs!(self, m => kmeanspp(m, x, uniforms))
    }
}

/// Bregman k-means++ seeding for a concrete model (see [`Obs::kmeanspp`]).
///
/// # Errors
/// More centres than rows, bad data, uniforms outside `[0, 1)`.
pub fn kmeanspp<M: ObsModel>(m: &M, x: ArrayView2<f64>, uniforms: ArrayView1<f64>) -> Result<Vec<usize>> {
    m.check_data(x, "X")?;
    let n = x.nrows();
    let k = uniforms.len();
    if k > n {
        return Err(Error::param("n_components", format!("{k} clusters requested but only {n} rows")));
    }
    if uniforms.iter().any(|u| !(0.0..1.0).contains(u)) {
        return Err(Error::param("uniforms", "values must lie in [0, 1)"));
    }
    let mut chosen = Vec::with_capacity(k);
    if k == 0 {
        return Ok(chosen);
    }
    let prep = m.div_prepare(x)?;
    let first = ((uniforms[0] * n as f64) as usize).min(n - 1);
    chosen.push(first);
    let mut dist = vec![0.0; n];
    m.div_to(&prep, first, &mut dist);
    let mut is_chosen = vec![false; n];
    is_chosen[first] = true;
    let mut tmp = vec![0.0; n];
    for j in 1..k {
        for (d, &c) in dist.iter_mut().zip(&is_chosen) {
            if c || !d.is_finite() || *d < 0.0 {
                *d = if c { 0.0 } else { d.max(0.0) };
            }
        }
        let total: f64 = dist.iter().sum();
        let next = if total > 0.0 && total.is_finite() {
            let target = uniforms[j] * total;
            let mut acc = 0.0;
            let mut pick = None;
            for (i, &d) in dist.iter().enumerate() {
                acc += d;
                if acc > target && !is_chosen[i] {
                    pick = Some(i);
                    break;
                }
            }
            pick.unwrap_or_else(|| (0..n).rev().find(|&i| !is_chosen[i] && dist[i] > 0.0).unwrap_or(0))
        } else {
            let free: Vec<usize> = (0..n).filter(|&i| !is_chosen[i]).collect();
            free[((uniforms[j] * free.len() as f64) as usize).min(free.len() - 1)]
        };
        chosen.push(next);
        is_chosen[next] = true;
        m.div_to(&prep, next, &mut tmp);
        dist.par_iter_mut().zip(tmp.par_iter()).for_each(|(d, &t)| {
            if t < *d {
                *d = t;
            }
        });
    }
    Ok(chosen)
}

/// Evaluate a table on all rows, in parallel over fixed row chunks.
pub fn eval_table(table: &LogLikTable, x: ArrayView2<f64>) -> Array2<f64> {
    let k = table.n_clusters();
    let mut out = Array2::<f64>::zeros((x.nrows(), k));
    let tile = crate::parallel::TILE_ROWS;
    out.axis_chunks_iter_mut(Axis(0), tile).into_par_iter().zip(x.axis_chunks_iter(Axis(0), tile).into_par_iter()).for_each_init(
        Vec::new,
        |buf, (o, xb)| {
            let phi = table.feature_map().apply(xb, buf);
            table.eval_features(phi, o);
        },
    );
    out
}

/// `Σ_n r_nk (φ(x_n)·w_k + cst_k) = S_k·w_k + N_k cst_k` for linear tables whose feature order
/// matches the statistic layout.
pub(crate) fn lin_sum_from_stats(table: &LogLikTable, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64> {
    match table {
        LogLikTable::Lin { w, cst, .. } => Array1::from_iter((0..n.len()).map(|k| s.row(k).dot(&w.column(k)) + n[k] * cst[k])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectorised_vech_features_are_the_scalar_ones() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 11) as f64) / ((1u64 << 53) as f64) * 4.0 - 2.0
        };
        for d in 1..=19 {
            for &linear in &[false, true] {
                for &centred in &[false, true] {
                    for rows in [1usize, 2, 5] {
                        let big = Array2::from_shape_fn((rows, 2 * d), |_| next());
                        // contiguous rows, rows inside a wider block, every other column
                        let own = big.slice(s![.., ..d]).to_owned();
                        let views = [own.view(), big.slice(s![.., ..d]), big.slice(s![.., ..;2])];
                        let c: Vec<f64> = (0..d).map(|_| next()).collect();
                        let center = centred.then_some(&c[..]);
                        let f = if linear { d } else { 0 } + d * (d + 1) / 2;
                        for x in &views {
                            let mut want = vec![f64::NAN; rows * f + 3];
                            vech_rows_impl(x.view(), center, linear, &mut want);
                            let mut got = vec![f64::NAN; rows * f + 3];
                            vech_rows(x.view(), center, linear, &mut got);
                            for (a, b) in got[..rows * f].iter().zip(&want[..rows * f]) {
                                assert_eq!(a.to_bits(), b.to_bits(), "d={d} linear={linear} centred={centred}");
                            }
                            // and the map's own entry point, which adds the slack itself
                            let fm = FeatureMap::Vech { d, linear, center: center.map(|c| Array1::from(c.to_vec())) };
                            let mut buf = Vec::new();
                            let phi = fm.apply(x.view(), &mut buf);
                            assert_eq!(phi.dim(), (rows, f));
                            for (a, b) in phi.iter().zip(&want[..rows * f]) {
                                assert_eq!(a.to_bits(), b.to_bits());
                            }
                        }
                    }
                }
            }
        }
    }
}
