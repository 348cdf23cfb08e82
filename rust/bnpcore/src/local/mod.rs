//! The fused local step (Hughes thesis §3.4.2): log weights `W_nk = E[log F(x_n|φ_k)] + E[ln π_k]`,
//! responsibilities `r_nk = exp(W_nk − lse_n)`, and their immediate reduction to additive
//! summaries — counts `N_k`, statistics `S_k`, entropies `H_k = −Σ r ln r` — plus everything
//! the proposal moves need from the same responsibilities (Hughes thesis ch. 4):
//!
//! * merge pair entropies `H^merge_ab = −Σ_n (r_na + r_nb) ln(r_na + r_nb)`;
//! * restricted-step proposals (birth and delete): the mass `a_n = Σ_{k∈src} r_nk` is
//!   redistributed over destination clusters, `r'_nj = a_n softmax_j(W'_nj)`, and summarised;
//! * a responsibility column (birth subsample collection) and a co-occurrence vector
//!   `Σ_n r_nt r_nk` (choice of a delete's absorbing set).
//!
//! With `top_l = Some(L)`, `L < K`, responsibilities are L-sparse (Hughes & Sudderth 2016 §3; Hughes thesis §7.1): per row the `L`
//! largest log weights are selected in linear time ([`top_l`]) and normalised over; every
//! output above is then computed from the sparse rows only (summaries by scatter-adding the
//! selected clusters, bucketed by cluster inside each tile; pair entropies, co-occurrences and
//! restricted steps as in Hughes thesis ch. 4 with L-sparse rows). `L ≥ K` runs the dense kernel, so it reproduces
//! the dense result exactly. For the zero-mean Gaussian at large `K`, the sparse rows' candidate
//! clusters come from a single-precision GEMM with a rigorous error bound and their log weights
//! are recomputed in double precision (`cand32`): the same top `L`, about twice as fast.
//!
//! Work is organised for speed: every model's log-likelihood and statistic are linear in a
//! feature map `φ` ([`crate::obs::FeatureMap`]; the `vech` form for Gaussians), so per tile of
//! [`crate::parallel::tile_rows`] rows (512, fewer for wide features) the local step builds
//! `φ(X)` once, computes `W = φ(X) Wt` with one GEMM and (dense) the summaries `Acc += Rᵀ φ(X)`
//! with a second GEMM. Scratch buffers live per leaf.
//!
//! Rows are processed in fixed leaves ([`leaf_rows`], a function of `N` only) reduced by a
//! fixed tree ([`crate::parallel`]), so every output is bit-identical whatever the thread count.

//!
//! # Layout
//! This module holds the public types, the options and outputs, the checks and the driver
//! ([`local_step`]: tiles, leaves, the reduction tree); each code path of a tile is its own
//! module: `dense` (dense rows), `sparse` (L-sparse rows; selection in [`top_l`], the f32
//! candidates in `cand32`) and `proposal` (restricted steps of births and deletes). A tile
//! function takes the step-wide `LocalContext` and the tile's `Tile` instead of a long list of
//! arguments. The allocation model enters only through [`SegmentWeights`]: for mixtures one
//! `E[ln π]` vector added to every row (the document and sequence steps will add their own
//! modules beside these).

mod cand32;
mod csr;
mod dense;
pub mod doc_topic;
pub mod fwd_bwd;
mod proposal;
mod sparse;
pub mod top_l;

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2};

use crate::alloc::{Alloc, SegmentWeights};
use crate::error::{Error, Result};
use crate::obs::{LogLikTable, Obs, ObsModel};
use crate::parallel::{leaf_rows, tile_rows, tree_reduce};
use crate::with_obs;
pub(crate) use csr::check_csr_rows;
use csr::Feats;
pub use csr::{eval_table_csr, CsrIndices, CsrRows};
pub use proposal::PROPOSAL_MIN_MASS;
use proposal::{FreshRows, PropScratch};
#[cfg(test)]
pub(crate) use sparse::select_top_l_of_candidates;
use top_l::NONE;

/// The pairs `(a, b)`, `a < b`, whose bit `a·K + b` is set, in increasing order.
fn pairs_of_bits(bits: &[u64], k: usize) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (wi, &word) in bits.iter().enumerate() {
        let mut w = word;
        while w != 0 {
            let bit = wi * 64 + w.trailing_zeros() as usize;
            out.push(((bit / k) as u32, (bit % k) as u32));
            w &= w - 1;
        }
    }
    out
}

/// Destination clusters of a restricted-step proposal.
#[derive(Debug, Clone)]
pub enum Dest {
    /// Existing clusters (their current `W` columns), e.g. a delete's absorbing set.
    Columns(Vec<usize>),
    /// Fresh clusters with their own log-likelihood table and `E[ln π]` (a birth).
    Fresh {
        /// table of the fresh clusters
        table: LogLikTable,
        /// log weights of the fresh clusters
        e_log_pi: Array1<f64>,
    },
}

/// A restricted-step proposal: move the mass of the `src` columns onto `dest`.
#[derive(Debug, Clone)]
pub struct Proposal {
    /// source columns whose responsibility mass is redistributed
    pub src: Vec<usize>,
    /// destination clusters
    pub dest: Dest,
    /// restrict the step to the rows holding mass on some anchor columns (a delete: only the
    /// target's rows change); `None` re-spreads every row with source mass
    pub carry: Option<Carry>,
}

