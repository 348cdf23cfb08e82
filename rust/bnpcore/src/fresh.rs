//! Fresh clusters for a birth proposal (Hughes thesis §4.2): the whole fit of `J'` clusters to a
//! weighted subsample `(x', w)` in one call.
//!
//! Algorithm (the reference is `bnpcore._reference.birth.fit_fresh_clusters`):
//!
//! 1. `J = min(max(n_fresh, n_seeds), ⌊m/2⌋)` seeds by Bregman k-means++ ([`crate::obs::kmeanspp`])
//!    driven by the caller's uniforms; each seed is the posterior after its one atom
//!    (`N_j = 1`, `S_j = s(x_{i_j})`), or with `seed_rows = g > 1` after the `min(g, ⌊m/J⌋)`
//!    rows nearest to its row under the same divergence (ties by row index; unweighted), so
//!    that a full covariance starts from a `g`-row estimate. With `J < 2` there is nothing to fit.
//! 2. Up to `kmeans_iters` weighted Bregman k-means iterations: every row goes to
//!    `argmax_k W_nk`, `W_nk = E[log F(x_n|φ_k)] + E[ln π_k]` with the current clusters (the
//!    first maximum, values within [`TIE_RTOL`] relative of the maximum counting as tied), and
//!    contributes `w_n` to its cluster's summaries; then *tidy* (stable sort by decreasing `N`,
//!    keep `N_k ≥ 1`). Stops when the counts repeat exactly.
//! 3. Up to `iters` weighted VB iterations (local step with row weights `w`, tidy) until
//!    `max_k |ΔN_k| < 10⁻⁵ max(1, Σ_k N_k)` with an unchanged number of clusters.
//! 4. Greedy merges while at least three clusters remain: one VB step with all pair
//!    entropies gives the weighted subsample ELBO of every single merge; the best is applied
//!    (followed by `max(1, iters/4)` VB iterations) unless no merge improves the ELBO and at most
//!    `n_fresh` clusters are left.
//! 5. `gain` = subsample ELBO after one more VB step minus the subsample ELBO of a single
//!    cluster holding all the weight. The subsample ELBO is
//!    `Σ_k [c(λ̄) − c(λ̄ ⊕ (N_k, S_k))] + Σ_k H_k + L_alloc(N)` (the `Σ w_n h(x_n)` term is the
//!    same for every candidate and left out).
//!
//! Speed: a subsample fit is a few dozen local steps with a handful of clusters on at most a
//! few thousand rows, where a general local step spends its time rebuilding the row features
//! and packing them for GEMMs. Here the table features `φ(x_n)` ([`crate::obs::FeatureMap`])
//! are computed once per subsample (within a memory budget, otherwise row by row), and one fused
//! row kernel computes the log weights (`K` dot products), the responsibilities and their
//! entropies, and adds `r_nk w_n φ(x_n)` to the accumulators, all on data in L1. The
//! full-covariance Gaussian's tables centre the rows at the prior mean while its summaries do
//! not: the centred sums are converted once per step (`recentre`) instead of building a
//! second feature vector per row. Rows are reduced over the fixed leaves of
//! [`crate::parallel`], so results are bit-identical for any number of threads, and the AVX2
//! and portable builds of the kernel perform the same floating-point operations in the same
//! order.

use std::cmp::Ordering;

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis};
use rayon::prelude::*;

use crate::alloc::Alloc;
use crate::error::{Error, Result};
use crate::local::{ent_term, log_add_exp, log_resp, softmax_row};
use crate::obs::{check_summaries, kmeanspp, FeatureMap, LogLikTable, Obs, ObsModel};
use crate::parallel::tree_reduce;
use crate::with_obs;

/// Settings of [`fit_fresh_clusters`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FreshOptions {
    /// number of fresh clusters the greedy merges may stop at (`≥ 2`)
    pub n_fresh: usize,
    /// number of k-means++ seeds (the fit starts from `max(n_fresh, n_seeds)` clusters)
    pub n_seeds: usize,
    /// VB iterations after the k-means iterations (`iters / 4`, at least 1, after each merge)
    pub iters: usize,
    /// weighted Bregman k-means (hard assignment) iterations
    pub kmeans_iters: usize,
    /// rows of each initial cluster (`1`: the seed row alone; `g > 1`: the seed row's
    /// `min(g, ⌊m/J⌋)` nearest rows under the model's divergence, so that a full covariance
    /// starts from an estimate instead of the prior)
    pub seed_rows: usize,
    /// stop after `abandon_after` VB iterations when one more step from their clusters, or any
    /// pairwise merge of its clusters, gains less than `−abandon_loss · Σ w` over one cluster
    /// (the fit is then returned with that step's clusters and the best of these gains);
    /// `None` always runs every VB iteration and the merges
    pub abandon_loss: Option<f64>,
    /// VB iterations before the `abandon_loss` check (at most `iters`)
    pub abandon_after: usize,
}

impl FreshOptions {
    /// Number of k-means++ seeds for a subsample of `n_rows` rows:
    /// `min(max(n_fresh, n_seeds), ⌊n_rows/2⌋)`. The fit needs exactly this many uniforms (and
    /// none when it is below 2: there is nothing to fit).
    pub fn n_initial(&self, n_rows: usize) -> usize {
        self.n_fresh.max(self.n_seeds).min(n_rows / 2)
    }
}

/// Fresh clusters fitted to a subsample.
#[derive(Debug, Clone)]
pub struct FreshFit {
    /// counts of the fresh clusters, decreasing, each `≥ 1`
    pub n: Array1<f64>,
    /// their statistics (`J' × stat_dim`)
    pub s: Array2<f64>,
    /// weighted-subsample ELBO of the fit minus that of one cluster
    pub gain: f64,
}

/// Fit fresh clusters to the weighted subsample `(x, w)` (see the module documentation).
///
/// `uniforms` are the k-means++ random numbers in `[0, 1)`; their number must be
/// [`FreshOptions::n_initial`]`(x.nrows())` when that is at least 2.
///
/// Returns `None` when fewer than two clusters survive (or the subsample has fewer than four
/// rows), otherwise the fresh summaries and the ELBO gain over one cluster (which may be
/// negative: the caller decides).
///
/// # Errors
/// Bad data or weights (wrong length, negative or non-finite), `n_fresh < 2`, a wrong number of
/// uniforms or uniforms outside `[0, 1)`, an invalid concentration, a posterior that is not
/// positive definite, or a non-finite subsample ELBO.
pub fn fit_fresh_clusters<M: ObsModel>(
    model: &M,
    x: ArrayView2<f64>,
    w: ArrayView1<f64>,
    alloc: &Alloc,
    uniforms: ArrayView1<f64>,
    opts: &FreshOptions,
) -> Result<Option<FreshFit>> {
    model.check_data(x, "X")?;
    let m = x.nrows();
    if w.len() != m {
        return Err(Error::shape("w", format!("({m},)"), format!("({},)", w.len())));
    }
    if w.iter().any(|&v| !v.is_finite() || v < 0.0) {
        return Err(Error::param("w", "row weights must be finite and >= 0"));
    }
    if opts.n_fresh < 2 {
        return Err(Error::param("n_fresh", format!("a birth needs at least 2 fresh clusters, got {}", opts.n_fresh)));
    }
    alloc.check()?;
    let j = opts.n_initial(m);
    if j < 2 {
        return Ok(None);
    }
    if uniforms.len() != j {
        return Err(Error::shape(
            "uniforms",
            format!("({j},) = min(max(n_fresh, n_seeds), n_rows // 2)"),
            format!("({},)", uniforms.len()),
        ));
    }
    let idx = kmeanspp(model, x, uniforms)?;
    let smap = model.feature_map();
    let (n0, s0) = if opts.seed_rows <= 1 {
        // every seed is the posterior after its one atom
        let mut buf = Vec::new();
        let seeds = x.select(Axis(0), &idx);
        let n0 = Array1::<f64>::ones(j);
        let s0 = model.acc_finish(n0.view(), smap.apply(seeds.view(), &mut buf).to_owned());
        (n0, s0)
    } else {
        grown_seeds(model, &smap, x, &idx, opts.seed_rows.min(m / j).max(1))?
    };
    // the tables' feature map, from the seeds' table
    check_summaries(n0.view(), s0.view(), model.stat_dim())?;
    let tmap = model.e_log_lik_table(&model.posterior(n0.view(), s0.view())?).feature_map().clone();
    let x = x.as_standard_layout();
    let phi = precompute_features(&tmap, x.view()).map(|v| (tmap, v));
    let fit = Fitter { model, x: x.view(), w, alloc, smap, leaf: fresh_leaf_rows(m), phi };
    fit.run(n0, s0, opts)
}