/// Rows a proposal changes when its destinations continue existing columns (a delete's
/// absorbing set). `src` must be `anchor ∪ cols` (disjoint), destination `j` continuing column
/// `cols[j]`. Rows without anchor mass keep their responsibilities (`r'_nj = r_{n,cols[j]}`);
/// dense rows with anchor mass `0 < m_n ≤` [`PROPOSAL_MIN_MASS`] add it to destination 0; the
/// other rows are re-spread as without `carry`. The summaries returned are still those of the
/// whole destination columns: the step's own summaries of `cols` plus the changes of the rows
/// it re-spreads, so the cost follows the anchor's rows instead of the rows of `src`.
#[derive(Debug, Clone)]
pub struct Carry {
    /// columns whose rows are re-spread (a delete's target)
    pub anchor: Vec<usize>,
    /// column continued by each destination
    pub cols: Vec<usize>,
}

/// Summaries of one proposal's destination columns.
#[derive(Debug, Clone)]
pub struct ProposalStats {
    /// counts `N'_j`
    pub n: Array1<f64>,
    /// statistics `S'_j`
    pub s: Array2<f64>,
    /// entropies `H'_j = −Σ r' ln r'`
    pub h: Array1<f64>,
}

/// Options of [`local_step`].
#[derive(Debug, Clone, Default)]
pub struct LocalOptions<'a> {
    /// per-row weights multiplying every summary (birth refinement on a weighted subsample)
    pub weights: Option<ArrayView1<'a, f64>>,
    /// merge candidate pairs `(a, b)` whose pair entropies are returned
    pub merge_pairs: Vec<(usize, usize)>,
    /// restricted-step proposals
    pub proposals: Vec<Proposal>,
    /// return these columns of the responsibilities (a birth's collection targets)
    pub collect_cols: Vec<usize>,
    /// return `Σ_n r_nc r_nk` for this `c`
    pub cooccur_col: Option<usize>,
    /// with L-sparse rows (`top_l < K`): return the pairs of clusters held together by some
    /// row (merge candidates follow the sparsity); ignored for dense rows, where every pair is
    pub cooccur_pairs: bool,
    /// return the responsibilities (dense `N × K`, or with `top_l` the `N × L` index and value
    /// arrays)
    pub return_resp: bool,
    /// keep at most this many clusters per row (L-sparse responsibilities); `None` is dense
    pub top_l: Option<usize>,
}

/// What a local step computes for the moves (merge, birth, delete), from the same
/// responsibilities as the summaries.
#[derive(Debug, Clone)]
pub struct MoveOutputs {
    /// merge pair entropies, one per pair of [`LocalOptions::merge_pairs`]
    pub pair_h: Array1<f64>,
    /// proposal summaries, one per [`LocalOptions::proposals`]
    pub proposals: Vec<ProposalStats>,
    /// responsibility columns [`LocalOptions::collect_cols`] (`N × m`) if requested
    pub cols: Option<Array2<f64>>,
    /// co-occurrence vector `Σ_n r_nc r_nk` of [`LocalOptions::cooccur_col`] if requested
    pub cooccur: Option<Array1<f64>>,
    /// with [`LocalOptions::cooccur_pairs`] and L-sparse rows: the pairs `(a, b)`, `a < b`, held
    /// together by at least one row, in increasing order
    pub co_pairs: Option<Vec<(u32, u32)>>,
}

/// Everything a local step returns.
#[derive(Debug, Clone)]
pub struct LocalOutput {
    /// counts `N_k`
    pub n: Array1<f64>,
    /// statistics `S_k` (`K × stat_dim`)
    pub s: Array2<f64>,
    /// entropies `H_k`
    pub h: Array1<f64>,
    /// `Σ_n w_n h(x_n)` (`w_n = 1` without row weights)
    pub h_sum: f64,
    /// `Σ_n w_n lse_n` (the optimal local objective; `lse⁽ᴸ⁾_n` for sparse rows)
    pub lse_sum: f64,
    /// outputs of the moves
    pub moves: MoveOutputs,
    /// dense responsibilities if requested (without `top_l`)
    pub resp: Option<Array2<f64>>,
    /// with `top_l` and `return_resp`: cluster indices `N × min(L, K)`, ascending within a row,
    /// padded with [`top_l::NONE`]
    pub resp_idx: Option<Array2<u32>>,
    /// with `top_l` and `return_resp`: responsibilities `N × min(L, K)` matching `resp_idx`
    /// (0 in padding slots)
    pub resp_val: Option<Array2<f64>>,
    /// with `top_l`, when the candidates came from the single-precision GEMM (`cand32`): how
    /// many `(row, cluster)` log weights were recomputed in `f64` (about `L` per row)
    pub n_candidates: Option<u64>,
}

struct PropPartial {
    n: Array1<f64>,
    acc: Array2<f64>,
    h: Array1<f64>,
}

struct Partial {
    n: Array1<f64>,
    acc: Array2<f64>,
    h: Array1<f64>,
    lse: f64,
    pair_h: Vec<f64>,
    props: Vec<PropPartial>,
    cooccur: Option<Array1<f64>>,
    /// bit `a·K + b` set when some row holds clusters `a < b` together
    co_bits: Option<Vec<u64>>,
}

impl Partial {
    /// `acc_t`: the accumulators are stored transposed (`F × K`, `F × J`), the layout of the
    /// CSR path (see [`csr::Feats`]).
    fn zeros(k: usize, f: usize, n_pairs: usize, prop_lens: &[usize], cooccur: bool, co_bits: bool, acc_t: bool) -> Partial {
        let shape = |r: usize| if acc_t { (f, r) } else { (r, f) };
        Partial {
            n: Array1::zeros(k),
            acc: Array2::zeros(shape(k)),
            h: Array1::zeros(k),
            lse: 0.0,
            pair_h: vec![0.0; n_pairs],
            props: prop_lens
                .iter()
                .map(|&j| PropPartial { n: Array1::zeros(j), acc: Array2::zeros(shape(j)), h: Array1::zeros(j) })
                .collect(),
            cooccur: if cooccur { Some(Array1::zeros(k)) } else { None },
            co_bits: if co_bits { Some(vec![0u64; (k * k).div_ceil(64)]) } else { None },
        }
    }

    fn add(mut self, o: Partial) -> Partial {
        self.n += &o.n;
        self.acc += &o.acc;
        self.h += &o.h;
        self.lse += o.lse;
        for (a, b) in self.pair_h.iter_mut().zip(o.pair_h) {
            *a += b;
        }
        for (a, b) in self.props.iter_mut().zip(o.props) {
            a.n += &b.n;
            a.acc += &b.acc;
            a.h += &b.h;
        }
        if let (Some(a), Some(b)) = (self.cooccur.as_mut(), o.cooccur) {
            *a += &b;
        }
        if let (Some(a), Some(b)) = (self.co_bits.as_mut(), o.co_bits) {
            a.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
        }
        self
    }
}

/// Raw row-block writer for outputs whose rows are written by disjoint leaves.
struct RowWriter<T> {
    ptr: *mut T,
    ncols: usize,
}
// SAFETY: leaves write to disjoint row ranges only.
unsafe impl<T: Send> Sync for RowWriter<T> {}
unsafe impl<T: Send> Send for RowWriter<T> {}
impl<T> RowWriter<T> {
    fn new(a: Option<&mut Array2<T>>, ncols: usize) -> Self {
        RowWriter { ptr: a.map_or(std::ptr::null_mut(), |r| r.as_mut_ptr()), ncols }
    }
    /// # Safety
    /// The target exists, `a..b` is in bounds and not accessed by anybody else concurrently.
    unsafe fn rows(&self, a: usize, b: usize) -> ArrayViewMut2<'_, T> {
        // SAFETY: guaranteed by the caller.
        unsafe { ArrayViewMut2::from_shape_ptr((b - a, self.ncols), self.ptr.add(a * self.ncols)) }
    }
}

#[inline]
pub(crate) fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((a - m).exp() + (b - m).exp()).ln()
}

/// Responsibilities below `exp(EXP_CUTOFF)` (≈ 1e-261 of the row's largest) are set to 0: they
/// cannot change any summary beyond round-off, and keeping them would let subnormal numbers
/// into the summary GEMM, where each one costs a slow microcode assist on x86.
const EXP_CUTOFF: f64 = -600.0;

/// `2^(j/32)` for `j = 0..32`, correctly rounded (bits).
const EXP2_32THS: [u64; 32] = [
    0x3ff0000000000000,
    0x3ff059b0d3158574,
    0x3ff0b5586cf9890f,
    0x3ff11301d0125b51,
    0x3ff172b83c7d517b,
    0x3ff1d4873168b9aa,
    0x3ff2387a6e756238,
    0x3ff29e9df51fdee1,
    0x3ff306fe0a31b715,
    0x3ff371a7373aa9cb,
    0x3ff3dea64c123422,
    0x3ff44e086061892d,
    0x3ff4bfdad5362a27,
    0x3ff5342b569d4f82,
    0x3ff5ab07dd485429,
    0x3ff6247eb03a5585,
    0x3ff6a09e667f3bcd,
    0x3ff71f75e8ec5f74,
    0x3ff7a11473eb0187,
    0x3ff82589994cce13,
    0x3ff8ace5422aa0db,
    0x3ff93737b0cdc5e5,
    0x3ff9c49182a3f090,
    0x3ffa5503b23e255d,
    0x3ffae89f995ad3ad,
    0x3ffb7f76f2fb5e47,
    0x3ffc199bdd85529c,
    0x3ffcb720dcef9069,
    0x3ffd5818dcfba487,
    0x3ffdfc97337b9b5f,
    0x3ffea4afa2a490da,
    0x3fff50765b6e4540,
];

/// `e^x` for `x ∈ [EXP_CUTOFF, 0]` (tested down to −650; below about −708 the exponent field of
/// `2ⁿ` underflows and the result is wrong, which is why callers clamp) from multiplications,
/// additions and one table read, so that a loop over it vectorises: `x = (32n + j) ln 2 / 32 + r`
/// with `32n + j` the nearest integer to `32 x / ln 2` (rounded by adding and subtracting
/// `1.5·2⁵²`; `ln 2` split in two so `r` is exact to ~1e-20), `|r| ≤ ln 2 / 64`, `e^r` by its
/// degree-6 Taylor polynomial (truncation below 4e-18 relative), `2^(j/32)` from a table and `2ⁿ`
/// written into the exponent bits. Within 1 ulp of the platform's `exp` (test
/// `exp_neg_is_within_one_ulp`); the same operations in the same order on every CPU, vector or
/// scalar.
#[inline(always)]
pub(crate) fn exp_neg(x: f64) -> f64 {
    // ln 2 = LN2_HI + LN2_LO, LN2_HI with its low 21 bits zero (so m · LN2_HI / 32 is exact)
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5 · 2⁵²
    const C: [f64; 6] = [1.0, 1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0]; // 1/k!, k = 1..=6
    let t = x * (std::f64::consts::LOG2_E * 32.0) + SHIFT;
    let mf = t - SHIFT;
    let r = (x - mf * (LN2_HI / 32.0)) - mf * (LN2_LO / 32.0);
    // q = e^r − 1 = r (1 + r (1/2 + …)); e^x = 2ⁿ (T + T q) with T = 2^(j/32): the big term exact
    let mut q = C[5];
    for &c in C[..5].iter().rev() {
        q = q * r + c;
    }
    q *= r;
    // the low bits of `t` hold m = 32n + j (two's complement after removing the shift)
    let m = t.to_bits().wrapping_sub(SHIFT.to_bits());
    let j = (m & 31) as usize;
    let scale = f64::from_bits((m.wrapping_sub(j as u64) << 47).wrapping_add(1023 << 52));
    let tab = f64::from_bits(EXP2_32THS[j]);
    (tab + tab * q) * scale
}