/// Initial clusters grown from the seed rows `idx`: cluster `j` holds (unweighted) the `g` rows
/// of smallest divergence `D(x_n, x_{idx_j})` (the k-means++ divergence; ties and non-finite
/// values ordered by row index, non-finite last), summed in row order.
fn grown_seeds<M: ObsModel>(
    model: &M,
    smap: &FeatureMap,
    x: ArrayView2<f64>,
    idx: &[usize],
    g: usize,
) -> Result<(Array1<f64>, Array2<f64>)> {
    let m = x.nrows();
    let prep = model.div_prepare(x)?;
    let mut dist = vec![0.0; m];
    let mut acc = Array2::<f64>::zeros((idx.len(), smap.dim(x.ncols())));
    let mut buf = Vec::new();
    for (j, &i) in idx.iter().enumerate() {
        model.div_to(&prep, i, &mut dist);
        let key = |r: usize| if dist[r].is_finite() { dist[r] } else { f64::INFINITY };
        let mut order: Vec<usize> = (0..m).collect();
        // the g first rows of that (total) order, as a set: a selection, not a sort
        if g < m {
            order.select_nth_unstable_by(g, |&a, &b| key(a).partial_cmp(&key(b)).unwrap_or(Ordering::Equal).then(a.cmp(&b)));
        }
        let mut rows = order[..g.min(m)].to_vec();
        rows.sort_unstable();
        let feats = smap.apply(x.select(Axis(0), &rows).view(), &mut buf).to_owned();
        let mut row = acc.row_mut(j);
        for f in feats.rows() {
            row += &f;
        }
    }
    let n0 = Array1::from_elem(idx.len(), g as f64);
    let s0 = model.acc_finish(n0.view(), acc);
    Ok((n0, s0))
}

impl Obs {
    /// See [`fit_fresh_clusters`].
    ///
    /// # Errors
    /// As [`fit_fresh_clusters`].
    pub fn fit_fresh_clusters(
        &self,
        x: ArrayView2<f64>,
        w: ArrayView1<f64>,
        alloc: &Alloc,
        uniforms: ArrayView1<f64>,
        opts: &FreshOptions,
    ) -> Result<Option<FreshFit>> {
        with_obs!(self, m => fit_fresh_clusters(m, x, w, alloc, uniforms, opts))
    }
}

// ------------------------------------------------------------------------------------------
// row kernels (softmax, entropy terms: those of the dense local step, crate::local)

/// Relative tolerance under which two log weights count as tied in a hard step.
pub const TIE_RTOL: f64 = 1e-9;

/// Hard assignment of a row: the first `j` with `w_j ≥ max − TIE_RTOL · max(1, |max|)`, i.e. the
/// first maximum, where log weights equal up to round-off count as tied. (Exact ties are common
/// at the one-atom seeds of discrete models, and round-off would otherwise break them
/// differently for every summation order.)
#[inline]
fn hard_choice(w: &[f64]) -> usize {
    let top = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let thr = top - TIE_RTOL * top.abs().max(1.0);
    w.iter().position(|&v| v >= thr).unwrap_or(0)
}

/// Summaries of one VB step.
struct Step {
    n: Array1<f64>,
    s: Array2<f64>,
    h: Array1<f64>,
    pair_h: Vec<f64>,
}

/// Per-leaf partial sums.
struct Part {
    n: Array1<f64>,
    acc: Array2<f64>,
    h: Array1<f64>,
    pair_h: Vec<f64>,
}

impl Part {
    fn zeros(k: usize, f: usize, n_pairs: usize) -> Part {
        Part { n: Array1::zeros(k), acc: Array2::zeros((k, f)), h: Array1::zeros(k), pair_h: vec![0.0; n_pairs] }
    }

    fn add(mut self, o: Part) -> Part {
        self.n += &o.n;
        self.acc += &o.acc;
        self.h += &o.h;
        for (a, b) in self.pair_h.iter_mut().zip(o.pair_h) {
            *a += b;
        }
        self
    }
}

/// Stable sort by decreasing count, keeping clusters with `N_k ≥ 1`.
fn tidy(n: &Array1<f64>, s: &Array2<f64>) -> (Array1<f64>, Array2<f64>) {
    let mut order: Vec<usize> = (0..n.len()).collect();
    order.sort_by(|&a, &b| n[b].partial_cmp(&n[a]).unwrap_or(Ordering::Equal));
    order.retain(|&i| n[i] >= 1.0);
    (n.select(Axis(0), &order), s.select(Axis(0), &order))
}

/// Every pair `(a, b)`, `a < b`, of `j` clusters, in order.
fn all_pairs(j: usize) -> Vec<(usize, usize)> {
    (0..j).flat_map(|a| (a + 1..j).map(move |b| (a, b))).collect()
}

/// Summaries with column `b` merged into column `a` (entropy `h_ab`) and column `b` removed.
fn merged(n: &Array1<f64>, s: &Array2<f64>, h: &Array1<f64>, a: usize, b: usize, h_ab: f64) -> (Array1<f64>, Array2<f64>, Array1<f64>) {
    let keep: Vec<usize> = (0..n.len()).filter(|&i| i != b).collect();
    let (mut n2, mut s2, mut h2) = (n.clone(), s.clone(), h.clone());
    n2[a] += n[b];
    {
        let (mut ra, rb) = s2.multi_slice_mut((s![a, ..], s![b, ..]));
        ra += &rb;
    }
    h2[a] = h_ab;
    (n2.select(Axis(0), &keep), s2.select(Axis(0), &keep), h2.select(Axis(0), &keep))
}

// ------------------------------------------------------------------------------------------
// fused row kernel: features, log weights, responsibilities and summaries of one row at a time
//
// With a handful of clusters a GEMM spends most of its time packing the feature matrix, so the
// kernel works row by row on buffers that stay in L1: the row's features (precomputed, or as
// `FeatureMap::apply`), `K` dot products, the softmax, and `K` scaled additions into the
// accumulators. Every dot product sums over 8 fixed lanes, so the AVX2 build (intrinsics) and the
// portable build of the kernel agree bit for bit.

/// Lanes of a dot product: lane `l` sums the products `i ≡ l (mod 8)` of the full blocks of 8.
const LANES: usize = 8;