#[inline(always)]
fn exp_shifted_impl(w: &[f64], m: f64, out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(w) {
        let t = v - m;
        let e = exp_neg(t.max(EXP_CUTOFF));
        *o = if t > EXP_CUTOFF { e } else { 0.0 };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn exp_shifted_avx2(w: &[f64], m: f64, out: &mut [f64]) {
    exp_shifted_impl(w, m, out)
}

/// `out_j = e^{w_j − m}` (0 below [`EXP_CUTOFF`]), four lanes at a time where AVX2 is available
/// (the same operations per entry, so the same bits).
fn exp_shifted(w: &[f64], m: f64, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { exp_shifted_avx2(w, m, out) };
        }
    }
    exp_shifted_impl(w, m, out)
}

/// Softmax of `w` in place into `out`; returns the log-sum-exp. Rows of `-inf` get a uniform
/// distribution (never NaN).
#[inline]
pub(crate) fn softmax_row(w: &[f64], out: &mut [f64]) -> f64 {
    let m = w.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        let u = 1.0 / w.len() as f64;
        out.iter_mut().for_each(|o| *o = u);
        return f64::NEG_INFINITY;
    }
    // exponentials first (a loop without a carried sum vectorises), then the sum in order
    exp_shifted(w, m, out);
    let mut tot = 0.0;
    for &e in out.iter() {
        tot += e;
    }
    let inv = 1.0 / tot;
    out.iter_mut().for_each(|o| *o *= inv);
    m + tot.ln()
}

/// `ln r_j` of a row produced by [`softmax_row`]: `w_j − lse`, or `−ln J` for the uniform row that
/// replaces an all-`-inf` row (where `w_j − lse` would be `-inf − (-inf)` = NaN).
#[inline]
pub(crate) fn log_resp(w: f64, lse: f64, len: usize) -> f64 {
    if lse == f64::NEG_INFINITY {
        -(len as f64).ln()
    } else {
        w - lse
    }
}

/// `−r ln r` computed from `ln r` (0 when `r` underflows).
#[inline]
pub(crate) fn ent_term(r: f64, log_r: f64) -> f64 {
    if r > 0.0 {
        -r * log_r
    } else {
        0.0
    }
}

/// `acc += Σ_i c_i · rows[i]` over a list of `(row, coefficient)` pairs of `phi`, four rows at a
/// time so the accumulator row is read and written once per four rows.
fn axpy_rows(acc: &mut [f64], phi: &ArrayView2<f64>, list: &[(u32, f64)]) {
    let f = acc.len();
    let mut chunks = list.chunks_exact(4);
    for c in &mut chunks {
        let r0 = phi.row(c[0].0 as usize);
        let r1 = phi.row(c[1].0 as usize);
        let r2 = phi.row(c[2].0 as usize);
        let r3 = phi.row(c[3].0 as usize);
        let (p0, p1, p2, p3) = (
            r0.as_slice().expect("contiguous"),
            r1.as_slice().expect("contiguous"),
            r2.as_slice().expect("contiguous"),
            r3.as_slice().expect("contiguous"),
        );
        let (w0, w1, w2, w3) = (c[0].1, c[1].1, c[2].1, c[3].1);
        for j in 0..f {
            acc[j] += w0 * p0[j] + w1 * p1[j] + w2 * p2[j] + w3 * p3[j];
        }
    }
    for &(n, w) in chunks.remainder() {
        let r = phi.row(n as usize);
        let p = r.as_slice().expect("contiguous");
        for j in 0..f {
            acc[j] += w * p[j];
        }
    }
}

fn validate(k: usize, n_rows: usize, e_log_pi: ArrayView1<f64>, opts: &LocalOptions) -> Result<()> {
    if e_log_pi.len() != k {
        return Err(Error::shape("e_log_pi", format!("({k},)"), format!("({},)", e_log_pi.len())));
    }
    if e_log_pi.iter().any(|v| v.is_nan() || *v == f64::INFINITY) {
        return Err(Error::NonFinite { what: "`e_log_pi`".into() });
    }
    if opts.top_l == Some(0) {
        return Err(Error::param("top_l", "must be >= 1 (or None for dense responsibilities)"));
    }
    if let Some(w) = opts.weights {
        if w.len() != n_rows {
            return Err(Error::shape("weights", format!("({n_rows},)"), format!("({},)", w.len())));
        }
        if w.iter().any(|&v| !(v >= 0.0) || !v.is_finite()) {
            return Err(Error::param("weights", "row weights must be finite and >= 0"));
        }
    }
    for &(a, b) in &opts.merge_pairs {
        if a >= k || b >= k || a == b {
            return Err(Error::param("merge_pairs", format!("pair ({a}, {b}) invalid for {k} clusters")));
        }
    }
    for (i, p) in opts.proposals.iter().enumerate() {
        if p.src.is_empty() || p.src.iter().any(|&c| c >= k) {
            return Err(Error::param("proposals", format!("proposal {i}: source columns must be non-empty and < {k}")));
        }
        match &p.dest {
            Dest::Columns(c) => {
                if c.is_empty() || c.iter().any(|&j| j >= k) {
                    return Err(Error::param("proposals", format!("proposal {i}: destination columns must be non-empty and < {k}")));
                }
            }
            Dest::Fresh { table, e_log_pi } => {
                if table.n_clusters() == 0 || e_log_pi.len() != table.n_clusters() {
                    return Err(Error::param("proposals", format!("proposal {i}: fresh clusters and their log weights disagree")));
                }
            }
        }
        if let Some(c) = &p.carry {
            let n_dest = match &p.dest {
                Dest::Columns(cols) => cols.len(),
                Dest::Fresh { table, .. } => table.n_clusters(),
            };
            let mut src = p.src.clone();
            src.sort_unstable();
            let mut both: Vec<usize> = c.anchor.iter().chain(&c.cols).copied().collect();
            both.sort_unstable();
            let distinct = both.windows(2).all(|w| w[0] != w[1]);
            if c.anchor.is_empty() || c.cols.len() != n_dest || !distinct || both != src {
                return Err(Error::param(
                    "proposals",
                    format!("proposal {i}: `anchor` and `carry` must be disjoint, make up `src`, and `carry` must name one column per destination"),
                ));
            }
        }
    }
    let named = opts.collect_cols.iter().map(|&c| ("collect_cols", c)).chain(opts.cooccur_col.map(|c| ("cooccur_col", c)));
    for (name, c) in named {
        if c >= k {
            return Err(Error::param(name, format!("column {c} out of range for {k} clusters")));
        }
    }
    Ok(())
}