/// `out[g] = Σ_i a_i w_g[i]` for `G` clusters at once. Cluster `g` sums over 8 fixed lanes
/// (lane `l` takes the products `i ≡ l (mod 8)` of the full blocks), then
/// `q_l = s_l + s_{l+4}`, `(q_0 + q_2) + (q_1 + q_3)`, then the remainder in order.
/// [`dots_avx2`] computes exactly the same sums.
#[inline(always)]
fn dots<const G: usize>(a: &[f64], w: [&[f64]; G], out: &mut [f64]) {
    let n = a.len();
    let blocks = n / LANES;
    let mut s = [[0.0f64; LANES]; G];
    for i in 0..blocks {
        let x = &a[i * LANES..(i + 1) * LANES];
        for g in 0..G {
            let y = &w[g][i * LANES..(i + 1) * LANES];
            for l in 0..LANES {
                s[g][l] += x[l] * y[l];
            }
        }
    }
    for g in 0..G {
        let q = [s[g][0] + s[g][4], s[g][1] + s[g][5], s[g][2] + s[g][6], s[g][3] + s[g][7]];
        let mut t = (q[0] + q[2]) + (q[1] + q[3]);
        for i in blocks * LANES..n {
            t += a[i] * w[g][i];
        }
        out[g] = t;
    }
}

/// [`dots`] with AVX2 intrinsics (two 4-lane accumulators per cluster, no fused multiply-add).
///
/// # Safety
/// The CPU must support AVX2, and every `w[g]` must be at least as long as `a`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dots_avx2<const G: usize>(a: &[f64], w: [&[f64]; G], out: &mut [f64]) {
    use std::arch::x86_64::{_mm256_add_pd, _mm256_loadu_pd, _mm256_mul_pd, _mm256_setzero_pd, _mm256_storeu_pd};
    let n = a.len();
    let blocks = n / LANES;
    // SAFETY (whole block): AVX2 is available (caller); every load reads 4 doubles at offsets
    // below `blocks * LANES <= n`, within `a` and within every `w[g]` (caller).
    unsafe {
        let mut lo = [_mm256_setzero_pd(); G];
        let mut hi = [_mm256_setzero_pd(); G];
        for i in 0..blocks {
            let pa = a.as_ptr().add(i * LANES);
            let (x0, x1) = (_mm256_loadu_pd(pa), _mm256_loadu_pd(pa.add(4)));
            for g in 0..G {
                let pw = w[g].as_ptr().add(i * LANES);
                lo[g] = _mm256_add_pd(lo[g], _mm256_mul_pd(x0, _mm256_loadu_pd(pw)));
                hi[g] = _mm256_add_pd(hi[g], _mm256_mul_pd(x1, _mm256_loadu_pd(pw.add(4))));
            }
        }
        for g in 0..G {
            let mut q = [0.0f64; 4];
            _mm256_storeu_pd(q.as_mut_ptr(), _mm256_add_pd(lo[g], hi[g]));
            let mut t = (q[0] + q[2]) + (q[1] + q[3]);
            for i in blocks * LANES..n {
                t += a[i] * w[g][i];
            }
            out[g] = t;
        }
    }
}

/// Run `$go!(G)` for the clusters `$j..$k` in groups of `G = 4` (the last group 1–3), `$go`
/// advancing `$j` by `G`: the cluster grouping of the dot kernels, with `G` a literal for their
/// const generics.
macro_rules! by_groups_of_four {
    ($k:expr, $j:ident, $go:ident) => {
        while $j < $k {
            match $k - $j {
                1 => $go!(1),
                2 => $go!(2),
                3 => $go!(3),
                _ => $go!(4),
            }
        }
    };
}

/// `out[j] = φ · wt[j]` for all `K` rows of `wt` (`K × F`, row-major), four clusters at a time.
#[inline(always)]
fn all_dots(phi: &[f64], wt: &[f64], out: &mut [f64], avx2: bool) {
    let f = phi.len();
    let k = out.len();
    let row = |j: usize| &wt[j * f..(j + 1) * f];
    let mut j = 0;
    macro_rules! go {
        ($g:literal) => {{
            let o = &mut out[j..];
            let w: [&[f64]; $g] = std::array::from_fn(|g| row(j + g));
            #[cfg(target_arch = "x86_64")]
            {
                if avx2 {
                    // SAFETY: `avx2` is only true inside the AVX2 build of the kernel, and
                    // every row of `wt` has `f` entries.
                    unsafe { dots_avx2::<$g>(phi, w, o) };
                } else {
                    dots::<$g>(phi, w, o);
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = avx2;
                dots::<$g>(phi, w, o);
            }
            j += $g;
        }};
    }
    by_groups_of_four!(k, j, go);
}

/// Smallest table width for which the fresh-fit kernel takes its dots four rows at a time: from
/// about 4 KiB per cluster the tables of a few clusters leave the L1 cache and the per-row dots
/// stream them once per row (D = 64, zero mean: replay of 19 fits 0.24 → 0.18 s); below it the
/// per-row dots are as fast or faster (D = 16: 3–5 % slower in blocks).
const ROWS4_MIN_FEATURES: usize = 512;

/// Whether the kernel takes the dots of four rows at a time for tables of `f` features (wide
/// tables, on a CPU with AVX-512); such features are then never precomputed.
fn takes_rows4(f: usize) -> bool {
    f >= ROWS4_MIN_FEATURES && crate::linalg::avx512_available()
}

/// [`dots`] of four rows against `G` clusters at once with 512-bit registers: `out[r][g]` is
/// bit for bit `dots(a[r], w)[g]` (lane `l` of a register is the partial sum `s_l`, the same
/// products and additions in the same order; each table vector is loaded once for the four
/// rows, so the dots no longer stream the cluster tables once per row).
///
/// # Safety
/// The CPU must support AVX-512F, the four rows must have the same length and every `w[g]` must
/// be at least as long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dots_rows4_avx512<const G: usize>(a: [&[f64]; 4], w: [&[f64]; G], out: &mut [[f64; G]; 4]) {
    use std::arch::x86_64::{_mm512_add_pd, _mm512_loadu_pd, _mm512_mul_pd, _mm512_setzero_pd, _mm512_storeu_pd};
    let n = a[0].len();
    let blocks = n / LANES;
    // SAFETY (whole block): AVX-512F is available (caller); every load reads 8 doubles at
    // offsets below `blocks * LANES <= n`, within every row and every `w[g]` (caller).
    unsafe {
        let mut acc = [[_mm512_setzero_pd(); G]; 4];
        for i in 0..blocks {
            let xs: [_; 4] = std::array::from_fn(|r| _mm512_loadu_pd(a[r].as_ptr().add(i * LANES)));
            for g in 0..G {
                let y = _mm512_loadu_pd(w[g].as_ptr().add(i * LANES));
                for r in 0..4 {
                    acc[r][g] = _mm512_add_pd(acc[r][g], _mm512_mul_pd(xs[r], y));
                }
            }
        }
        for r in 0..4 {
            for g in 0..G {
                let mut s = [0.0f64; LANES];
                _mm512_storeu_pd(s.as_mut_ptr(), acc[r][g]);
                let q = [s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]];
                let mut t = (q[0] + q[2]) + (q[1] + q[3]);
                for i in blocks * LANES..n {
                    t += a[r][i] * w[g][i];
                }
                out[r][g] = t;
            }
        }
    }
}

/// [`all_dots`] of four rows (`out[r]` for `phi[r]`) with [`dots_rows4_avx512`], four clusters
/// at a time: the same values bit for bit.
///
/// # Safety
/// The CPU must support AVX-512F; every `phi[r]` has `F` entries and `wt` is `K × F`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn all_dots_rows4_avx512(phi: [&[f64]; 4], wt: &[f64], out: &mut [Vec<f64>; 4]) {
    let f = phi[0].len();
    let k = out[0].len();
    let row = |j: usize| &wt[j * f..(j + 1) * f];
    let mut j = 0;
    macro_rules! go {
        ($g:literal) => {{
            let w: [&[f64]; $g] = std::array::from_fn(|g| row(j + g));
            let mut o = [[0.0f64; $g]; 4];
            // SAFETY: as this function's (the caller's) contract.
            unsafe { dots_rows4_avx512::<$g>(phi, w, &mut o) };
            for r in 0..4 {
                out[r][j..j + $g].copy_from_slice(&o[r]);
            }
            j += $g;
        }};
    }
    by_groups_of_four!(k, j, go);
}