/// `Σ_n w_n h(x_n)`: the reference-measure summary is weighted like every other summary.
fn weighted_h_sum<M: ObsModel>(model: &M, x: ArrayView2<f64>, weights: Option<ArrayView1<f64>>) -> f64 {
    match weights {
        None => model.h_sum(x),
        Some(w) => (0..x.nrows()).map(|i| w[i] * model.h_sum(x.slice(s![i..i + 1, ..]))).sum(),
    }
}

/// The output rows written by the leaves (null writers for outputs not requested).
struct Writers {
    /// dense responsibilities (or, with `top_l ≥ K`, the sparse values)
    resp: RowWriter<f64>,
    /// sparse indices
    idx: RowWriter<u32>,
    /// sparse values
    val: RowWriter<f64>,
    /// the collected responsibility columns
    col: RowWriter<f64>,
}

/// What every tile of one local step reads, built once per call.
pub(crate) struct LocalContext<'a, 'o> {
    /// the options (move requests, row weights, `top_l`)
    opts: &'a LocalOptions<'o>,
    /// number of clusters `K`
    k: usize,
    /// fresh clusters of each proposal prepared for the dense restricted steps
    fresh: &'a [Option<FreshRows>],
    /// output writers
    out: &'a Writers,
    /// sparse Gaussian summaries are deferred to the end of the leaf (`sparse::vech_bucket_summaries`)
    defer_vech: bool,
    /// the sparse rows' log weights are the f32 candidates' (`cand32`)
    cands: bool,
}

/// One tile of rows `t0..t0 + rows` of a leaf.
pub(crate) struct Tile<'a> {
    /// first row (batch index)
    t0: usize,
    /// number of rows
    rows: usize,
    /// table features `φ(X)` of the tile (those of the log weights)
    tphi: Feats<'a>,
    /// summary features of the tile (the same as `tphi` except for the full Gaussian's centred tables)
    phi: Feats<'a>,
    /// row weight `w_n` of tile row `n` (1 without row weights)
    wt: &'a dyn Fn(usize) -> f64,
}

/// Per-leaf scratch buffers, reused from tile to tile.
struct Scratch {
    phi: Vec<f64>,
    sphi: Vec<f64>,
    w: Array2<f64>,
    resp: Array2<f64>,
    lse: Vec<f64>,
    // sparse
    idx: Vec<u32>,
    val: Vec<f64>,
    cnt: Vec<u32>,
    sel: Vec<u32>,
    cand: Vec<u32>,
    g: Vec<f64>,
    gv: Vec<f64>,
    slot_of: Vec<u32>,
    bucket: Vec<(u32, f64)>,
    pos: Vec<u32>,
    // leaf-level (cluster, row, coefficient) entries for the bucketed Gaussian summary
    entries: Vec<(u32, u32, f64)>,
    gy: Vec<f64>,
    gz: Vec<f64>,
    gram: Array2<f64>,
    // restricted steps of sparse rows
    dwr: Vec<f64>,
    support: Vec<u32>,
    gsub: Vec<f64>,
    psub: Vec<f64>,
    // restricted steps of dense rows
    prop: PropScratch,
    // f32 candidates of the current tile and a K-row of their f64 log weights (−∞ elsewhere)
    c32: cand32::Scratch32,
    wx: Vec<f64>,
}

/// The rows of one batch: dense, or compressed sparse rows (count models: `mult`, `bern`).
#[derive(Clone, Copy, Debug)]
pub enum BatchRows<'a> {
    /// `n_rows × D` dense rows
    Dense(ArrayView2<'a, f64>),
    /// CSR rows (`O(nnz · K)` per step)
    Csr(&'a CsrRows<'a>),
}

/// Local step + summaries of one batch for a concrete model, a prepared table and the
/// allocation model's log weights of each segment (for mixtures, the `E[ln π]` added to every
/// row).
///
/// # Errors
/// Shape/finiteness/option errors (checked before any work).
pub fn local_step<M: ObsModel>(
    model: &M,
    x: ArrayView2<f64>,
    table: &LogLikTable,
    weights: &SegmentWeights,
    opts: &LocalOptions,
) -> Result<LocalOutput> {
    local_step_rows(model, BatchRows::Dense(x), table, weights, opts)
}