/// Features of the block of four rows starting at `n0` of a leaf ending at `b` (a short last
/// block repeats row `n0`): precomputed rows, the rows themselves (identity map) or `bt4`.
fn block_phis<'s>(
    phi: Option<&'s [f64]>,
    identity: bool,
    x: ArrayView2<'s, f64>,
    bt4: &'s [f64],
    n0: usize,
    b: usize,
    ft: usize,
) -> [&'s [f64]; 4] {
    std::array::from_fn(move |r| {
        let row = if n0 + r < b { n0 + r } else { n0 };
        match phi {
            Some(ph) => &ph[row * ft..(row + 1) * ft],
            None if identity => x.index_axis_move(Axis(0), row).to_slice().expect("standard layout"),
            None => &bt4[r * ft..(r + 1) * ft],
        }
    })
}

/// `y += c_0 x_0`, then `+= c_1 x_1`, … for the (at most four) rows given: entry by entry the
/// same operations in the same order as one `y += c x` per row, with one load and one store of
/// `y` for the block.
#[inline(always)]
fn axpy_rows(c: &[f64], x: &[&[f64]], y: &mut [f64]) {
    let n = y.len();
    match c.len() {
        0 => {}
        1 => {
            let x0 = &x[0][..n];
            for i in 0..n {
                y[i] += c[0] * x0[i];
            }
        }
        2 => {
            let (x0, x1) = (&x[0][..n], &x[1][..n]);
            for i in 0..n {
                let mut v = y[i];
                v += c[0] * x0[i];
                v += c[1] * x1[i];
                y[i] = v;
            }
        }
        3 => {
            let (x0, x1, x2) = (&x[0][..n], &x[1][..n], &x[2][..n]);
            for i in 0..n {
                let mut v = y[i];
                v += c[0] * x0[i];
                v += c[1] * x1[i];
                v += c[2] * x2[i];
                y[i] = v;
            }
        }
        _ => {
            let (x0, x1, x2, x3) = (&x[0][..n], &x[1][..n], &x[2][..n], &x[3][..n]);
            for i in 0..n {
                let mut v = y[i];
                v += c[0] * x0[i];
                v += c[1] * x1[i];
                v += c[2] * x2[i];
                v += c[3] * x3[i];
                y[i] = v;
            }
        }
    }
}

/// Features `φ(x)` of one row into `out` (the same arithmetic as [`FeatureMap::apply`]); returns
/// the features (`x` itself for the identity map).
#[inline(always)]
fn row_features<'b>(map: &FeatureMap, x: &'b [f64], y: &mut [f64], out: &'b mut [f64]) -> &'b [f64] {
    let d = x.len();
    match map {
        FeatureMap::Identity => x,
        FeatureMap::WithSquares => {
            let (lin, sq) = out.split_at_mut(d);
            lin.copy_from_slice(x);
            for (o, &v) in sq.iter_mut().zip(x) {
                *o = v * v;
            }
            out
        }
        FeatureMap::Vech { linear, center, .. } => {
            let center = center.as_ref().map(|c| c.as_slice().expect("contiguous centre"));
            crate::obs::vech_row(ArrayView1::from(x), center, *linear, y, out);
            out
        }
    }
}

/// Rows per leaf of the reduction tree for a subsample of `n` rows: about 32 leaves of 256 to
/// 8192 rows (a function of `n` only, so results do not depend on the thread count). Leaves are
/// smaller than the local step's because a subsample step has little work per row.
fn fresh_leaf_rows(n: usize) -> usize {
    n.div_ceil(32).clamp(256, 8192)
}

/// Largest number of precomputed feature entries (32 MiB of `f64`); bigger subsamples compute
/// the features row by row in every step.
const PRECOMPUTE_MAX: usize = 1 << 22;

/// Features of every row under `map` (row-major `n × F`), or `None` for the identity map (the
/// rows themselves), beyond [`PRECOMPUTE_MAX`], or when the kernel takes the dots of four rows
/// at a time (it computes those rows' features per block, in cache, instead of reading them
/// back from memory).
fn precompute_features(map: &FeatureMap, x: ArrayView2<f64>) -> Option<Vec<f64>> {
    let (n, d) = x.dim();
    let f = map.dim(d);
    if *map == FeatureMap::Identity || n * f > PRECOMPUTE_MAX || f == 0 || takes_rows4(f) {
        return None;
    }
    let mut out = vec![0.0; n * f];
    out.par_chunks_mut(f * 256).enumerate().for_each(|(c, block)| {
        let mut y = vec![0.0; d];
        for (i, o) in block.chunks_exact_mut(f).enumerate() {
            let xr = x.row(c * 256 + i);
            row_features(map, xr.as_slice().expect("standard layout"), &mut y, o);
        }
    });
    Some(out)
}

/// One prepared local step: the table's weights by cluster, the constants, and what to compute.
struct Kernel<'t> {
    k: usize,
    /// feature map of the table
    tmap: &'t FeatureMap,
    /// feature map of the summaries
    smap: &'t FeatureMap,
    /// `K × F_t` table weights (row `k` = cluster `k`)
    wt: Array2<f64>,
    cst: &'t [f64],
    elp: &'t [f64],
    /// hard (k-means) step instead of a VB step
    hard: bool,
    pairs: &'t [(usize, usize)],
    /// how the summaries are accumulated
    acc: AccMode<'t>,
    /// precomputed table features of all rows (`n × F_t`, row-major), if any
    phi: Option<&'t [f64]>,
}

#[cfg(test)]
impl<'t> Kernel<'t> {
    /// A copy sharing the borrowed parts (tests).
    fn clone_shallow(&self) -> Kernel<'t> {
        Kernel {
            k: self.k,
            tmap: self.tmap,
            smap: self.smap,
            wt: self.wt.clone(),
            cst: self.cst,
            elp: self.elp,
            hard: self.hard,
            pairs: self.pairs,
            acc: self.acc,
            phi: self.phi,
        }
    }
}

impl Kernel<'_> {
    /// Partial sums of rows `a..b`.
    fn leaf(&self, x: ArrayView2<f64>, w: ArrayView1<f64>, a: usize, b: usize) -> Part {
        #[cfg(target_arch = "x86_64")]
        {
            if takes_rows4(self.tmap.dim(x.ncols())) {
                // SAFETY: the CPU supports AVX-512F (`takes_rows4`, just above), which implies AVX2.
                return unsafe { self.leaf_avx512(x, w, a, b) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.leaf_avx2(x, w, a, b) };
            }
        }
        self.leaf_impl(x, w, a, b, false, false)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn leaf_avx2(&self, x: ArrayView2<f64>, w: ArrayView1<f64>, a: usize, b: usize) -> Part {
        self.leaf_impl(x, w, a, b, true, false)
    }

    /// The AVX2 build with the dots of four rows at a time in 512-bit registers (the same bits).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f")]
    unsafe fn leaf_avx512(&self, x: ArrayView2<f64>, w: ArrayView1<f64>, a: usize, b: usize) -> Part {
        self.leaf_impl(x, w, a, b, true, true)
    }

    /// Rows are taken in blocks of four: the log weights, responsibilities, counts and
    /// entropies of each row in row order, then each cluster's accumulator gets the block's
    /// rows in row order with one load and one store per entry ([`axpy_rows`]): every sum sees
    /// the same operations in the same order as row by row.
    #[inline(always)]
    fn leaf_impl(&self, x: ArrayView2<f64>, w: ArrayView1<f64>, a: usize, b: usize, avx2: bool, rows4: bool) -> Part {
        let k = self.k;
        let d = x.ncols();
        let ft = self.tmap.dim(d);
        // accumulate the table features when the summaries use them (or their recentred form)
        let separate = matches!(self.acc, AccMode::Separate);
        let fa = if separate { self.smap.dim(d) } else { ft };
        let mut p = Part::zeros(k, fa, self.pairs.len());
        let mut y = vec![0.0; d];
        let mut wr = vec![0.0; k];
        let mut rr = vec![0.0; k];
        let wt = self.wt.as_slice().expect("contiguous");
        let acc = p.acc.as_slice_mut().expect("contiguous");
        let (h, nn) = (p.h.as_slice_mut().expect("contiguous"), p.n.as_slice_mut().expect("contiguous"));
        let identity = matches!(self.tmap, FeatureMap::Identity);
        // table features of the block's rows when they are not precomputed, summary features
        // when they differ from the table's, log weights and accumulation weights per row
        let mut bt4 = if self.phi.is_none() && !identity { vec![0.0; 4 * ft] } else { Vec::new() };
        let mut bs4 = if separate { vec![0.0; 4 * fa] } else { Vec::new() };
        let mut wr4: [Vec<f64>; 4] = std::array::from_fn(|_| vec![0.0; k]);
        let mut c4 = vec![0.0; 4 * k];
        let mut n0 = a;
        while n0 < b {
            let m = (b - n0).min(4);
            if self.phi.is_none() && !identity {
                // a short last block repeats its first row (only for the four-row dots)
                for (r, o) in bt4.chunks_exact_mut(ft).enumerate() {
                    let xq = x.row(if r < m { n0 + r } else { n0 });
                    row_features(self.tmap, xq.as_slice().expect("standard layout"), &mut y, o);
                }
            }
            let phis = block_phis(self.phi, identity, x, &bt4, n0, b, ft);
            if rows4 {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `rows4` is only true inside the AVX-512 build of the kernel; every
                // feature row has `ft` entries and `wt` is `K × ft`.
                unsafe {
                    all_dots_rows4_avx512(phis, wt, &mut wr4)
                };
            } else {
                for r in 0..m {
                    all_dots(phis[r], wt, &mut wr4[r], avx2);
                }
            }
            if separate {
                for (r, o) in bs4.chunks_exact_mut(fa).take(m).enumerate() {
                    let xq = x.row(n0 + r);
                    row_features(self.smap, xq.as_slice().expect("standard layout"), &mut y, o);
                }
            }
            for r in 0..m {
                let wn = w[n0 + r];
                for j in 0..k {
                    wr[j] = (wr4[r][j] + self.cst[j]) + self.elp[j];
                }
                let c = &mut c4[r * k..(r + 1) * k];
                if self.hard {
                    let z = hard_choice(&wr);
                    nn[z] += wn;
                    c.fill(0.0);
                    c[z] = wn;
                    continue;
                }
                let lse = softmax_row(&wr, &mut rr);
                for j in 0..k {
                    h[j] += wn * ent_term(rr[j], log_resp(wr[j], lse, k));
                }
                for (q, &(pa, pb)) in self.pairs.iter().enumerate() {
                    let l = log_add_exp(log_resp(wr[pa], lse, k), log_resp(wr[pb], lse, k));
                    p.pair_h[q] += wn * ent_term(rr[pa] + rr[pb], l);
                }
                for j in 0..k {
                    let cj = rr[j] * wn;
                    nn[j] += cj;
                    c[j] = cj;
                }
            }
            let phi_s: [&[f64]; 4] = if separate { std::array::from_fn(|r| &bs4[r * fa..(r + 1) * fa]) } else { phis };
            for j in 0..k {
                // the block's rows with a non-zero weight for cluster j, in row order
                let mut cs = [0.0; 4];
                let mut xs: [&[f64]; 4] = [&[]; 4];
                let mut t = 0;
                for r in 0..m {
                    let cj = c4[r * k + j];
                    if cj != 0.0 {
                        cs[t] = cj;
                        xs[t] = phi_s[r];
                        t += 1;
                    }
                }
                axpy_rows(&cs[..t], &xs[..t], &mut acc[j * fa..(j + 1) * fa]);
            }
            n0 += m;
        }
        p
    }
}

/// How the summary accumulators relate to the table features.
#[derive(Clone, Copy)]
enum AccMode<'t> {
    /// the same features
    Same,
    /// full-covariance Gaussian: the tables centre the rows at `c`, the summaries do not;
    /// accumulate the centred features and recentre the sums once (`recentre`)
    Recentre(&'t [f64]),
    /// unrelated feature maps: compute the summary features of every row
    Separate,
}

fn acc_mode<'t>(tmap: &'t FeatureMap, smap: &FeatureMap) -> AccMode<'t> {
    if tmap == smap {
        return AccMode::Same;
    }
    match (tmap, smap) {
        (FeatureMap::Vech { d, linear: true, center: Some(c) }, FeatureMap::Vech { d: d2, linear: true, center: None }) if d == d2 => {
            AccMode::Recentre(c.as_slice().expect("contiguous"))
        }
        _ => AccMode::Separate,
    }
}

/// Sums of uncentred features from sums of features centred at `c` (`y = x − c`):
/// `Σ r x = Σ r y + N c`, `Σ r x_i x_j = Σ r y_i y_j + c_i Σ r y_j + c_j Σ r y_i + N c_i c_j`.
fn recentre(c: &[f64], n: &Array1<f64>, acc: &mut Array2<f64>) {
    let d = c.len();
    for (nk, mut row) in n.iter().zip(acc.rows_mut()) {
        let a = row.as_slice_mut().expect("contiguous");
        let (sy, q) = a.split_at_mut(d);
        let mut p = 0;
        for i in 0..d {
            for j in i..d {
                q[p] = ((q[p] + c[i] * sy[j]) + c[j] * sy[i]) + nk * (c[i] * c[j]);
                p += 1;
            }
        }
        for i in 0..d {
            sy[i] += nk * c[i];
        }
    }
}

/// The subsample and the allocation model.
struct Fitter<'a, M: ObsModel> {
    model: &'a M,
    x: ArrayView2<'a, f64>,
    w: ArrayView1<'a, f64>,
    alloc: &'a Alloc,
    /// feature map of the summaries
    smap: FeatureMap,
    /// rows per leaf of the reduction tree
    leaf: usize,
    /// table features of all rows (`n × F`, row-major) and their map, if precomputed
    phi: Option<(FeatureMap, Vec<f64>)>,
}