/// [`local_step`] of dense or CSR rows. CSR rows need a model whose feature map is the
/// identity and whose `h(x)` is zero (`mult`, `bern`:
/// [`ObsModel::check_sparse_values`]); every output equals the dense step's up to the
/// summation order of the products.
///
/// # Errors
/// As [`local_step`]; sparse rows for a model that does not take them.
pub fn local_step_rows<M: ObsModel>(
    model: &M,
    data: BatchRows,
    table: &LogLikTable,
    weights: &SegmentWeights,
    opts: &LocalOptions,
) -> Result<LocalOutput> {
    let SegmentWeights::Rows { e_log_pi } = weights;
    let (n_rows, n_cols) = match data {
        BatchRows::Dense(x) => {
            model.check_data(x, "X")?;
            x.dim()
        }
        BatchRows::Csr(c) => {
            check_csr_rows(model, c, table)?;
            (c.n_rows(), c.n_cols())
        }
    };
    let k = table.n_clusters();
    validate(k, n_rows, e_log_pi.view(), opts)?;
    // CSR rows accumulate `Accᵀ` (F × K): one contiguous K-vector update per stored entry
    let acc_t = matches!(data, BatchRows::Csr(_));
    // features of the log weights (the table's) and of the summaries (the model's): the same map
    // up to the centre of the full-covariance Gaussian's tables
    let feat = table.feature_map().clone();
    let sfeat = model.feature_map();
    let same_feat = sfeat == feat;
    let f_dim = sfeat.dim(n_cols);
    for p in &opts.proposals {
        if let Dest::Fresh { table: t, .. } = &p.dest {
            if *t.feature_map() != feat {
                return Err(Error::param("proposals", "fresh clusters must come from the same observation model"));
            }
        }
    }
    let sparse_l = opts.top_l.filter(|&l| l < k);
    let co_bits = opts.cooccur_pairs && sparse_l.is_some();
    // Gaussian L-sparse summaries: gather each cluster's rows of the leaf and use one GEMM
    let defer_vech = sparse_l.is_some() && matches!(sfeat, crate::obs::FeatureMap::Vech { .. });
    let prop_lens: Vec<usize> = opts
        .proposals
        .iter()
        .map(|p| match &p.dest {
            Dest::Columns(c) => c.len(),
            Dest::Fresh { table, .. } => table.n_clusters(),
        })
        .collect();
    let elp = e_log_pi.to_vec();
    // restricted steps evaluate the fresh clusters row by row, only where the source mass matters
    let fresh: Vec<Option<FreshRows>> = opts
        .proposals
        .iter()
        .map(|p| match &p.dest {
            Dest::Fresh { table, e_log_pi } => Some(FreshRows::new(table, e_log_pi)),
            Dest::Columns(_) => None,
        })
        .collect();
    // L-sparse zero-mean Gaussian rows at large K: candidates from an f32 GEMM, exact selection
    let c32 = match data {
        BatchRows::Dense(_) => sparse_l.and_then(|l| cand32::Cand32::prepare(table, &elp, n_rows, l)),
        BatchRows::Csr(_) => None,
    };
    // (a sum of integers: the same for any order of the leaves)
    let n_cand = std::sync::atomic::AtomicU64::new(0);
    // existing clusters whose log weights the restricted steps read (beyond the candidates)
    let extra_cols: Vec<u32> = {
        let mut v: Vec<u32> = opts
            .proposals
            .iter()
            .filter_map(|p| match &p.dest {
                Dest::Columns(c) => Some(c.iter().map(|&j| j as u32)),
                Dest::Fresh { .. } => None,
            })
            .flatten()
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };

    let out_l = opts.top_l.map(|l| l.min(k));
    let mut resp_out = if opts.return_resp && opts.top_l.is_none() { Some(Array2::<f64>::zeros((n_rows, k))) } else { None };
    let mut idx_out = match (opts.return_resp, out_l) {
        (true, Some(l)) => Some(Array2::<u32>::from_elem((n_rows, l), NONE)),
        _ => None,
    };
    let mut val_out = match (opts.return_resp, out_l) {
        (true, Some(l)) => Some(Array2::<f64>::zeros((n_rows, l))),
        _ => None,
    };
    let n_collect = opts.collect_cols.len();
    let mut col_out = if n_collect > 0 { Some(Array2::<f64>::zeros((n_rows, n_collect))) } else { None };
    // with top_l >= K the dense rows are the sparse values (indices 0..K filled in below)
    let resp_writer =
        if sparse_l.is_none() && out_l.is_some() { RowWriter::new(val_out.as_mut(), k) } else { RowWriter::new(resp_out.as_mut(), k) };
    let idx_writer = RowWriter::new(idx_out.as_mut(), out_l.unwrap_or(0));
    let val_writer = RowWriter::new(val_out.as_mut(), out_l.unwrap_or(0));
    let col_writer = RowWriter::new(col_out.as_mut(), n_collect);
    let writers = Writers { resp: resp_writer, idx: idx_writer, val: val_writer, col: col_writer };
    let ctx = LocalContext { opts, k, fresh: &fresh, out: &writers, defer_vech, cands: c32.is_some() };

    // rows per tile: the features of a tile (table and, if different, summary features) in cache
    let tile_step = tile_rows(feat.dim(n_cols) + if same_feat { 0 } else { f_dim });
    let leaf = |a: usize, b: usize| -> Partial {
        let mut part = Partial::zeros(k, f_dim, opts.merge_pairs.len(), &prop_lens, opts.cooccur_col.is_some(), co_bits, acc_t);
        let tile = tile_step.min(b - a);
        let mut sc = Scratch {
            phi: Vec::new(),
            sphi: Vec::new(),
            w: Array2::zeros((if c32.is_some() { 0 } else { tile }, k)),
            resp: Array2::zeros((if sparse_l.is_some() { 0 } else { tile }, k)),
            lse: vec![0.0; tile],
            idx: Vec::new(),
            val: Vec::new(),
            cnt: Vec::new(),
            sel: Vec::new(),
            cand: Vec::new(),
            g: Vec::new(),
            gv: Vec::new(),
            slot_of: if opts.top_l.is_some() { vec![NONE; k] } else { Vec::new() },
            bucket: Vec::new(),
            pos: Vec::new(),
            entries: Vec::new(),
            gy: Vec::new(),
            gz: Vec::new(),
            gram: Array2::zeros((0, 0)),
            dwr: Vec::new(),
            support: Vec::new(),
            gsub: Vec::new(),
            psub: Vec::new(),
            prop: PropScratch::default(),
            c32: cand32::Scratch32::default(),
            wx: if c32.is_some() { vec![f64::NEG_INFINITY; k] } else { Vec::new() },
        };
        let mut t0 = a;
        while t0 < b {
            let t1 = (t0 + tile_step).min(b);
            let rows = t1 - t0;
            let mut phi_buf = std::mem::take(&mut sc.phi);
            let mut sphi_buf = std::mem::take(&mut sc.sphi);
            {
                let (tphi, phi) = match data {
                    BatchRows::Dense(x) => {
                        let xt = x.slice_move(s![t0..t1, ..]);
                        if let (Some(c), Some(l)) = (&c32, sparse_l) {
                            c.tile(xt, l, &extra_cols, &mut sc.c32);
                            n_cand.fetch_add(sc.c32.idx.len() as u64, std::sync::atomic::Ordering::Relaxed);
                            // the f32 candidate path builds its own features and the summaries
                            // are deferred: f64 features only for the rows restricted steps read
                            let tphi = Feats::Lazy { x: xt, map: &feat };
                            (tphi, if same_feat { tphi } else { Feats::Lazy { x: xt, map: &sfeat } })
                        } else {
                            let tphi = feat.apply(xt, &mut phi_buf);
                            // (deferred summaries without proposals read no summary features)
                            let phi =
                                if same_feat || (defer_vech && opts.proposals.is_empty()) { tphi } else { sfeat.apply(xt, &mut sphi_buf) };
                            (Feats::Dense(tphi), Feats::Dense(phi))
                        }
                    }
                    BatchRows::Csr(c) => (Feats::Csr { rows: c, r0: t0 }, Feats::Csr { rows: c, r0: t0 }),
                };
                if c32.is_none() {
                    let mut w = sc.w.slice_mut(s![0..rows, ..]);
                    tphi.eval(table, w.view_mut());
                    for mut row in w.rows_mut() {
                        let r = row.as_slice_mut().expect("contiguous");
                        r.iter_mut().zip(&elp).for_each(|(o, &e)| *o += e);
                    }
                }
                let wt = |n: usize| opts.weights.map_or(1.0, |wv| wv[t0 + n]);
                let tile = Tile { t0, rows, tphi, phi, wt: &wt };
                match sparse_l {
                    None => dense::dense_tile(&ctx, &tile, &mut sc, &mut part),
                    Some(l) => sparse::sparse_tile(&ctx, &tile, l, &mut sc, &mut part),
                }
            }
            sc.phi = phi_buf;
            sc.sphi = sphi_buf;
            t0 = t1;
        }
        if let (true, BatchRows::Dense(x)) = (defer_vech, data) {
            if let crate::obs::FeatureMap::Vech { d, linear, center } = &sfeat {
                sparse::vech_bucket_summaries(x, *d, *linear, center.as_ref(), k, &mut sc, &mut part.acc);
            }
        }
        part
    };
    let leaf_n = leaf_rows(n_rows);
    let total = tree_reduce(n_rows, leaf_n, &leaf, &|p: Partial, q: Partial| p.add(q))
        .unwrap_or_else(|| Partial::zeros(k, f_dim, opts.merge_pairs.len(), &prop_lens, opts.cooccur_col.is_some(), co_bits, acc_t));
    // dense path with top_l >= K: report the dense rows in the sparse layout
    if let (Some(l), Some(iv)) = (out_l, idx_out.as_mut()) {
        if sparse_l.is_none() {
            debug_assert_eq!(l, k);
            for mut row in iv.rows_mut() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = j as u32;
                }
            }
        }
    }
    let untranspose = |a: Array2<f64>| if acc_t { a.t().as_standard_layout().into_owned() } else { a };
    let acc_total = untranspose(total.acc);
    let proposals = total
        .props
        .into_iter()
        .zip(&opts.proposals)
        .map(|(mut p, prop)| {
            // carried rows: the step's own summaries of the continued columns, plus the changes
            let mut acc = untranspose(p.acc);
            if let Some(c) = &prop.carry {
                for (j, &col) in c.cols.iter().enumerate() {
                    p.n[j] += total.n[col];
                    p.h[j] += total.h[col];
                    acc.row_mut(j).zip_mut_with(&acc_total.row(col), |a, &b| *a += b);
                }
            }
            ProposalStats { s: model.acc_finish(p.n.view(), acc), n: p.n, h: p.h }
        })
        .collect();
    let s_total = model.acc_finish(total.n.view(), acc_total);
    Ok(LocalOutput {
        n: total.n,
        s: s_total,
        h: total.h,
        h_sum: match data {
            BatchRows::Dense(x) => weighted_h_sum(model, x, opts.weights),
            BatchRows::Csr(_) => 0.0, // h(x) = 0 for the models that take sparse rows
        },
        lse_sum: total.lse,
        moves: MoveOutputs {
            pair_h: Array1::from(total.pair_h),
            proposals,
            cols: col_out,
            cooccur: total.cooccur,
            co_pairs: total.co_bits.map(|bits| pairs_of_bits(&bits, k)),
        },
        resp: resp_out,
        resp_idx: idx_out,
        resp_val: val_out,
        n_candidates: c32.map(|_| n_cand.into_inner()),
    })
}