impl<M: ObsModel> Fitter<'_, M> {
    /// The precomputed table features, if they were computed for `map`.
    fn table_features(&self, map: &FeatureMap) -> Option<&[f64]> {
        match &self.phi {
            Some((m, v)) if m == map => Some(v.as_slice()),
            _ => None,
        }
    }

    /// One local step at the posterior `(n, s)`: a weighted VB step (summaries, entropies, pair
    /// entropies of `pairs`) or, with `hard`, a weighted Bregman k-means step (every row's weight
    /// goes to its cluster of largest log weight, first on ties; no entropies).
    fn step(&self, n: &Array1<f64>, s: &Array2<f64>, pairs: &[(usize, usize)], hard: bool) -> Result<Step> {
        check_summaries(n.view(), s.view(), self.model.stat_dim())?;
        let post = self.model.posterior(n.view(), s.view())?;
        let table = self.model.e_log_lik_table(&post);
        let elp = self.alloc.e_log_pi(n.view())?;
        let k = n.len();
        let LogLikTable::Lin { feat, w: tw, cst } = &table;
        let phi = self.table_features(feat);
        let kern = Kernel {
            k,
            tmap: feat,
            smap: &self.smap,
            wt: tw.t().as_standard_layout().into_owned(),
            cst: cst.as_slice().expect("contiguous"),
            elp: elp.as_slice().expect("contiguous"),
            hard,
            pairs,
            acc: acc_mode(feat, &self.smap),
            phi,
        };
        let fa = if matches!(kern.acc, AccMode::Separate) { self.smap.dim(self.x.ncols()) } else { feat.dim(self.x.ncols()) };
        let leaf = |a: usize, b: usize| kern.leaf(self.x, self.w, a, b);
        let mut tot = tree_reduce(self.x.nrows(), self.leaf, &leaf, &Part::add).unwrap_or_else(|| Part::zeros(k, fa, pairs.len()));
        if let AccMode::Recentre(c) = kern.acc {
            recentre(c, &tot.n, &mut tot.acc);
        }
        let s_new = self.model.acc_finish(tot.n.view(), tot.acc);
        Ok(Step { n: tot.n, s: s_new, h: tot.h, pair_h: tot.pair_h })
    }

    /// `Σ_n w_n φ(x_n)` under the summaries' feature map: row by row within the leaves of the
    /// reduction tree, then the leaves in tree order (no `n × F` feature matrix: 160 MB for
    /// 10,000 rows of a 64-D full covariance).
    fn weighted_feature_sum(&self) -> Array1<f64> {
        let d = self.x.ncols();
        let f = self.smap.dim(d);
        let leaf = |a: usize, b: usize| {
            let mut acc = Array1::<f64>::zeros(f);
            let (mut y, mut buf) = (vec![0.0; d], vec![0.0; f]);
            let out = acc.as_slice_mut().expect("contiguous");
            for n in a..b {
                let xr = self.x.row(n);
                let phi = row_features(&self.smap, xr.to_slice().expect("standard layout"), &mut y, &mut buf);
                axpy_rows(&[self.w[n]], &[phi], out);
            }
            acc
        };
        tree_reduce(self.x.nrows(), self.leaf, &leaf, &|a, b| a + b).unwrap_or_else(|| Array1::zeros(f))
    }

    /// Weighted subsample ELBO of summaries `(n, s, h)` without the `Σ w h(x)` term.
    fn elbo(&self, n: &Array1<f64>, s: &Array2<f64>, h: &Array1<f64>) -> Result<f64> {
        check_summaries(n.view(), s.view(), self.model.stat_dim())?;
        let post = self.model.posterior(n.view(), s.view())?;
        let c0 = self.model.c_prior();
        let data: f64 = self.model.c_post(&post).mapv(|c| c0 - c).sum();
        let value = 0.0 + data + h.sum() + self.alloc.elbo(n.view())?;
        if !value.is_finite() {
            return Err(Error::Numerical {
                what: format!(
                    "the weighted subsample ELBO of the fresh clusters is not finite ({value}); the data or hyperparameters are degenerate"
                ),
            });
        }
        Ok(value)
    }

    /// Up to `n_iter` VB iterations (tidying after each) until the counts settle.
    fn run_vb(&self, n: Array1<f64>, s: Array2<f64>, n_iter: usize) -> Result<(Array1<f64>, Array2<f64>)> {
        let (n, s, _) = self.run_vb_until(n, s, n_iter, None)?;
        Ok((n, s))
    }

    /// [`Self::run_vb`], also telling whether it stopped before `n_iter` iterations (counts
    /// settled, or fewer than two clusters): more iterations would then do nothing. `first`, if
    /// given, is the VB step at `(n, s)` already computed (its pair entropies are not used).
    fn run_vb_until(
        &self,
        mut n: Array1<f64>,
        mut s: Array2<f64>,
        n_iter: usize,
        mut first: Option<Step>,
    ) -> Result<(Array1<f64>, Array2<f64>, bool)> {
        for _ in 0..n_iter {
            let out = match first.take() {
                Some(step) => step,
                None => self.step(&n, &s, &[], false)?,
            };
            let (n_new, s_new) = tidy(&out.n, &out.s);
            let done = n_new.len() == n.len() && {
                let dmax = n_new.iter().zip(n.iter()).map(|(a, b)| (a - b).abs()).fold(f64::NEG_INFINITY, f64::max);
                dmax < 1e-3 * 1f64.max(n.sum()) * 1e-2
            };
            n = n_new;
            s = s_new;
            if n.len() < 2 || done {
                return Ok((n, s, true));
            }
        }
        Ok((n, s, false))
    }

    fn run(&self, mut n: Array1<f64>, mut s: Array2<f64>, opts: &FreshOptions) -> Result<Option<FreshFit>> {
        // Bregman k-means (hard assignments) before the soft iterations: soft VB from one-atom
        // seeds tends to let one broad cluster absorb overlapping components
        for _ in 0..opts.kmeans_iters {
            let out = self.step(&n, &s, &[], true)?;
            let (n_new, s_new) = tidy(&out.n, &out.s);
            let same = n_new == n;
            n = n_new;
            s = s_new;
            if same || n.len() < 2 {
                break;
            }
        }
        // fewer than two clusters never grow back: nothing to propose
        if n.len() < 2 {
            return Ok(None);
        }
        let one = self.one_cluster_elbo()?;
        let mut left = opts.iters;
        // the step of the abandon check, which is also the next VB iteration's
        let mut next_step = None;
        if let Some(loss) = opts.abandon_loss {
            // a fit this far below one cluster after its first VB iterations is not pursued
            let first = opts.abandon_after.min(opts.iters);
            let settled;
            (n, s, settled) = self.run_vb_until(n, s, first, None)?;
            left = if settled { 0 } else { opts.iters - first };
            if n.len() < 2 {
                return Ok(None);
            }
            // one more step, and the best of its clusters and of every pairwise merge of them
            // (the merges that follow may turn a fit with a hopeless small cluster around)
            // (merges down to two clusters: the fit never ends with fewer)
            let pairs = if n.len() >= 3 { all_pairs(n.len()) } else { Vec::new() };
            let next = self.step(&n, &s, &pairs, false)?;
            let best = self.merged_elbos(&next, &pairs)?.into_iter().fold(self.elbo(&next.n, &next.s, &next.h)?, f64::max);
            let interim = best - one;
            if interim < -loss * self.w.sum() {
                let (nt, st) = tidy(&next.n, &next.s);
                return Ok(if nt.len() < 2 { None } else { Some(FreshFit { n: nt, s: st, gain: interim }) });
            }
            next_step = Some(next);
        }
        (n, s, _) = self.run_vb_until(n, s, left, next_step)?;
        // greedy merges among the fresh clusters, judged by the weighted subsample ELBO, while
        // they help or while there are more than n_fresh clusters (never below two)
        while n.len() >= 3 {
            let j = n.len();
            let pairs = all_pairs(j);
            let out = self.step(&n, &s, &pairs, false)?;
            let l0 = self.elbo(&out.n, &out.s, &out.h)?;
            let mut best = 0;
            let mut best_gain = f64::NEG_INFINITY;
            for (i, e) in self.merged_elbos(&out, &pairs)?.into_iter().enumerate() {
                let gain = e - l0;
                if i == 0 || gain > best_gain {
                    best = i;
                    best_gain = gain;
                }
            }
            if best_gain.partial_cmp(&0.0) != Some(Ordering::Greater) && j <= opts.n_fresh {
                (n, s) = tidy(&out.n, &out.s);
                break;
            }
            let (a, b) = pairs[best];
            let (nm, sm, _) = merged(&out.n, &out.s, &out.h, a, b, 0.0);
            let (nt, st) = tidy(&nm, &sm);
            (n, s) = self.run_vb(nt, st, 1.max(opts.iters / 4))?;
        }
        if n.len() < 2 {
            return Ok(None);
        }
        let last = self.step(&n, &s, &[], false)?;
        let fit = self.elbo(&last.n, &last.s, &last.h)?;
        Ok(Some(FreshFit { n, s, gain: fit - one }))
    }

    /// Weighted subsample ELBO of the step's clusters with each pair `pairs[i]` merged (the
    /// step's pair entropies give the merged entropy).
    fn merged_elbos(&self, out: &Step, pairs: &[(usize, usize)]) -> Result<Vec<f64>> {
        pairs
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| {
                let (nm, sm, hm) = merged(&out.n, &out.s, &out.h, a, b, out.pair_h[i]);
                self.elbo(&nm, &sm, &hm)
            })
            .collect()
    }

    /// Weighted subsample ELBO of one cluster holding all the weight.
    fn one_cluster_elbo(&self) -> Result<f64> {
        let acc1 = self.weighted_feature_sum().insert_axis(Axis(0));
        let n1 = Array1::from_elem(1, self.w.sum());
        let s1 = self.model.acc_finish(n1.view(), acc1);
        self.elbo(&n1, &s1, &Array1::zeros(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::SegmentWeights;
    use crate::local::{local_step, LocalOptions};
    use crate::obs::{Bern, DiagGauss, Gauss, Mult};
    use ndarray::Array1;

    use crate::test_rng::Rng;

    fn models(d: usize) -> Vec<Obs> {
        let b = Array2::<f64>::eye(d) * 1.5;
        vec![
            Obs::Gauss(Gauss::new(d as f64 + 2.0, 0.3, Array1::from_elem(d, 0.7), b.clone()).unwrap()),
            Obs::Gauss(Gauss::zero_mean(d as f64 + 2.0, b).unwrap()),
            Obs::DiagGauss(DiagGauss::new(3.0, 0.3, Array1::from_elem(d, -0.2), Array1::from_elem(d, 1.2)).unwrap()),
            Obs::Mult(Mult::new(Array1::from_elem(d, 0.5)).unwrap()),
            Obs::Bern(Bern::new(Array1::from_elem(d, 0.8), Array1::from_elem(d, 1.1)).unwrap()),
        ]
    }

    fn data(obs: &Obs, n: usize, d: usize, rng: &mut Rng) -> Array2<f64> {
        Array2::from_shape_fn((n, d), |(i, j)| {
            let g = (i % 3) as f64;
            match obs.kind() {
                "mult" => ((rng.uniform() * 4.0) as usize + if (i + j) % 3 == 0 { 5 } else { 0 }) as f64,
                "bern" => f64::from(u8::from(rng.uniform() < 0.2 + 0.3 * g)),
                _ => 3.0 * g - 2.0 + (rng.uniform() - 0.5) * (1.0 + 0.3 * j as f64),
            }
        })
    }

    fn close(a: &[f64], b: &[f64], rtol: f64) -> bool {
        let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= rtol * scale)
    }

    /// Whether the AVX2 builds can be compared with the portable ones on this machine. An
    /// x86-64 CPU without AVX2 fails the AVX2 tests (instead of letting them pass without
    /// checking anything) unless `BNPCORE_TEST_NO_AVX2` is set to accept that.
    #[cfg(target_arch = "x86_64")]
    fn avx2_available() -> bool {
        let found = std::arch::is_x86_feature_detected!("avx2");
        assert!(
            found || std::env::var_os("BNPCORE_TEST_NO_AVX2").is_some(),
            "this CPU lacks AVX2, so the AVX2 kernels cannot be compared with the portable ones; \
             set BNPCORE_TEST_NO_AVX2=1 to run without that comparison"
        );
        found
    }

    #[test]
    fn blocked_axpy_equals_one_axpy_per_row_bit_for_bit() {
        let mut rng = Rng::new(5);
        for n in [0usize, 1, 7, 153] {
            for t in 0..=4 {
                let xs: Vec<Vec<f64>> = (0..t).map(|_| (0..n).map(|_| rng.normal() * 1e3).collect()).collect();
                let cs: Vec<f64> = (0..t).map(|_| rng.normal()).collect();
                let y0: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
                let mut want = y0.clone();
                for (c, x) in cs.iter().zip(&xs) {
                    for (yi, xi) in want.iter_mut().zip(x) {
                        *yi += c * xi;
                    }
                }
                let mut got = y0;
                let xr: Vec<&[f64]> = xs.iter().map(|v| &v[..]).collect();
                axpy_rows(&cs, &xr, &mut got);
                assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "n={n} t={t}");
            }
        }
    }

    #[test]
    fn dots_equal_the_exact_sums_and_the_avx2_dots_bit_for_bit() {
        let mut rng = Rng(3);
        #[cfg(target_arch = "x86_64")]
        let avx2 = avx2_available();
        for len in 0..41 {
            let a: Vec<f64> = (0..len).map(|_| rng.uniform() * 8.0 - 4.0).collect();
            let w: Vec<Vec<f64>> = (0..4).map(|_| (0..len).map(|_| rng.uniform() * 1e3 - 5e2).collect()).collect();
            let mut p = [0.0; 4];
            dots::<4>(&a, [&w[0], &w[1], &w[2], &w[3]], &mut p);
            for (g, row) in w.iter().enumerate() {
                let exact: f64 = a.iter().zip(row).map(|(x, y)| x * y).sum();
                assert!((p[g] - exact).abs() <= 1e-9 * (1.0 + exact.abs()), "length {len} row {g}");
            }
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                let mut q = [0.0; 4];
                // SAFETY: AVX2 checked above; all rows have `len` entries.
                unsafe { dots_avx2::<4>(&a, [&w[0], &w[1], &w[2], &w[3]], &mut q) };
                assert_eq!(p.map(f64::to_bits), q.map(f64::to_bits), "length {len}");
            }
        }
    }

    /// The fused kernel's VB step equals the general local step (weights, pair entropies), and
    /// its hard step equals the argmax of the general log weights summarised with the weights.
    #[test]
    fn fused_steps_match_the_general_local_step() {
        let d = 4;
        let mut rng = Rng(11);
        for obs in models(d) {
            for n in [7, 300, 700] {
                let x = data(&obs, n, d, &mut rng);
                let w = Array1::from_shape_fn(n, |i| if i % 7 == 3 { 0.0 } else { 0.1 + rng.uniform() });
                let k = 3;
                let rows: Vec<usize> = (0..k).map(|j| (j * n) / k + 1).collect();
                let seeds = x.select(Axis(0), &rows);
                let (n0, s0) = obs.summarize(seeds.view(), Array2::eye(k).view()).unwrap();
                let n0 = n0 * 5.0;
                let s0 = s0 * 5.0;
                for alloc in [Alloc::Dp { gamma: 1.5 }, Alloc::Finite { gamma: 2.0 }] {
                    with_obs!(&obs, m => {
                        let table = m.e_log_lik_table(&m.posterior(n0.view(), s0.view()).unwrap());
                        let tmap = table.feature_map().clone();
                        let elp = alloc.e_log_pi(n0.view()).unwrap();
                        let pairs = vec![(0, 1), (0, 2), (1, 2)];
                        let opts = LocalOptions { weights: Some(w.view()), merge_pairs: pairs.clone(), ..Default::default() };
                        let seg = SegmentWeights::Rows { e_log_pi: elp.clone() };
                        let want = local_step(m, x.view(), &table, &seg, &opts).unwrap();
                        for pre in [false, true] {
                            let phi = if pre { precompute_features(&tmap, x.view()).map(|v| (tmap.clone(), v)) } else { None };
                            let fit = Fitter { model: m, x: x.view(), w: w.view(), alloc: &alloc, smap: m.feature_map(), leaf: fresh_leaf_rows(n), phi };
                            let got = fit.step(&n0, &s0, &pairs, false).unwrap();
                            let what = format!("{} n={n} precomputed={pre}", obs.kind());
                            assert!(close(got.n.as_slice().unwrap(), want.n.as_slice().unwrap(), 1e-12), "N {what}");
                            assert!(close(got.s.as_slice().unwrap(), want.s.as_slice().unwrap(), 1e-11), "S {what}");
                            assert!(close(got.h.as_slice().unwrap(), want.h.as_slice().unwrap(), 1e-11), "H {what}");
                            assert!(close(&got.pair_h, want.moves.pair_h.as_slice().unwrap(), 1e-11), "pair H {what}");
                            // hard step
                            let mut wl = crate::obs::eval_table(&table, x.view());
                            let mut hard = Array2::<f64>::zeros((n, k));
                            for (i, mut row) in wl.rows_mut().into_iter().enumerate() {
                                row += &elp;
                                let z = hard_choice(row.as_slice().unwrap());
                                hard[[i, z]] = w[i];
                            }
                            let (hn, hs) = obs.summarize(x.view(), hard.view()).unwrap();
                            let got = fit.step(&n0, &s0, &[], true).unwrap();
                            assert!(close(got.n.as_slice().unwrap(), hn.as_slice().unwrap(), 1e-12), "hard N {what}");
                            assert!(close(got.s.as_slice().unwrap(), hs.as_slice().unwrap(), 1e-11), "hard S {what}");
                        }
                    });
                }
            }
        }
    }

    /// The one-cluster summaries of the gain (`Σ w φ(x)`, streamed) are the summaries of
    /// responsibilities `w` on a single cluster, and do not depend on the thread count.
    #[test]
    fn weighted_feature_sum_is_the_one_cluster_summary() {
        let d = 5;
        let mut rng = Rng(23);
        for obs in models(d) {
            for n in [1, 9, 700, 3000] {
                let x = data(&obs, n, d, &mut rng);
                let w = Array1::from_shape_fn(n, |i| if i % 5 == 2 { 0.0 } else { 0.2 + 3.0 * rng.uniform() });
                let alloc = Alloc::Dp { gamma: 1.5 };
                let r = w.clone().insert_axis(Axis(1));
                let (_, want) = obs.summarize(x.view(), r.view()).unwrap();
                with_obs!(&obs, m => {
                    let fit = Fitter { model: m, x: x.view(), w: w.view(), alloc: &alloc, smap: m.feature_map(), leaf: fresh_leaf_rows(n), phi: None };
                    let sums: Vec<Array1<f64>> = [1, 2, 3]
                        .iter()
                        .map(|&t| rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap().install(|| fit.weighted_feature_sum()))
                        .collect();
                    assert!(sums.iter().all(|v| *v == sums[0]), "{} n={n}: thread counts differ", obs.kind());
                    let got = m.acc_finish(Array1::from_elem(1, w.sum()).view(), sums[0].clone().insert_axis(Axis(0)));
                    assert!(close(got.as_slice().unwrap(), want.as_slice().unwrap(), 1e-12), "{} n={n}", obs.kind());
                });
            }
        }
    }

    /// The AVX2 build and the portable build of the row kernel give the same bits.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn kernel_builds_agree_bit_for_bit() {
        if !avx2_available() {
            return; // accepted explicitly with BNPCORE_TEST_NO_AVX2
        }
        let d = 5;
        let mut rng = Rng(5);
        for obs in models(d) {
            let n = 333;
            let x = data(&obs, n, d, &mut rng);
            let w = Array1::from_shape_fn(n, |_| rng.uniform());
            let k = 4;
            let rows: Vec<usize> = (0..k).map(|j| 3 * j + 1).collect();
            let (n0, s0) = obs.summarize(x.select(Axis(0), &rows).view(), Array2::eye(k).view()).unwrap();
            with_obs!(&obs, m => {
                let table = m.e_log_lik_table(&m.posterior(n0.view(), s0.view()).unwrap());
                let LogLikTable::Lin { feat, w: tw, cst } = &table;
                let elp = Alloc::Dp { gamma: 1.0 }.e_log_pi(n0.view()).unwrap();
                let smap = m.feature_map();
                let pairs = [(0, 3), (1, 2)];
                for hard in [false, true] {
                    let kern = Kernel {
                        k,
                        tmap: feat,
                        smap: &smap,
                        wt: tw.t().as_standard_layout().into_owned(),
                        cst: cst.as_slice().unwrap(),
                        elp: elp.as_slice().unwrap(),
                        hard,
                        pairs: &pairs,
                        acc: acc_mode(feat, &smap),
                        phi: None,
                    };
                    let a = kern.leaf_impl(x.view(), w.view(), 0, n, false, false);
                    // SAFETY: AVX2 checked at the top of the test.
                    let b = unsafe { kern.leaf_avx2(x.view(), w.view(), 0, n) };
                    assert_eq!(kern.leaf(x.view(), w.view(), 0, n).n, b.n, "the dispatcher's build gives the same counts");
                    let bits = |p: &Part| -> Vec<u64> {
                        p.n.iter().chain(p.acc.iter()).chain(p.h.iter()).chain(p.pair_h.iter()).map(|v| v.to_bits()).collect()
                    };
                    assert_eq!(bits(&a), bits(&b), "{} hard={hard}", obs.kind());
                    if std::arch::is_x86_feature_detected!("avx512f") {
                        // every row count from 1 to 9 (blocks of four rows and their remainders),
                        // with features computed per row and precomputed
                        let feats = precompute_features(feat, x.view()).unwrap_or_else(|| x.as_standard_layout().iter().cloned().collect());
                        for m in 1..=9.min(n) {
                            for pre in [false, true] {
                                let kp = Kernel { phi: if pre { Some(&feats[..]) } else { None }, ..kern.clone_shallow() };
                                let want = kp.leaf_impl(x.view(), w.view(), 0, m, false, false);
                                // SAFETY: AVX-512F checked just above.
                                let got = unsafe { kp.leaf_avx512(x.view(), w.view(), 0, m) };
                                assert_eq!(bits(&want), bits(&got), "{} hard={hard} rows={m} precomputed={pre}", obs.kind());
                            }
                        }
                        assert_eq!(kern.leaf(x.view(), w.view(), 0, n).n, b.n);
                    }
                }
            });
        }
    }

    #[test]
    fn hard_choice_takes_the_first_of_values_tied_up_to_round_off() {
        assert_eq!(hard_choice(&[1.0, 3.0, 2.0]), 1);
        assert_eq!(hard_choice(&[-7.0 - 1e-14, -7.0, -9.0]), 0);
        assert_eq!(hard_choice(&[-7.0 - 1e-6, -7.0, -9.0]), 1);
        assert_eq!(hard_choice(&[f64::NEG_INFINITY, f64::NEG_INFINITY]), 0);
    }

    #[test]
    fn tidy_sorts_stably_by_decreasing_mass_and_drops_small_clusters() {
        let n = Array1::from(vec![2.0, 0.5, 7.0, 2.0, 1.0]);
        let s = Array2::from_shape_fn((5, 2), |(i, j)| (10 * i + j) as f64);
        let (tn, ts) = tidy(&n, &s);
        assert_eq!(tn.to_vec(), vec![7.0, 2.0, 2.0, 1.0]);
        assert_eq!(ts.column(0).to_vec(), vec![20.0, 0.0, 30.0, 40.0]);
    }
}