impl Obs {
    /// Local step + summaries of one batch with the posterior of effective summaries
    /// `(n_post, s_post)` and the allocation model `alloc`, whose log weights are computed here
    /// from the same counts `n_post` (see [`local_step`]).
    ///
    /// # Errors
    /// Shape/finiteness/option errors, an invalid allocation model, or a non-positive-definite
    /// posterior.
    pub fn local_step(
        &self,
        x: ArrayView2<f64>,
        n_post: ArrayView1<f64>,
        s_post: ArrayView2<f64>,
        alloc: &Alloc,
        opts: &LocalOptions,
    ) -> Result<LocalOutput> {
        self.local_step_rows(BatchRows::Dense(x), n_post, s_post, alloc, opts)
    }

    /// [`Obs::local_step`] of CSR rows (`mult`, `bern`): `O(nnz · K)` per step.
    ///
    /// # Errors
    /// As [`Obs::local_step`]; sparse rows for a Gaussian model.
    pub fn local_step_csr(
        &self,
        x: &CsrRows,
        n_post: ArrayView1<f64>,
        s_post: ArrayView2<f64>,
        alloc: &Alloc,
        opts: &LocalOptions,
    ) -> Result<LocalOutput> {
        self.local_step_rows(BatchRows::Csr(x), n_post, s_post, alloc, opts)
    }

    /// [`Obs::local_step`] of dense or CSR rows ([`local_step_rows`]).
    ///
    /// # Errors
    /// As [`Obs::local_step`] and [`Obs::local_step_csr`].
    pub fn local_step_rows(
        &self,
        data: BatchRows,
        n_post: ArrayView1<f64>,
        s_post: ArrayView2<f64>,
        alloc: &Alloc,
        opts: &LocalOptions,
    ) -> Result<LocalOutput> {
        self.local_step_prepared(data, &self.prepare_local(n_post, s_post, alloc)?, opts)
    }

    /// What every local step with the posterior of `(n_post, s_post)` and `alloc` computes
    /// before it looks at a row: the table of `E[log F]` and the allocation's log weights. Steps
    /// that share the global parameters (a proposal refined several times on the same rows)
    /// prepare them once ([`Obs::local_step_prepared`]).
    ///
    /// # Errors
    /// As [`Obs::local_step`] for the summaries and the allocation model.
    pub fn prepare_local(&self, n_post: ArrayView1<f64>, s_post: ArrayView2<f64>, alloc: &Alloc) -> Result<Prepared> {
        Ok(Prepared { table: self.e_log_lik_table(n_post, s_post)?, weights: alloc.segment_weights(n_post)? })
    }

    /// [`Obs::local_step_rows`] with prepared global parameters: the same result, bit for bit.
    ///
    /// # Errors
    /// As [`Obs::local_step_rows`]; a table of another model.
    pub fn local_step_prepared(&self, data: BatchRows, prep: &Prepared, opts: &LocalOptions) -> Result<LocalOutput> {
        with_obs!(self, m => local_step_rows(m, data, &prep.table, &prep.weights, opts))
    }
}

/// Global parameters prepared for local steps ([`Obs::prepare_local`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    table: LogLikTable,
    weights: SegmentWeights,
}

impl Prepared {
    /// Number of clusters.
    pub fn n_clusters(&self) -> usize {
        self.table.n_clusters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_neg_is_within_one_ulp() {
        let ulp = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        let mut worst = 0;
        let mut x = 0.0;
        while x >= EXP_CUTOFF - 1.0 {
            worst = worst.max(ulp(exp_neg(x), x.exp()));
            x -= 0.000_613_7;
        }
        for x in [0.0, -0.0, -1e-300, -1e-17, -0.346_573_590_279_972_64, -0.346_573_590_279_972_7, -1.0, -650.0] {
            worst = worst.max(ulp(exp_neg(x), x.exp()));
        }
        assert!(worst <= 1, "{worst} ulp");
        assert_eq!(exp_neg(0.0), 1.0);
        // the vector path gives the bits of the scalar one
        let w: Vec<f64> = (0..37).map(|i| -(i as f64) * 17.3 + 0.25).collect();
        let mut out = vec![0.0; w.len()];
        exp_shifted(&w, 0.25, &mut out);
        for (o, &v) in out.iter().zip(&w) {
            let t = v - 0.25;
            let want = if t > EXP_CUTOFF { exp_neg(t) } else { 0.0 };
            assert_eq!(o.to_bits(), want.to_bits());
        }
    }

    #[test]
    fn softmax_row_is_a_distribution_and_returns_the_lse() {
        let w = [0.5, -1.0, 2.0];
        let mut r = [0.0; 3];
        let lse = softmax_row(&w, &mut r);
        let want = w.iter().map(|v| v.exp()).sum::<f64>().ln();
        assert!((lse - want).abs() < 1e-14);
        assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        for j in 0..3 {
            assert!((log_resp(w[j], lse, 3) - r[j].ln()).abs() < 1e-14);
        }
    }

    #[test]
    fn all_minus_infinity_rows_are_uniform() {
        let mut r = [0.0; 4];
        assert_eq!(softmax_row(&[f64::NEG_INFINITY; 4], &mut r), f64::NEG_INFINITY);
        assert_eq!(r, [0.25; 4]);
        assert_eq!(log_resp(f64::NEG_INFINITY, f64::NEG_INFINITY, 4), -(4f64).ln());
        assert_eq!(ent_term(0.0, f64::NEG_INFINITY), 0.0);
        assert!((log_add_exp(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
    }
}
