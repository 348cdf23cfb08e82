//! Per-document local step of the HDP topic model and of LDA (Hughes thesis §5.3.3–§5.3.5,
//! Alg. 5.1–5.2; L-sparse variant: thesis §7.3, Alg. 7.4; Hughes & Sudderth 2016, App. D).
//!
//! Given the topic-word expectations `C_vk = E[ln φ_kv]` and a document prior `a_k` (HDP:
//! `a_k = α E[π^G_k] = α β_k`, plus `a_rem = α β_{>K}`; LDA: `a_k = α / K`, no rem entry), each
//! document `d` with distinct word types `(v_du, c_du)` solves
//!
//! ```text
//! max_{r_d, θ_d}  Σ_u c_du Σ_k r_duk (C_{v_du k} − ln r_duk) − c_Dir(θ_d)
//!                 + Σ_k (N_dk + a_k − θ_dk) E[ln π_dk] + (a_rem − θ_d,rem) E[ln π_d,rem]
//! ```
//!
//! by block coordinate ascent: `θ_dk = N_dk + a_k`, `θ_d,rem = a_rem`, and
//! `r_duk ∝ exp(C_{v_du k} + ψ(θ_dk))` (the `−ψ(θ_d·)` term is a per-row constant). All tokens of
//! one type share one responsibility vector, so an iteration costs `O(U_d K)`.
//!
//! **Fast inner loop.** The table arrives as `E_vk = exp(C_vk)` in **V × K row-major** layout:
//! the `K` values of one word are contiguous, so a document copies the `U_d` rows of its word
//! types once into a contiguous `U_d × K` buffer and every pass streams that buffer, with the
//! loop over topics innermost (full cache lines and SIMD lanes; a K × V layout would touch `U_d`
//! scattered cache lines per topic instead). With `e_k = exp(P_k − m)`,
//! `P_k = ψ(N_dk + a_k)`, `m = max_k P_k`, one iteration is
//!
//! ```text
//! s_u = Σ_k E_{v_u k} e_k                    (a dot product per type)
//! N'_k = e_k Σ_u (c_u / s_u) E_{v_u k}        (an axpy per type)
//! ```
//!
//! i.e. two multiply-adds per token-topic pair and `K` digammas + `K` exps per iteration and
//! document (never per token). Responsibilities are never materialised during the iterations.
//! A row whose sum underflows (`s_u` below [`S_MIN`], possible only when some `a_k` are tiny or
//! the table has zero entries) is recomputed in the log domain, `r_uk = exp(ln E_uk + P_k −
//! lse_u)`; the result is the same softmax, without underflow.
//!
//! **Cold start.** The first pass uses `P_k = ln a_k` (`W = C + ln β` for the HDP, `W = C` for
//! LDA, thesis §7.3.1), then iterations `P_k = ψ(N_k + a_k)` run until `max_k |ΔN_dk| < tol` or
//! `max_iter` iterations (`tol = 0` runs exactly `max_iter`).
//!
//! **Restart proposals** (thesis §5.3.4, Alg. 5.2): for the smallest used topics `j`
//! (`N_dj > 0.1`, ascending, at most `restart_max_trials`, never the last used one), set
//! `N_dj = 0`, run `restart_iters` forward iterations and keep the proposal iff it strictly
//! increases the document objective, evaluated at a consistent state by
//!
//! ```text
//! L_d = Σ_k ln Γ(θ_dk) + ln Γ(a_rem) − ln Γ(θ_d·) + Σ_u c_u ln s_u − Σ_k N_dk P_k
//! ```
//!
//! (constant terms dropped; `s_u = Σ_k exp(C_uk + P_k)` are the row sums of the last pass).
//!
//! **L-sparse variant** (`top_l = Some(L)`, `L < K`; thesis Alg. 7.4): each word type keeps
//! the `L` largest weights among the document's active topics `A_d = {k : N_dk > ε}`
//! (selected in linear time, [`super::top_l::select_top_among`]); full reselection on
//! iterations 1–5 and every 10th, otherwise the current `L` entries are reweighted; topics
//! leave `A_d` once `N_dk ≤ ε` and never return. Restart proposals are restricted to `A_d`; in
//! their first forward pass only the rows whose support contains the removed topic are
//! reselected (the others are reweighted on their support), later passes reweight — so a
//! proposal costs `O(U_d L)` per pass instead of `O(U_d |A_d|)`. Selection for `L ≤ 32`: any
//! `L` distinct active topics bound the `L`-th largest weight from below by their smallest weight
//! (seeds: the row's previous support reweighted, completed by the active topics of largest
//! `exp(P_k)`; without a support, maxima of blocks of the row); one branch-free loop over the
//! active topics (compress-stores with AVX-512) keeps the entries at or above the bound — often
//! exactly `L`, the selection; with near-duplicate topics, as early in a fit, about twice as
//! many — and only those are ranked (by counting up to 16 entries, else by selecting the `L`-th
//! largest). The selection is the one a full sort would make.
//! The reweight passes and the reselections' seeds read the support's table entries from a
//! per-row copy. The first pass weighs every topic by `E_vk a_k` whatever the document, so a
//! word's first support, values and sum are selected once per distinct word of the batch and
//! copied into every document using it (the most expensive pass otherwise: each row a selection
//! among all `K` topics). `L ≥ K` runs the dense kernel.
//!
//! **Summaries** (thesis eq. 5.47–5.48, with the log-Gamma signs of eq. 5.27): per batch
//! `D`, `N_k = Σ_d N_dk`, `S_kv`, `H_k = −Σ c r ln r`, `P_k = Σ_d E[ln π_dk]`,
//! `P_rem = Σ_d E[ln π_d,rem]`, `Q0 = −Σ_d ln Γ(θ_d·)`,
//! `Q_k = Σ_d [ln Γ(θ_dk) + (N_dk − θ_dk) E[ln π_dk]]`,
//! `Q_rem = Σ_d [ln Γ(θ_d,rem) − θ_d,rem E[ln π_d,rem]]`, the document-usage counts
//! `#{d : N_dk > 0.01}`, and for requested merge pairs `(a, b)` the merged entropy, `P` and `Q`
//! of thesis §5.5.1 (`r̃ = r_a + r_b`, `θ̃ = θ_a + θ_b`). Everything is additive over documents.
//! The dense step sums `H_k` without a logarithm per token and topic: on an ordinary row
//! `ln r = ln E + (p − m) − ln s`, so `H_k` is `S` times the table's logarithms (once per
//! distinct word of the batch) plus per-document terms (`run_leaf`).
//!
//! **Parallelism.** Documents are split into fixed leaves ([`leaf_docs`], a function of `D`
//! only) reduced by the fixed binary tree of [`crate::parallel`], so results are bit-identical
//! for any thread count. A dense leaf keeps `S` as dense rows over its own sorted vocabulary
//! (buffers reused through a pool kept between calls, so leaves and merges do not fault pages
//! in and unmap them again); an L-sparse leaf keeps `(word, topic)`-sorted entries, summed per key in
//! document order, and merges add equal keys — the same additions, in the same order, as dense
//! rows. No leaf allocates `K × V`.

use std::cmp::Ordering;
use std::sync::Mutex;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use rayon::prelude::*;

use super::top_l::select_top_among;
use crate::error::{Error, Result};
use crate::parallel::tree_reduce;
use crate::special::{digamma, gammaln, trigamma};

/// Row sums below this value are recomputed in the log domain.
pub const S_MIN: f64 = 1e-280;

/// Whether a row sum can normalise its row (`> S_MIN` and finite; otherwise the row is
/// recomputed in the log domain).
#[inline(always)]
fn usable(s: f64) -> bool {
    s > S_MIN && s.is_finite()
}

/// Topic weights `e_k = exp(P_k − max P)` below `exp(E_CUTOFF)` (≈ 1e-261) are set to 0: they
/// cannot change any summary beyond round-off, and keeping them lets subnormal numbers into the
/// inner loop, where each one costs a slow microcode assist on x86.
const E_CUTOFF: f64 = -600.0;

#[inline]
fn scaled_exp(t: f64) -> f64 {
    if t > E_CUTOFF {
        t.exp()
    } else {
        0.0
    }
}

/// Integer types accepted for CSR `indptr` / `indices` (scipy uses `int32` or `int64`).
pub trait CsrIndex: Copy + Send + Sync {
    /// The value as an index, `None` if negative or too large.
    fn checked(self) -> Option<usize>;
    /// The value as an index without checks (only after validation).
    fn fast(self) -> usize;
}

macro_rules! csr_index {
    ($($t:ty),*) => {$(
        impl CsrIndex for $t {
            #[inline]
            fn checked(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            #[inline]
            fn fast(self) -> usize {
                self as usize
            }
        }
    )*};
}
csr_index!(i32, i64, u32, usize);

/// Options of the document local step.
#[derive(Debug, Clone)]
pub struct DocTopicOptions {
    /// Maximum number of coordinate-ascent iterations per document (after the cold start).
    pub max_iter: usize,
    /// Stop when `max_k |N_dk − N_dk^prev| < tol` (0 = always run `max_iter`).
    pub tol: f64,
    /// Try restart proposals after convergence.
    pub restarts: bool,
    /// With `restarts`, per document of the batch whether its restart proposals are tried
    /// (`None`: every document's). A move's candidate that starts each document from the
    /// lap's solution can skip them where the lap already tried them at nearly the same
    /// globals.
    pub restart_mask: Option<Vec<bool>>,
    /// With a warm start, per document of the batch whether it starts cold all the same (from
    /// the prior, as without `init`; `None`: none does). A move's candidate can restart from
    /// the prior the documents that lost most of their counts to it and keep the others warm.
    pub cold_mask: Option<Vec<bool>>,
    /// At most this many restart proposals per document (thesis: 25).
    pub restart_max_trials: usize,
    /// Forward iterations of each restart proposal (≥ 1; thesis ch. 7: 2).
    pub restart_iters: usize,
    /// Topics with `N_dk > restart_min_mass` are restart candidates (thesis Alg. 5.2: 0.1).
    pub restart_min_mass: f64,
    /// `Some(L)` with `L < K`: L-sparse responsibilities.
    pub top_l: Option<usize>,
    /// Active-set threshold ε of the L-sparse step.
    pub sparse_eps: f64,
    /// Candidate merge pairs `(a, b)`, `a ≠ b`, whose merged `H`, `P`, `Q` are returned.
    pub merge_pairs: Vec<(usize, usize)>,
    /// A document uses topic `k` if `N_dk > usage_threshold` (doc-usage counts).
    pub usage_threshold: f64,
    /// Return the `D × K` document-topic counts `N_dk`.
    pub return_doc_topic: bool,
}

impl Default for DocTopicOptions {
    fn default() -> Self {
        DocTopicOptions {
            max_iter: 100,
            tol: 0.05,
            restarts: true,
            restart_mask: None,
            cold_mask: None,
            restart_max_trials: 25,
            restart_iters: 2,
            restart_min_mass: 0.1,
            top_l: None,
            sparse_eps: 1e-3,
            merge_pairs: Vec::new(),
            usage_threshold: 0.01,
            return_doc_topic: false,
        }
    }
}

/// Batch summaries of the document local step (all additive over documents).
#[derive(Debug, Clone)]
pub struct DocTopicOutput {
    /// Number of documents `D_b`.
    pub n_docs: usize,
    /// `N_k` (K).
    pub n: Array1<f64>,
    /// `S_kv` (K × V).
    pub s: Array2<f64>,
    /// Entropies `H_k` (K).
    pub h: Array1<f64>,
    /// `P_k = Σ_d E[ln π_dk]` (K).
    pub p: Array1<f64>,
    /// `P_rem = Σ_d E[ln π_d,rem]` (0 without a rem entry).
    pub p_rem: f64,
    /// `Q0 = −Σ_d ln Γ(θ_d·)`.
    pub q0: f64,
    /// `Q_k` (K).
    pub q: Array1<f64>,
    /// `Q_rem` (0 without a rem entry).
    pub q_rem: f64,
    /// Document-usage counts `#{d : N_dk > usage_threshold}` (K).
    pub doc_usage: Array1<f64>,
    /// Merged entropies of the requested pairs (M).
    pub merge_h: Array1<f64>,
    /// Merged `P` of the requested pairs (M).
    pub merge_p: Array1<f64>,
    /// Merged `Q` of the requested pairs (M).
    pub merge_q: Array1<f64>,
    /// `N_dk` (D × K) if requested.
    pub doc_topic: Option<Array2<f64>>,
    /// Coordinate-ascent iterations summed over documents (cold start and restarts excluded).
    pub n_iter: u64,
    /// Word-type passes `Σ_d U_d × (passes of d)`, cold start and restarts included; times `K`
    /// this is the number of (dense-equivalent) token-topic updates.
    pub n_type_passes: u64,
    /// Restart proposals tried.
    pub restarts_tried: u64,
    /// Restart proposals accepted.
    pub restarts_accepted: u64,
}

/// Documents per leaf of the reduction tree for a batch of `d` documents: about 32 leaves,
/// between 16 and 256 documents. Depends on `d` only.
pub fn leaf_docs(d: usize) -> usize {
    d.div_ceil(32).clamp(16, 256)
}

/// `exp(E[ln φ_kv])` in the V × K layout of [`doc_topic_step`] from the Dirichlet parameters
/// `λ̂` (K × V): `exp(ψ(λ̂_kv) − ψ(Σ_v λ̂_kv))`.
///
/// With the prior pseudo-counts `λ̄` (V) given (`λ̂ = λ̄ + S`), the digamma of an entry within
/// [`NEAR_PRIOR_TABLE`] of its prior (most entries of a topic model: a topic's mass on the
/// words it does not use) is `ψ(λ̄_v) + ψ'(λ̄_v)(λ̂_kv − λ̄_v)`, whose remainder
/// `|ψ''| δ²/2 ≤ (1/λ̄³ + 1/(2λ̄²)) δ²` with `δ ≤ 10⁻⁹ λ̄` is below the digamma's own rounding:
/// one multiply-add per such entry instead of a digamma's recurrence.
///
/// # Errors
/// `lam` has a non-positive or non-finite entry; `prior` has the wrong length or a
/// non-positive or non-finite entry.
pub fn topic_word_table(lam: ArrayView2<f64>, prior: Option<ArrayView1<f64>>) -> Result<Array2<f64>> {
    let (k, v) = lam.dim();
    if lam.iter().any(|&x| !(x > 0.0) || !x.is_finite()) {
        return Err(Error::data("lam", "every Dirichlet parameter must be finite and > 0"));
    }
    let near: Option<Vec<(f64, f64, f64, f64)>> = match prior {
        None => None,
        Some(p) => {
            if p.len() != v {
                return Err(Error::shape("prior", format!("({v},)"), format!("({},)", p.len())));
            }
            if p.iter().any(|&x| !(x > 0.0) || !x.is_finite()) {
                return Err(Error::data("prior", "every prior pseudo-count must be finite and > 0"));
            }
            // the expansion's bound, or −1 (never) where ψ'(x) overflows (x below ~7.5e-155)
            Some(
                p.iter()
                    .map(|&x| (x, digamma(x), trigamma(x)))
                    .map(|(x, d0, d1)| (x, d0, d1, if d1.is_finite() { NEAR_PRIOR_TABLE * x } else { -1.0 }))
                    .collect(),
            )
        }
    };
    let tot: Vec<f64> = lam.rows().into_iter().map(|r| digamma(r.sum())).collect();
    let mut out = Array2::<f64>::zeros((v, k));
    out.axis_iter_mut(ndarray::Axis(0)).into_par_iter().enumerate().for_each(|(w, mut row)| {
        for j in 0..k {
            let l = lam[[j, w]];
            let psi = match &near {
                Some(nr) => {
                    let (p, d0, d1, bound) = nr[w];
                    let delta = l - p;
                    if delta.abs() <= bound {
                        d0 + d1 * delta
                    } else {
                        digamma(l)
                    }
                }
                None => digamma(l),
            };
            row[j] = (psi - tot[j]).exp();
        }
    });
    Ok(out)
}

/// Distinct words per parallel chunk of the dense entropy's table term (fixed: the result does
/// not depend on the threads).
const ENTROPY_CHUNK: usize = 512;

/// Entries of the topic-word table within this fraction of their prior pseudo-count take the
/// first-order expansion of the digamma ([`topic_word_table`]).
pub const NEAR_PRIOR_TABLE: f64 = 1e-9;

/// Validated, contiguous inputs of one batch.
struct Batch<'a, I> {
    indptr: Vec<usize>,
    indices: &'a [I],
    data: &'a [f64],
    tab: &'a [f64],
    a: &'a [f64],
    /// the prior's per-topic constants ([`PriorK`])
    pk: Vec<PriorK>,
    a_rem: Option<f64>,
    k: usize,
    v: usize,
    /// warm start: per document (row-major D × K) the counts `N_dk` the first pass starts from
    init: Option<&'a [f64]>,
}

fn slice<'a, T>(x: &'a ArrayView1<'a, T>, name: &str) -> Result<&'a [T]> {
    x.as_slice().ok_or_else(|| Error::param(name, "must be a contiguous 1-D array"))
}

fn validate<'a, I: CsrIndex>(
    indptr: &'a ArrayView1<'a, I>,
    indices: &'a ArrayView1<'a, I>,
    data: &'a ArrayView1<'a, f64>,
    table: &'a ArrayView2<'a, f64>,
    a: &'a ArrayView1<'a, f64>,
    a_rem: Option<f64>,
    opts: &DocTopicOptions,
) -> Result<Batch<'a, I>> {
    let (v, k) = table.dim();
    if k == 0 {
        return Err(Error::shape("exp_elog_phi", "(n_vocab, n_components) with n_components >= 1", format!("({v}, 0)")));
    }
    let tab = table.as_slice().ok_or_else(|| Error::param("exp_elog_phi", "must be a C-contiguous float64 array"))?;
    if tab.iter().any(|&x| !(x >= 0.0) || !x.is_finite()) {
        return Err(Error::data("exp_elog_phi", "entries exp(E[ln phi]) must be finite and >= 0"));
    }
    let a_s = slice(a, "alpha_beta")?;
    if a_s.len() != k {
        return Err(Error::shape("alpha_beta", format!("({k},)"), format!("({},)", a_s.len())));
    }
    if a_s.iter().any(|&x| !(x > 0.0) || !x.is_finite()) {
        return Err(Error::param("alpha_beta", "document prior pseudocounts must be finite and > 0"));
    }
    if let Some(r) = a_rem {
        if !(r > 0.0) || !r.is_finite() {
            return Err(Error::param("alpha_beta_rem", format!("must be finite and > 0 (clamp beta_rem >= 1e-300), got {r}")));
        }
    }
    let ip = slice(indptr, "indptr")?;
    let ind = slice(indices, "indices")?;
    let dat = slice(data, "data")?;
    if ip.is_empty() {
        return Err(Error::shape("indptr", "(n_docs + 1,)", "(0,)"));
    }
    let offs = super::csr::offsets(ip)?;
    let nnz = offs[offs.len() - 1];
    if ind.len() != nnz || dat.len() != nnz {
        return Err(Error::shape("indices/data", format!("length indptr[-1] = {nnz}"), format!("{} / {}", ind.len(), dat.len())));
    }
    if let Some(bad) = ind.iter().find(|&&w| w.checked().is_none_or(|w| w >= v)) {
        let shown = bad.checked().map_or_else(|| "a negative id".to_string(), |w| w.to_string());
        return Err(Error::data("indices", format!("word ids must be in [0, n_vocab = {v}), got {shown}")));
    }
    if dat.iter().any(|&c| !(c >= 0.0) || !c.is_finite()) {
        return Err(Error::data("data", "word counts must be finite and >= 0"));
    }
    if !(opts.tol >= 0.0) || !opts.tol.is_finite() {
        return Err(Error::param("tol", format!("must be finite and >= 0, got {}", opts.tol)));
    }
    if opts.top_l == Some(0) {
        return Err(Error::param("top_l", "must be >= 1 or None"));
    }
    if !(opts.sparse_eps >= 0.0) || !opts.sparse_eps.is_finite() {
        return Err(Error::param("sparse_eps", "must be finite and >= 0"));
    }
    if opts.restarts && opts.restart_iters == 0 {
        return Err(Error::param("restart_iters", "must be >= 1"));
    }
    for (name, mask) in [("restart_mask", &opts.restart_mask), ("cold_mask", &opts.cold_mask)] {
        if let Some(m) = mask {
            if m.len() != offs.len() - 1 {
                return Err(Error::shape(name, format!("({},)", offs.len() - 1), format!("({},)", m.len())));
            }
        }
    }
    if !opts.restart_min_mass.is_finite() || !opts.usage_threshold.is_finite() {
        return Err(Error::param("restart_min_mass", "thresholds must be finite"));
    }
    for &(p, q) in &opts.merge_pairs {
        if p >= k || q >= k || p == q {
            return Err(Error::param("merge_pairs", format!("pair ({p}, {q}) needs two distinct topics < {k}")));
        }
    }
    Ok(Batch { indptr: offs, indices: ind, data: dat, tab, a: a_s, pk: prior_terms(a_s), a_rem, k, v, init: None })
}

/// Check a warm start `init` (D × K counts, finite and ≥ 0) against the batch.
fn validate_init<'a>(init: &'a ArrayView2<'a, f64>, n_docs: usize, k: usize) -> Result<&'a [f64]> {
    if init.dim() != (n_docs, k) {
        return Err(Error::shape("init_doc_topic", format!("({n_docs}, {k})"), format!("{:?}", init.dim())));
    }
    let x = init.as_slice().ok_or_else(|| Error::param("init_doc_topic", "must be a C-contiguous float64 array"))?;
    if x.iter().any(|&n| !(n >= 0.0) || !n.is_finite()) {
        return Err(Error::data("init_doc_topic", "document-topic counts must be finite and >= 0"));
    }
    Ok(x)
}

/// The sum of [`dot`]'s eight lane accumulators, in its fixed order.
#[inline(always)]
fn fold_lanes(x: &[f64; 8]) -> f64 {
    ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]))
}

#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = fold_lanes(&acc);
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

#[inline(always)]
fn axpy(acc: &mut [f64], w: f64, x: &[f64]) {
    for (a, &b) in acc.iter_mut().zip(x) {
        *a += w * b;
    }
}

/// [`dot`] of two rows with the same vector: each sum with the same operations in the same
/// order as `dot(a, e)` and `dot(b, e)`, `e` read once for both.
#[inline(always)]
fn dot2(a: &[f64], b: &[f64], e: &[f64]) -> (f64, f64) {
    let n = a.len().min(b.len()).min(e.len());
    let (a, b, e) = (&a[..n], &b[..n], &e[..n]);
    let (mut xa, mut xb) = ([0.0f64; 8], [0.0f64; 8]);
    let (ca, cb, ce) = (a.chunks_exact(8), b.chunks_exact(8), e.chunks_exact(8));
    let (ra, rb, re) = (ca.remainder(), cb.remainder(), ce.remainder());
    for ((x, y), z) in ca.zip(cb).zip(ce) {
        for i in 0..8 {
            xa[i] += x[i] * z[i];
            xb[i] += y[i] * z[i];
        }
    }
    let (mut sa, mut sb) = (fold_lanes(&xa), fold_lanes(&xb));
    for ((x, y), z) in ra.iter().zip(rb).zip(re) {
        sa += x * z;
        sb += y * z;
    }
    (sa, sb)
}

/// `acc += wa a`, then `acc += wb b`, in one sweep (each entry rounded after each addition, as
/// two [`axpy`] calls would).
#[inline(always)]
fn axpy2(acc: &mut [f64], wa: f64, a: &[f64], wb: f64, b: &[f64]) {
    for ((z, &x), &y) in acc.iter_mut().zip(a).zip(b) {
        *z = (*z + wa * x) + wb * y;
    }
}

/// The dense inner loop: `s_u = Σ_k E_{v_u k} e_k` and `acc += (c_u / s_u) E_{v_u ·}` for every
/// row whose sum is usable (`s_u > S_MIN`); returns whether some row was not. Rows go in pairs
/// (one read of `e` for both sums, one read and write of `acc` for both updates) with the
/// arithmetic of one row at a time, so every bit is that of the row-by-row loop.
#[inline(always)]
fn dense_sweep_impl(tab: &[f64], k: usize, words: &[usize], counts: &[f64], e: &[f64], s: &mut [f64], acc: &mut [f64]) -> bool {
    let mut any_fb = false;
    let mut u = 0;
    while u + 1 < words.len() {
        let (va, vb) = (words[u], words[u + 1]);
        let (ra, rb) = (&tab[va * k..(va + 1) * k], &tab[vb * k..(vb + 1) * k]);
        let (sa, sb) = dot2(ra, rb, e);
        s[u] = sa;
        s[u + 1] = sb;
        let (ua, ub) = (usable(sa), usable(sb));
        match (ua, ub) {
            (true, true) => axpy2(acc, counts[u] / sa, ra, counts[u + 1] / sb, rb),
            (true, false) => axpy(acc, counts[u] / sa, ra),
            (false, true) => axpy(acc, counts[u + 1] / sb, rb),
            (false, false) => {}
        }
        any_fb |= !(ua && ub);
        u += 2;
    }
    if let Some(&v) = words.get(u) {
        let row = &tab[v * k..(v + 1) * k];
        let su = dot(row, e);
        s[u] = su;
        if usable(su) {
            axpy(acc, counts[u] / su, row);
        } else {
            any_fb = true;
        }
    }
    any_fb
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn dense_sweep_avx(tab: &[f64], k: usize, words: &[usize], counts: &[f64], e: &[f64], s: &mut [f64], acc: &mut [f64]) -> bool {
    dense_sweep_impl(tab, k, words, counts, e, s, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dense_sweep_avx512(tab: &[f64], k: usize, words: &[usize], counts: &[f64], e: &[f64], s: &mut [f64], acc: &mut [f64]) -> bool {
    dense_sweep_impl(tab, k, words, counts, e, s, acc)
}

/// [`dense_sweep_impl`] with the widest vectors available, 512-bit (AVX-512F) or 256-bit (AVX)
/// (no FMA, and the same eight lanes per sum, so the rounding — and every result bit — is the
/// same as without them). AVX-512 made the dense step at K = 400 5 % faster than AVX alone.
fn dense_sweep(tab: &[f64], k: usize, words: &[usize], counts: &[f64], e: &[f64], s: &mut [f64], acc: &mut [f64]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { dense_sweep_avx512(tab, k, words, counts, e, s, acc) };
        }
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above).
            return unsafe { dense_sweep_avx(tab, k, words, counts, e, s, acc) };
        }
    }
    dense_sweep_impl(tab, k, words, counts, e, s, acc)
}

/// An ordinary dense row's responsibilities `r_j = E_j e_j inv` (`inv = 1 / s_u`) into `out`
/// and its contributions `S_row += c r`, `nn += c r`, `lw += cl r` (the entropy's per-document
/// sums, `run_leaf`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dense_row_sums_impl(
    row: &[f64],
    e: &[f64],
    inv: f64,
    c: f64,
    cl: f64,
    out: &mut [f64],
    srow: &mut [f64],
    nn: &mut [f64],
    lw: &mut [f64],
) {
    let k = row.len();
    let (e, out, srow, nn, lw) = (&e[..k], &mut out[..k], &mut srow[..k], &mut nn[..k], &mut lw[..k]);
    for j in 0..k {
        let r = row[j] * e[j] * inv;
        out[j] = r;
        srow[j] += c * r;
        nn[j] += c * r;
        lw[j] += cl * r;
    }
}

/// [`dense_row_sums_impl`] compiled with the given target features (`unsafe`: the CPU must have
/// them).
macro_rules! dense_row_sums_with {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            row: &[f64],
            e: &[f64],
            inv: f64,
            c: f64,
            cl: f64,
            out: &mut [f64],
            srow: &mut [f64],
            nn: &mut [f64],
            lw: &mut [f64],
        ) {
            dense_row_sums_impl(row, e, inv, c, cl, out, srow, nn, lw)
        }
    };
}
dense_row_sums_with!(dense_row_sums_avx512, "avx512f");
dense_row_sums_with!(dense_row_sums_avx, "avx");

/// [`dense_row_sums_impl`] with the widest vectors available (element by element, no FMA: the
/// same bits everywhere).
#[allow(clippy::too_many_arguments)]
fn dense_row_sums(row: &[f64], e: &[f64], inv: f64, c: f64, cl: f64, out: &mut [f64], srow: &mut [f64], nn: &mut [f64], lw: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { dense_row_sums_avx512(row, e, inv, c, cl, out, srow, nn, lw) };
        }
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above).
            return unsafe { dense_row_sums_avx(row, e, inv, c, cl, out, srow, nn, lw) };
        }
    }
    dense_row_sums_impl(row, e, inv, c, cl, out, srow, nn, lw)
}

/// Collect, in index order, every `(k, row_k e_k)` whose weight is at least `floor` (> 0) into
/// `col` (cleared first), eight entries at a time: multiply, compare, and append only where some
/// weight passes (usually about `L` of the `K`). False if `col` overflows.
fn collect_at_floor(row: &[f64], e: &[f64], floor: f64, col: &mut Collected) -> bool {
    col.clear();
    let n = row.len().min(e.len());
    let (row, e) = (&row[..n], &e[..n]);
    let whole = n - n % 8;
    #[cfg(target_arch = "x86_64")]
    let start = if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
        // SAFETY: the CPU supports AVX-512F and VL (checked just above); `whole ≤ n`.
        match unsafe { collect_at_floor_avx512(&row[..whole], &e[..whole], floor, col) } {
            true => whole,
            false => return false,
        }
    } else if std::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU supports AVX (checked just above); `whole ≤ n`.
        match unsafe { collect_at_floor_avx(&row[..whole], &e[..whole], floor, col) } {
            true => whole,
            false => return false,
        }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let start = 0;
    let mut base = start;
    for (r8, e8) in row[start..].chunks(8).zip(e[start..].chunks(8)) {
        let mut w = [0.0; 8];
        let mut mask = 0u32;
        for (i, (&r, &x)) in r8.iter().zip(e8).enumerate() {
            w[i] = r * x;
            mask |= u32::from(w[i] >= floor) << i;
        }
        if mask != 0 && !col.extend_masked(base, &w, mask) {
            return false;
        }
        base += 8;
    }
    true
}

/// [`collect_at_floor`] on AVX-512 over the whole octets of `row` and `e`: the same products and
/// comparisons, the kept entries of each octet packed to the front of a register (compress) and
/// stored whole at the end of `col`, which advances by their number (no loop over the mask's
/// bits, whose variable trip count mispredicted where many weights pass the floor; and no
/// compress straight to memory: with it the `top_l=8` step at K = 400 was 3 % slower on the
/// AMD Zen 5 machine it was measured on).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
unsafe fn collect_at_floor_avx512(row: &[f64], e: &[f64], floor: f64, col: &mut Collected) -> bool {
    use std::arch::x86_64::*;
    let n = row.len().min(e.len());
    let f = _mm512_set1_pd(floor);
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mut base = 0;
    while base + 8 <= n {
        // SAFETY: AVX-512F/VL are enabled (the caller checked); the loads read `base..base + 8
        // ≤ n` of both slices; the stores write 8 entries from `col.c ≤ CAP` into buffers of
        // `CAP + 8` ([`Collected`]'s slack), and `col.room() ≥ 8` whenever the mask is not empty
        // (checked first), so the kept entries are within `CAP`.
        unsafe {
            let w = _mm512_mul_pd(_mm512_loadu_pd(row.as_ptr().add(base)), _mm512_loadu_pd(e.as_ptr().add(base)));
            let mask = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(w, f);
            if (mask != 0) & (col.room() < 8) {
                return false;
            }
            let ids = _mm256_add_epi32(_mm256_set1_epi32(base as i32), lanes);
            _mm512_storeu_pd(col.w.as_mut_ptr().add(col.c), _mm512_maskz_compress_pd(mask, w));
            _mm256_storeu_si256(col.ids.as_mut_ptr().add(col.c) as *mut __m256i, _mm256_maskz_compress_epi32(mask, ids));
            col.c += mask.count_ones() as usize;
        }
        base += 8;
    }
    true
}

/// Append `(act[t], row[act[t]] ea[t])` for every `t` at `ids`/`ws[c..]`, branch-free (an
/// entry is kept, and `c` advanced past it, iff its weight is at least `floor`); returns the
/// new `c`. The buffers need `act.len()` slots from `c`.
#[inline(always)]
fn append_at_floor(row: &[f64], act: &[u32], ea: &[f64], floor: f64, ids: &mut [u32], ws: &mut [f64], mut c: usize) -> usize {
    for (&j, &e) in act.iter().zip(ea) {
        let x = row[j as usize] * e;
        ids[c] = j;
        ws[c] = x;
        c += usize::from(x >= floor);
    }
    c
}

/// Collect, in the order of `act`, every `(j, row_j ea_t)` (`j = act[t]`) whose weight is at
/// least `floor` into `col` (cleared first), eight topics at a time without checking the room
/// inside an octet (the buffers have eight slots of slack). False, with `col` not to be used,
/// when more than `CAP - 8` entries are kept before some octet (the caller then ranks every
/// active topic instead).
fn collect_active(row: &[f64], act: &[u32], ea: &[f64], floor: f64, col: &mut Collected) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") {
        // SAFETY: the CPU supports AVX-512F and VL (checked just above).
        return unsafe { collect_active_avx512(row, act, ea, floor, col) };
    }
    collect_active_scalar(row, act, ea, floor, col)
}

/// [`collect_active`] without vectors.
fn collect_active_scalar(row: &[f64], act: &[u32], ea: &[f64], floor: f64, col: &mut Collected) -> bool {
    let n = act.len().min(ea.len());
    col.c = 0;
    let mut t = 0;
    while t < n {
        if col.c > Collected::CAP - 8 {
            return false;
        }
        let end = (t + 8).min(n);
        col.c = append_at_floor(row, &act[t..end], &ea[t..end], floor, &mut col.ids, &mut col.w, col.c);
        t = end;
    }
    true
}

/// [`collect_active`] on AVX-512: a whole octet's table entries read one by one into an array
/// (the hardware gather was slower), then weighed, compared, packed to the front of a register
/// and stored whole, as in [`collect_at_floor_avx512`]; the same entries in the same order.
/// (The branch-free scalar append of [`append_at_floor`] for the last, partial octet.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
unsafe fn collect_active_avx512(row: &[f64], act: &[u32], ea: &[f64], floor: f64, col: &mut Collected) -> bool {
    use std::arch::x86_64::*;
    let n = act.len().min(ea.len());
    let f = _mm512_set1_pd(floor);
    let mut c = 0;
    let mut t = 0;
    while t < n {
        if c > Collected::CAP - 8 {
            col.c = c;
            return false;
        }
        if n - t < 8 {
            c = append_at_floor(row, &act[t..n], &ea[t..n], floor, &mut col.ids, &mut col.w, c);
            break;
        }
        let mut g = [0.0f64; 8];
        for (gi, &j) in g.iter_mut().zip(&act[t..t + 8]) {
            *gi = row[j as usize];
        }
        // SAFETY: AVX-512F/VL are enabled (the caller checked); the loads read `t..t + 8 ≤ n`
        // of `act` and `ea` and the array `g`; the stores write 8 entries from `c ≤ CAP - 8`
        // (checked above) into buffers of `CAP + 8`.
        unsafe {
            let w = _mm512_mul_pd(_mm512_loadu_pd(g.as_ptr()), _mm512_loadu_pd(ea.as_ptr().add(t)));
            let mask = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(w, f);
            let ids = _mm256_loadu_si256(act.as_ptr().add(t) as *const __m256i);
            _mm512_storeu_pd(col.w.as_mut_ptr().add(c), _mm512_maskz_compress_pd(mask, w));
            _mm256_storeu_si256(col.ids.as_mut_ptr().add(c) as *mut __m256i, _mm256_maskz_compress_epi32(mask, ids));
            c += mask.count_ones() as usize;
        }
        t += 8;
    }
    col.c = c;
    true
}

/// [`collect_at_floor`] on AVX, over the whole octets of `row` and `e` (the caller passes them).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn collect_at_floor_avx(row: &[f64], e: &[f64], floor: f64, col: &mut Collected) -> bool {
    use std::arch::x86_64::*;
    let n = row.len().min(e.len());
    // SAFETY (whole body): AVX is enabled (the caller checked); every load reads
    // `base..base + 8 ≤ n`, within both slices.
    unsafe {
        let f = _mm256_set1_pd(floor);
        let mut base = 0;
        while base + 8 <= n {
            let w0 = _mm256_mul_pd(_mm256_loadu_pd(row.as_ptr().add(base)), _mm256_loadu_pd(e.as_ptr().add(base)));
            let w1 = _mm256_mul_pd(_mm256_loadu_pd(row.as_ptr().add(base + 4)), _mm256_loadu_pd(e.as_ptr().add(base + 4)));
            let mask = (_mm256_movemask_pd(_mm256_cmp_pd::<_CMP_GE_OQ>(w0, f))
                | (_mm256_movemask_pd(_mm256_cmp_pd::<_CMP_GE_OQ>(w1, f)) << 4)) as u32;
            if mask != 0 {
                let mut w = [0.0; 8];
                _mm256_storeu_pd(w.as_mut_ptr(), w0);
                _mm256_storeu_pd(w.as_mut_ptr().add(4), w1);
                if !col.extend_masked(base, &w, mask) {
                    return false;
                }
            }
            base += 8;
        }
        true
    }
}

/// Softmax of log weights in place; returns the log-sum-exp (`−∞` rows become uniform).
fn softmax_log(w: &mut [f64]) -> f64 {
    let m = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        let u = 1.0 / w.len().max(1) as f64;
        w.iter_mut().for_each(|x| *x = u);
        return f64::NEG_INFINITY;
    }
    let mut tot = 0.0;
    for x in w.iter_mut() {
        *x = (*x - m).exp();
        tot += *x;
    }
    let inv = 1.0 / tot;
    w.iter_mut().for_each(|x| *x *= inv);
    m + tot.ln()
}

#[inline]
fn ln_or_neg_inf(x: f64) -> f64 {
    if x > 0.0 {
        x.ln()
    } else {
        f64::NEG_INFINITY
    }
}

/// One document: word rows, counts and the shared model inputs.
struct DocCtx<'a> {
    tab: &'a [f64],
    k: usize,
    words: &'a [usize],
    counts: &'a [f64],
    a: &'a [f64],
    /// the prior's per-topic constants ([`PriorK`]; [`DocCtx::psi`], [`DocCtx::lgamma`])
    pk: &'a [PriorK],
    a_rem: Option<f64>,
}

/// Per topic, the document prior's `ln a_k` (a cold first pass's log weight), `ln Γ(a_k)`,
/// `ψ(a_k)`, `ψ'(a_k)` and the largest count `N_dk` whose `ψ(N_dk + a_k)` and
/// `ln Γ(N_dk + a_k)` are taken from them by expansion ([`DocCtx::psi`]).
#[derive(Clone, Copy, Debug)]
struct PriorK {
    lna: f64,
    lga: f64,
    psa: f64,
    tga: f64,
    near: f64,
}

/// [`PriorK`] of every topic: the expansion is used for `N_dk ≤ 10⁻⁹ a_k` (the bound of
/// [`NEAR_PRIOR_TABLE`]), never when `ψ'(a_k)` overflows (`a_k` below ~1e-154).
fn prior_terms(a: &[f64]) -> Vec<PriorK> {
    a.iter()
        .map(|&x| {
            let tga = trigamma(x);
            PriorK { lna: x.ln(), lga: gammaln(x), psa: digamma(x), tga, near: if tga.is_finite() { NEAR_PRIOR_TABLE * x } else { -1.0 } }
        })
        .collect()
}

impl DocCtx<'_> {
    /// `ψ(n + a_j)`. A topic a document does not use has `N_dk` near 0 (often 1e-50): for
    /// `n ≤ 10⁻⁹ a_j` it is `ψ(a_j) + ψ'(a_j) n`, whose remainder `|ψ''| n²/2 ≤ (1/a³ +
    /// 1/(2a²)) n²` is below the digamma's own rounding (as in [`topic_word_table`]): one
    /// multiply-add instead of a digamma's recurrence, for most of the `K` topics of a pass.
    #[inline]
    fn psi(&self, j: usize, n: f64) -> f64 {
        let pk = &self.pk[j];
        if n <= pk.near {
            pk.psa + pk.tga * n
        } else {
            digamma(n + self.a[j])
        }
    }

    /// `ln Γ(n + a_j)`: exactly `ln Γ(a_j)` at `n = 0`; `ln Γ(a_j) + ψ(a_j) n + ψ'(a_j) n²/2`
    /// for `n ≤ 10⁻⁹ a_j` (remainder `|ψ''| n³/6`, below 1e-27 relative).
    #[inline]
    fn lgamma(&self, j: usize, n: f64) -> f64 {
        let pk = &self.pk[j];
        if n == 0.0 {
            pk.lga
        } else if n <= pk.near {
            pk.lga + n * (pk.psa + 0.5 * pk.tga * n)
        } else {
            gammaln(n + self.a[j])
        }
    }

    #[inline]
    fn row(&self, u: usize) -> &[f64] {
        let v = self.words[u];
        &self.tab[v * self.k..(v + 1) * self.k]
    }

    /// Document objective at a consistent state (constant terms dropped), module docs.
    fn objective(&self, n: &[f64], p: &[f64], lse_sum: f64) -> f64 {
        let mut tot = self.a_rem.unwrap_or(0.0);
        let mut val = 0.0;
        for k in 0..self.k {
            let th = n[k] + self.a[k];
            tot += th;
            // an unused topic's term is `ln Γ(a_k)` (`th` is `a_k` exactly): precomputed
            val += self.lgamma(k, n[k]);
            if n[k] > 0.0 {
                val -= n[k] * p[k];
            }
        }
        if let Some(r) = self.a_rem {
            val += gammaln(r);
        }
        val -= gammaln(tot);
        val + lse_sum
    }
}

/// `Σ_u c_u lse_u` where `lse_u = ln s_u + m` for ordinary rows and the stored log-domain value
/// for fallback rows (logs are taken only when an objective is needed, not in every pass).
fn lse_sum(counts: &[f64], s: &[f64], lse: &[f64], fb: &[bool], m: f64) -> f64 {
    let mut tot = 0.0;
    for u in 0..counts.len() {
        if counts[u] > 0.0 {
            tot += counts[u] * if fb[u] { lse[u] } else { s[u].ln() + m };
        }
    }
    tot
}

/// State of the dense step: counts, log weights of the last pass and its row sums.
#[derive(Clone, Default)]
struct Dense {
    n: Vec<f64>,
    p: Vec<f64>,
    e: Vec<f64>,
    m: f64,
    s: Vec<f64>,
    lse: Vec<f64>,
    fb: Vec<bool>,
}

impl Dense {
    fn reset(&mut self, k: usize, u: usize) {
        self.n.clear();
        self.n.resize(k, 0.0);
        self.p.resize(k, 0.0);
        self.e.resize(k, 0.0);
        self.s.clear();
        self.s.resize(u, 0.0);
        self.lse.clear();
        self.lse.resize(u, 0.0);
        self.fb.clear();
        self.fb.resize(u, false);
    }

    /// One pass with the log weights in `self.p`: row sums and new counts `self.n`.
    fn pass(&mut self, ctx: &DocCtx, acc: &mut [f64], tmp: &mut [f64]) {
        let k = ctx.k;
        self.m = self.p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        for j in 0..k {
            self.e[j] = scaled_exp(self.p[j] - self.m);
        }
        acc.fill(0.0);
        let any_fb = dense_sweep(ctx.tab, k, ctx.words, ctx.counts, &self.e, &mut self.s, acc);
        for u in 0..ctx.words.len() {
            let su = self.s[u];
            self.fb[u] = !usable(su);
        }
        for j in 0..k {
            self.n[j] = self.e[j] * acc[j];
        }
        if any_fb {
            for u in 0..ctx.words.len() {
                if self.fb[u] {
                    self.lse[u] = self.log_row(ctx, u, tmp);
                    let c = ctx.counts[u];
                    for j in 0..k {
                        self.n[j] += c * tmp[j];
                    }
                }
            }
        }
    }

    fn lse_sum(&self, ctx: &DocCtx) -> f64 {
        lse_sum(ctx.counts, &self.s, &self.lse, &self.fb, self.m)
    }

    /// Responsibilities of a fallback row, in the log domain, into `out`; returns the lse.
    /// The log weights enter shifted by `m` (as in a pass): with log weights of −1e300 (zero
    /// counts and priors of 1e-300) `ln E + p` would lose the table's every digit.
    fn log_row(&self, ctx: &DocCtx, u: usize, out: &mut [f64]) -> f64 {
        let row = ctx.row(u);
        for j in 0..ctx.k {
            out[j] = ln_or_neg_inf(row[j]) + (self.p[j] - self.m);
        }
        softmax_log(out) + self.m
    }
}

/// Reweight a row's support `ix` on its table entries `tv` with the weights `e`: values
/// `tv_t e_j` summed in order into `s`; if the sum is usable the values are normalised in `vl`,
/// `c · vl_t` is added to `n` in order, `s` stored in `s_out` and true returned; otherwise `vl`
/// holds the unnormalised values, `n` is untouched and false is returned (the row is then
/// reselected).
#[inline(always)]
fn reweight_row(ix: &[u32], vl: &mut [f64], tv: &[f64], e: &[f64], n: &mut [f64], c: f64, s_out: &mut f64) -> bool {
    let mut s = 0.0;
    for ((v, &t), &j) in vl.iter_mut().zip(tv).zip(ix) {
        *v = t * e[j as usize];
        s += *v;
    }
    if !usable(s) {
        return false;
    }
    let inv = 1.0 / s;
    vl.iter_mut().for_each(|x| *x *= inv);
    *s_out = s;
    add_row(n, ix, vl, c);
    true
}

/// `n_j += c · v_t` over a row's support `ix` and values `vl`, in order.
#[inline(always)]
fn add_row(n: &mut [f64], ix: &[u32], vl: &[f64], c: f64) {
    for (&j, &v) in ix.iter().zip(vl) {
        n[j as usize] += c * v;
    }
}

/// [`reweight_row`] on a support of exactly `N` entries: the lengths are constants, so the
/// loops unroll with no exits to predict (~10 % of a `top_l=8` step at K = 400).
#[inline(always)]
fn reweight_scatter<const N: usize>(ix: &[u32], vl: &mut [f64], tv: &[f64], e: &[f64], n: &mut [f64], c: f64, s_out: &mut f64) -> bool {
    let (ix, vl, tv): (&[u32; N], &mut [f64; N], &[f64; N]) =
        (ix.try_into().expect("N"), vl.try_into().expect("N"), tv.try_into().expect("N"));
    reweight_row(ix, vl, tv, e, n, c, s_out)
}

/// Which rows of an L-sparse pass get a full top-L reselection (the others are reweighted on
/// their current support; a row whose support lost all its mass is reselected anyway).
#[derive(Clone, Copy)]
enum Reselect {
    All,
    None,
    /// Rows whose support contains this topic (the first pass of a restart proposal).
    Containing(u32),
}

/// A reselection scans the whole `K`-wide row (contiguous, eight weights per step) instead of
/// gathering the active topics' entries once `DENSE_COLLECT · |A_d| ≥ K`. Both select the same
/// entries; which is faster was measured (`benches/bench_doc_topic.py`'s corpus, `top_l=8`, one
/// thread): 2 against 4, K = 100 / 400 / 800: 3.26 → 3.10 s, 5.16 → 4.93 s, 6.45 → 6.31 s; 1, 3
/// and 8 were slower than 2, the whole row always (∞) much slower (6.95 s at K = 400).
const DENSE_COLLECT: usize = 2;

/// Largest `L` for which the top-L selection uses the threshold scan.
const SCAN_MAX_L: usize = 32;

/// Offer `(j, x)` to the best-so-far list `ix`/`vl[..m]` (sorted by rank, at most `l`).
#[inline(always)]
fn offer(ix: &mut [u32], vl: &mut [f64], l: usize, m: &mut usize, thr: &mut f64, j: u32, x: f64) {
    if *m == l {
        if !(x > *thr) {
            return;
        }
        *m -= 1;
    }
    let mut pos = *m;
    while pos > 0 && vl[pos - 1] < x {
        ix[pos] = ix[pos - 1];
        vl[pos] = vl[pos - 1];
        pos -= 1;
    }
    ix[pos] = j;
    vl[pos] = x;
    *m += 1;
    if *m == l {
        *thr = vl[l - 1];
    }
}

/// Top-`l` of the weights `w[t]` of topics `ids[t]` (ascending ids), by "larger weight first,
/// then smaller index" (the order of [`super::top_l::rank_cmp`] for finite weights): a threshold
/// scan keeping the best so far sorted by rank (one comparison per entry in the common case).
/// With at least `8 l` entries, the `l`-th largest of the maxima of blocks of eight bounds the
/// `l`-th largest weight from below (`l` distinct entries, one per block, weigh at least that
/// much); only entries at or above it are offered, so the result is the same.
/// Writes the selection in ascending index order into `ix`/`vl`; returns its size.
fn scan_top(ids: &[u32], w: &[f64], l: usize, ix: &mut [u32], vl: &mut [f64], col: &mut Collected) -> usize {
    let (ix, vl) = (&mut ix[..l], &mut vl[..l]);
    let n = ids.len().min(w.len());
    let (ids, w) = (&ids[..n], &w[..n]);
    if n >= 8 * l {
        let (mut bi, mut bv) = ([0u32; SCAN_MAX_L], [0f64; SCAN_MAX_L]);
        let (mut bm, mut floor) = (0, f64::NEG_INFINITY);
        for (b, blk) in w.chunks(8).enumerate() {
            let x = blk.iter().fold(f64::NEG_INFINITY, |a, &y| a.max(y));
            offer(&mut bi[..l], &mut bv[..l], l, &mut bm, &mut floor, b as u32, x);
        }
        if bm == l && floor > f64::NEG_INFINITY {
            col.clear();
            let mut t = 0;
            while t < n && col.room() >= 8 {
                let end = (t + 8).min(n);
                if w[t..end].iter().fold(false, |any, &x| any | (x >= floor)) {
                    for u in t..end {
                        col.push(ids[u], w[u], w[u] >= floor);
                    }
                }
                t = end;
            }
            if t == n {
                return col.take(l, ix, vl);
            }
        }
    }
    let (mut m, mut thr) = (0, f64::NEG_INFINITY);
    for (&j, &x) in ids.iter().zip(w) {
        offer(ix, vl, l, &mut m, &mut thr, j, x);
    }
    sort_by_index(&mut ix[..m], &mut vl[..m]);
    m
}

/// Entries at or above a lower bound of the `l`-th largest weight, in ascending index order
/// (a buffer kept across rows: no per-row initialisation). The buffers hold `CAP` entries and
/// eight more of slack for the appends of whole octets ([`collect_at_floor_avx512`],
/// [`collect_active`]), which write eight slots whatever they keep.
#[derive(Clone)]
struct Collected {
    ids: Vec<u32>,
    w: Vec<f64>,
    c: usize,
}

impl Default for Collected {
    fn default() -> Self {
        Collected { ids: vec![0; Self::CAP + 8], w: vec![0.0; Self::CAP + 8], c: 0 }
    }
}

impl Collected {
    const CAP: usize = 4 * SCAN_MAX_L;
    /// Up to this many collected entries, [`Collected::take`] ranks them by counting.
    const RANK_MAX: usize = 16;

    fn clear(&mut self) {
        self.c = 0;
    }

    fn room(&self) -> usize {
        Self::CAP - self.c
    }

    /// Branch-free append: the entry is kept iff `keep` (needs `room() >= 1`).
    #[inline(always)]
    fn push(&mut self, j: u32, x: f64, keep: bool) {
        self.ids[self.c] = j;
        self.w[self.c] = x;
        self.c += usize::from(keep);
    }

    /// Append the entries `(base + i, w[i])` whose bit `i` is set in `mask`, in index order;
    /// false (nothing appended) when fewer than eight slots are left.
    #[inline(always)]
    fn extend_masked(&mut self, base: usize, w: &[f64; 8], mut mask: u32) -> bool {
        if self.room() < 8 {
            return false;
        }
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            self.ids[self.c] = (base + i) as u32;
            self.w[self.c] = w[i];
            self.c += 1;
            mask &= mask - 1;
        }
        true
    }

    /// The top `l` of the collected entries (all of them when at most `l`: the usual case).
    fn take(&self, l: usize, ix: &mut [u32], vl: &mut [f64]) -> usize {
        let c = self.c;
        if c <= l {
            ix[..c].copy_from_slice(&self.ids[..c]);
            vl[..c].copy_from_slice(&self.w[..c]);
            return c;
        }
        let w = &self.w[..c];
        let mut m = 0;
        if c <= Self::RANK_MAX {
            // entry `i`'s rank among the collected ones (which are in ascending topic order):
            // the heavier entries, and the equal ones before it; the top `l` are the ranks below
            // `l`, visited in topic order — no branches on the data and no sort (with many
            // near-equal weights an insertion list mispredicts at almost every entry, and so did
            // a branch on each rank: every entry is written at `m`, which advances only past the
            // kept ones; 2 % of the `top_l=8` step at K = 400); collected weights passed
            // `≥ floor`, so none is NaN and exactly `l` ranks are below `l` (`min(l)` only guards
            // the output)
            let (mut bi, mut bv) = ([0u32; Self::RANK_MAX], [0f64; Self::RANK_MAX]);
            for (i, &wi) in w.iter().enumerate() {
                let above = w.iter().fold(0usize, |r, &wj| r + usize::from(wj > wi));
                let tied_before = w[..i].iter().fold(0usize, |r, &wj| r + usize::from(wj == wi));
                bi[m] = self.ids[i];
                bv[m] = wi;
                m += usize::from(above + tied_before < l);
            }
            let m = m.min(l);
            ix[..m].copy_from_slice(&bi[..m]);
            vl[..m].copy_from_slice(&bv[..m]);
            return m;
        }
        // more: the `l`-th largest weight by selection on a copy, then the entries above it and
        // the first of those equal to it, in topic order (the same ranks)
        let mut buf = [0.0f64; Self::CAP];
        buf[..c].copy_from_slice(w);
        let thr = *buf[..c].select_nth_unstable_by(l - 1, |a, b| b.total_cmp(a)).1;
        let mut ties = l - w.iter().fold(0usize, |r, &x| r + usize::from(x > thr));
        for (&j, &x) in self.ids[..c].iter().zip(w) {
            let tie = x == thr && ties > 0;
            if (x > thr || tie) && m < l {
                ties -= usize::from(tie);
                ix[m] = j;
                vl[m] = x;
                m += 1;
            }
        }
        m
    }
}

/// Sort a selection by ascending topic index (insertion sort; at most 32 entries).
fn sort_by_index(ix: &mut [u32], vl: &mut [f64]) {
    let m = ix.len();
    for t in 1..m {
        let (j, x) = (ix[t], vl[t]);
        let mut pos = t;
        while pos > 0 && ix[pos - 1] > j {
            ix[pos] = ix[pos - 1];
            vl[pos] = vl[pos - 1];
            pos -= 1;
        }
        ix[pos] = j;
        vl[pos] = x;
    }
}

/// State of the L-sparse step.
#[derive(Clone, Default)]
struct Sparse {
    n: Vec<f64>,
    p: Vec<f64>,
    e: Vec<f64>,
    /// `e` of the active topics, in the order of `active` (one gather per entry in selection).
    ea: Vec<f64>,
    /// The (at most `L`) active topics of largest `e`, heaviest first, for reselection passes
    /// (`heavy_e`: their `e`).
    heavy: Vec<u32>,
    heavy_e: Vec<f64>,
    col: Collected,
    m: f64,
    active: Vec<u32>,
    cnt: Vec<usize>,
    idx: Vec<u32>,
    val: Vec<f64>,
    /// The topic-word table's entries of each row's support (`tab[u·l + t] = row_u[idx[u·l + t]]`),
    /// so reweighting reads `L` contiguous values instead of `L` scattered ones of a `K`-wide row.
    tab: Vec<f64>,
    s: Vec<f64>,
    lse: Vec<f64>,
    fb: Vec<bool>,
}

impl Sparse {
    fn reset(&mut self, k: usize, u: usize, l: usize) {
        self.n.clear();
        self.n.resize(k, 0.0);
        self.p.resize(k, 0.0);
        self.e.resize(k, 0.0);
        self.active.clear();
        self.active.extend(0..k as u32);
        self.cnt.clear();
        self.cnt.resize(u, 0);
        self.idx.clear();
        self.idx.resize(u * l, 0);
        self.val.clear();
        self.val.resize(u * l, 0.0);
        self.tab.clear();
        self.tab.resize(u * l, 0.0);
        self.s.clear();
        self.s.resize(u, 0.0);
        self.lse.clear();
        self.lse.resize(u, 0.0);
        self.fb.clear();
        self.fb.resize(u, false);
    }

    /// Start a restart proposal from `cur`: copy what its first pass reads (counts, log
    /// weights, active topics, supports and their table entries) and only size the rest (the
    /// pass writes every row's values, sums and flags and the topic weights before any read);
    /// cheaper than a whole clone, whose row values and sums were most of the copying.
    fn restart_from(&mut self, cur: &Sparse) {
        self.n.clone_from(&cur.n);
        self.p.clone_from(&cur.p);
        self.active.clone_from(&cur.active);
        self.cnt.clone_from(&cur.cnt);
        self.idx.clone_from(&cur.idx);
        self.tab.clone_from(&cur.tab);
        self.e.resize(cur.e.len(), 0.0);
        self.val.resize(cur.val.len(), 0.0);
        self.s.resize(cur.s.len(), 0.0);
        self.lse.resize(cur.lse.len(), 0.0);
        self.fb.resize(cur.fb.len(), false);
    }

    /// Full top-L reselection of row `u` over the active topics.
    fn select_row(&mut self, ctx: &DocCtx, u: usize, l: usize, w: &mut [f64], cand: &mut Vec<u32>) {
        let row = ctx.row(u);
        let (ix, vl) = (&mut self.idx[u * l..(u + 1) * l], &mut self.val[u * l..(u + 1) * l]);
        let m = if l <= SCAN_MAX_L {
            // Any `l` distinct active topics bound the new `l`-th largest weight from below by
            // their smallest weight, and only the entries at or above it are candidates. The
            // seeds: the row's previous support, reweighted (a topic that left the active set
            // weighs 0 and is skipped), then the heaviest active topics.
            // (the support's table entries are kept beside it: contiguous, not scattered over
            // the `K`-wide row)
            let mut seeds = 0;
            let mut floor = f64::INFINITY;
            let m0 = self.cnt[u];
            for (&j, &t) in ix[..m0].iter().zip(&self.tab[u * l..u * l + m0]) {
                let x = t * self.e[j as usize];
                if x > 0.0 {
                    seeds += 1;
                    floor = floor.min(x);
                }
            }
            // Too few: complete the seeds with the heaviest active topics outside the support.
            for &j in &self.heavy {
                if seeds == l {
                    break;
                }
                if !ix[..self.cnt[u]].contains(&j) {
                    seeds += 1;
                    floor = floor.min(row[j as usize] * self.e[j as usize]);
                }
            }
            if seeds < l {
                floor = 0.0;
            }
            let (act, ea) = (&self.active[..], &self.ea[..self.active.len()]);
            let mut done = None;
            if floor > 0.0 && act.len() * DENSE_COLLECT >= ctx.k {
                // most topics active: scan the whole row (inactive topics weigh 0 < floor)
                if collect_at_floor(row, &self.e, floor, &mut self.col) {
                    done = Some(self.col.take(l, ix, vl));
                }
            } else if floor > 0.0 {
                // the active topics' weights, eight at a time, the entries at the floor appended
                if collect_active(row, act, ea, floor, &mut self.col) {
                    done = Some(self.col.take(l, ix, vl));
                }
            }
            match done {
                Some(m) => m,
                None => {
                    let buf = &mut w[..act.len()];
                    for ((b, &j), &x) in buf.iter_mut().zip(act).zip(ea) {
                        *b = row[j as usize] * x;
                    }
                    scan_top(act, buf, l, ix, vl, &mut self.col)
                }
            }
        } else {
            for &j in &self.active {
                w[j as usize] = row[j as usize] * self.e[j as usize];
            }
            cand.clear();
            cand.extend_from_slice(&self.active);
            let m = select_top_among(w, cand, l);
            for t in 0..m {
                ix[t] = cand[t];
                vl[t] = w[cand[t] as usize];
            }
            m
        };
        let s: f64 = vl[..m].iter().sum();
        if usable(s) {
            let inv = 1.0 / s;
            vl[..m].iter_mut().for_each(|x| *x *= inv);
            self.s[u] = s;
            self.fb[u] = false;
        } else {
            for &j in &self.active {
                w[j as usize] = ln_or_neg_inf(row[j as usize]) + self.p[j as usize];
            }
            cand.clear();
            cand.extend_from_slice(&self.active);
            let m2 = select_top_among(w, cand, l);
            debug_assert_eq!(m, m2);
            for t in 0..m {
                ix[t] = cand[t];
                vl[t] = w[cand[t] as usize];
            }
            self.lse[u] = softmax_log(&mut vl[..m]);
            self.fb[u] = true;
        }
        for (tv, &j) in self.tab[u * l..u * l + m].iter_mut().zip(&self.idx[u * l..u * l + m]) {
            *tv = row[j as usize];
        }
        self.cnt[u] = m;
    }

    /// What a pass computes before its rows: the shift `m`, the weights `e` (and `ea`) of the
    /// active topics and, when rows are reselected, the heaviest active topics.
    fn prepare(&mut self, l: usize, mode: Reselect) {
        self.m = self.active.iter().map(|&j| self.p[j as usize]).fold(f64::NEG_INFINITY, f64::max);
        self.e.fill(0.0);
        self.ea.clear();
        for &j in &self.active {
            let x = scaled_exp(self.p[j as usize] - self.m);
            self.e[j as usize] = x;
            self.ea.push(x);
        }
        self.heavy.clear();
        if l <= SCAN_MAX_L && !matches!(mode, Reselect::None) {
            // the best-so-far list of the threshold scan, by `e` (descending, ties by index)
            self.heavy.resize(l, 0);
            self.heavy_e.resize(l, 0.0);
            let (mut m, mut thr) = (0, f64::NEG_INFINITY);
            for (&j, &x) in self.active.iter().zip(&self.ea) {
                offer(&mut self.heavy, &mut self.heavy_e, l, &mut m, &mut thr, j, x);
            }
            self.heavy.truncate(m);
        }
    }

    /// One pass with the log weights in `self.p` (valid on the active set).
    fn pass(&mut self, ctx: &DocCtx, l: usize, mode: Reselect, w: &mut [f64], cand: &mut Vec<u32>) {
        self.prepare(l, mode);
        self.n.fill(0.0);
        for u in 0..ctx.words.len() {
            let (b0, b1) = (u * l, u * l + self.cnt[u]);
            let fresh = match mode {
                Reselect::All => true,
                Reselect::None => false,
                Reselect::Containing(j) => self.idx[b0..b1].contains(&j),
            };
            let c = ctx.counts[u];
            if !fresh {
                // reweight on the current support (fixed-size arrays for the usual sizes)
                let (ix, vl, tv, e, n) = (&self.idx[b0..b1], &mut self.val[b0..b1], &self.tab[b0..b1], &self.e[..], &mut self.n[..]);
                let su = &mut self.s[u];
                let done = match b1 - b0 {
                    2 => reweight_scatter::<2>(ix, vl, tv, e, n, c, su),
                    4 => reweight_scatter::<4>(ix, vl, tv, e, n, c, su),
                    8 => reweight_scatter::<8>(ix, vl, tv, e, n, c, su),
                    16 => reweight_scatter::<16>(ix, vl, tv, e, n, c, su),
                    _ => reweight_row(ix, vl, tv, e, n, c, su),
                };
                if done {
                    self.fb[u] = false;
                    continue;
                }
            }
            // a reselected row (or one whose support lost its mass)
            self.select_row(ctx, u, l, w, cand);
            let (b0, b1) = (u * l, u * l + self.cnt[u]);
            add_row(&mut self.n, &self.idx[b0..b1], &self.val[b0..b1], c);
        }
    }

    /// The document's first pass read from the batch's first pass `fp` (row `u` is word
    /// `words[u]` with count `counts[u]`): the same supports, values and sums as [`Self::pass`]
    /// with every topic active and `p = ln a` computes, and the counts added in row order.
    /// The weights `e` are left stale: the next pass prepares its own.
    fn first_pass(&mut self, fp: &FirstPass, words: &[usize], counts: &[f64], l: usize) {
        debug_assert_eq!(fp.l, l);
        if let Some(p) = fp.parts.first() {
            self.m = p.m;
        }
        self.n.fill(0.0);
        for (u, (&wd, &c)) in words.iter().zip(counts).enumerate() {
            let i = fp.slot[wd] as usize;
            let (r, i) = (&fp.parts[i / FirstPass::CHUNK], i % FirstPass::CHUNK);
            let m = r.cnt[i];
            let (b0, f0) = (u * l, i * l);
            self.idx[b0..b0 + m].copy_from_slice(&r.idx[f0..f0 + m]);
            self.val[b0..b0 + m].copy_from_slice(&r.val[f0..f0 + m]);
            self.tab[b0..b0 + m].copy_from_slice(&r.tab[f0..f0 + m]);
            self.s[u] = r.s[i];
            self.lse[u] = r.lse[i];
            self.fb[u] = r.fb[i];
            self.cnt[u] = m;
            add_row(&mut self.n, &self.idx[b0..b0 + m], &self.val[b0..b0 + m], c);
        }
    }

    /// Drop topics with `N_dk ≤ eps` from the active set (keeping at least the largest).
    fn prune(&mut self, eps: f64) {
        let best = self.active.iter().copied().max_by(|&x, &y| self.n[x as usize].total_cmp(&self.n[y as usize]).then(y.cmp(&x)));
        let n = &self.n;
        self.active.retain(|&j| n[j as usize] > eps);
        if self.active.is_empty() {
            if let Some(b) = best {
                self.active.push(b);
            }
        }
    }

    fn objective(&self, ctx: &DocCtx) -> f64 {
        ctx.objective(&self.n, &self.p, lse_sum(ctx.counts, &self.s, &self.lse, &self.fb, self.m))
    }
}

/// The first pass of the L-sparse step for every word of a batch. A document's first pass
/// weighs topic `k` by `E_vk a_k` with every topic active: a word's support, values and sum
/// do not depend on the document, so they are selected once per distinct word of the batch
/// instead of once per (document, word) — at K = 400 the most expensive pass, each row a
/// selection among all `K` topics.
struct FirstPass {
    l: usize,
    /// word id → its position among the batch's distinct words (`u32::MAX`: not in the batch)
    slot: Vec<u32>,
    /// the first pass of the distinct words, [`FirstPass::CHUNK`] words per part (position `i`
    /// is row `i % CHUNK` of part `i / CHUNK`; `m`, `cnt`, `idx`, `val`, `tab`, `s`, `lse` and
    /// `fb` are set, `m` the same in every part)
    parts: Vec<Sparse>,
}

impl FirstPass {
    /// Words per parallel chunk (fixed, so the result does not depend on the threads; each
    /// word's row is computed alone anyway).
    const CHUNK: usize = 256;

    fn build<I: CsrIndex>(b: &Batch<I>, l: usize) -> FirstPass {
        let k = b.k;
        let mut slot = vec![u32::MAX; b.v];
        let mut words = Vec::new();
        let (lo, hi) = (b.indptr[0], b.indptr[b.indptr.len() - 1]);
        for w in &b.indices[lo..hi] {
            let w = w.fast();
            if slot[w] == u32::MAX {
                slot[w] = 0;
                words.push(w);
            }
        }
        words.sort_unstable();
        for (i, &w) in words.iter().enumerate() {
            slot[w] = i as u32;
        }
        let parts = words
            .par_chunks(Self::CHUNK)
            .map(|ws| {
                let ctx = DocCtx { tab: b.tab, k, words: ws, counts: &[], a: b.a, pk: &b.pk, a_rem: b.a_rem };
                let mut sp = Sparse::default();
                sp.reset(k, ws.len(), l);
                for j in 0..k {
                    sp.p[j] = b.a[j].ln();
                }
                sp.prepare(l, Reselect::All);
                let (mut w, mut cand) = (vec![0.0; k], Vec::with_capacity(k));
                for u in 0..ws.len() {
                    sp.select_row(&ctx, u, l, &mut w, &mut cand);
                }
                sp
            })
            .collect();
        FirstPass { l, slot, parts }
    }
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// Counters of one leaf.
#[derive(Default, Clone, Copy)]
struct Counters {
    iters: u64,
    passes: u64,
    tried: u64,
    accepted: u64,
}

/// Restart candidates: topics with `N > min_mass` by ascending `N` (ties by index), all but the
/// largest, at most `max_trials`.
fn restart_candidates(n: &[f64], opts: &DocTopicOptions) -> Vec<usize> {
    let mut cand: Vec<usize> = (0..n.len()).filter(|&j| n[j] > opts.restart_min_mass).collect();
    if cand.len() < 2 {
        return Vec::new();
    }
    cand.sort_by(|&x, &y| n[x].total_cmp(&n[y]).then(x.cmp(&y)));
    let keep = opts.restart_max_trials.min(cand.len() - 1);
    cand.truncate(keep);
    cand
}

fn n_used(n: &[f64], min_mass: f64) -> usize {
    n.iter().filter(|&&x| x > min_mass).count()
}

/// The log weights `p` of a document's first pass: cold, the prior's `ln a_k`; warm, the
/// update `ψ(N_dk + a_k)` from the given counts.
fn start_weights(p: &mut [f64], ctx: &DocCtx, init: Option<&[f64]>) {
    match init {
        None => p.iter_mut().zip(ctx.pk).for_each(|(p, pk)| *p = pk.lna),
        Some(n0) => p.iter_mut().zip(n0).enumerate().for_each(|(j, (p, &n))| *p = ctx.psi(j, n)),
    }
}

/// Dense local step of one document (restart proposals after convergence when `restart`);
/// leaves the final state in `cur`.
#[allow(clippy::too_many_arguments)]
fn dense_doc(
    ctx: &DocCtx,
    opts: &DocTopicOptions,
    restart: bool,
    init: Option<&[f64]>,
    cur: &mut Dense,
    prop: &mut Dense,
    acc: &mut [f64],
    tmp: &mut [f64],
    ctr: &mut Counters,
) {
    let (k, nu) = (ctx.k, ctx.words.len());
    cur.reset(k, nu);
    start_weights(&mut cur.p, ctx, init);
    if nu == 0 {
        return;
    }
    cur.pass(ctx, acc, tmp);
    ctr.passes += nu as u64;
    let mut old = vec![0.0; k];
    for _ in 0..opts.max_iter {
        old.copy_from_slice(&cur.n);
        for j in 0..k {
            cur.p[j] = ctx.psi(j, cur.n[j]);
        }
        cur.pass(ctx, acc, tmp);
        ctr.iters += 1;
        ctr.passes += nu as u64;
        if max_abs_diff(&cur.n, &old) < opts.tol {
            break;
        }
    }
    if !restart {
        return;
    }
    let mut l_cur = ctx.objective(&cur.n, &cur.p, cur.lse_sum(ctx));
    for j in restart_candidates(&cur.n, opts) {
        if cur.n[j] <= opts.restart_min_mass {
            continue;
        }
        prop.clone_from(cur);
        prop.n[j] = 0.0;
        for _ in 0..opts.restart_iters {
            for t in 0..k {
                prop.p[t] = ctx.psi(t, prop.n[t]);
            }
            prop.pass(ctx, acc, tmp);
            ctr.passes += nu as u64;
        }
        ctr.tried += 1;
        let l_prop = ctx.objective(&prop.n, &prop.p, prop.lse_sum(ctx));
        if l_prop > l_cur {
            std::mem::swap(cur, prop);
            l_cur = l_prop;
            ctr.accepted += 1;
        }
        if n_used(&cur.n, opts.restart_min_mass) < 2 {
            break;
        }
    }
}

/// L-sparse local step of one document (thesis Alg. 7.4; restart proposals when `restart`);
/// leaves the final state in `cur`.
#[allow(clippy::too_many_arguments)]
fn sparse_doc(
    ctx: &DocCtx,
    opts: &DocTopicOptions,
    restart: bool,
    l: usize,
    first: Option<(&FirstPass, &[usize])>,
    init: Option<&[f64]>,
    cur: &mut Sparse,
    prop: &mut Sparse,
    w: &mut [f64],
    cand: &mut Vec<u32>,
    ctr: &mut Counters,
) {
    let (k, nu) = (ctx.k, ctx.words.len());
    cur.reset(k, nu, l);
    start_weights(&mut cur.p, ctx, init);
    // the cold start's weights are the same for every document (`first` may hold its selections
    // per word); a warm start selects each row from its own counts
    let first = first.filter(|_| init.is_none());
    if nu == 0 {
        return;
    }
    match first {
        Some((fp, words)) => cur.first_pass(fp, words, ctx.counts, l),
        None => cur.pass(ctx, l, Reselect::All, w, cand),
    }
    ctr.passes += nu as u64;
    cur.prune(opts.sparse_eps);
    let mut old = vec![0.0; k];
    for it in 1..=opts.max_iter {
        old.copy_from_slice(&cur.n);
        for &j in &cur.active {
            cur.p[j as usize] = ctx.psi(j as usize, cur.n[j as usize]);
        }
        cur.pass(ctx, l, if it <= 5 || it % 10 == 0 { Reselect::All } else { Reselect::None }, w, cand);
        ctr.iters += 1;
        ctr.passes += nu as u64;
        let done = max_abs_diff(&cur.n, &old) < opts.tol;
        cur.prune(opts.sparse_eps);
        if done {
            break;
        }
    }
    if !restart {
        return;
    }
    let mut l_cur = cur.objective(ctx);
    for j in restart_candidates(&cur.n, opts) {
        if cur.n[j] <= opts.restart_min_mass {
            continue;
        }
        prop.restart_from(cur);
        prop.n[j] = 0.0;
        prop.active.retain(|&t| t as usize != j);
        if prop.active.is_empty() {
            continue;
        }
        for it in 0..opts.restart_iters {
            for &t in &prop.active {
                prop.p[t as usize] = ctx.psi(t as usize, prop.n[t as usize]);
            }
            prop.pass(ctx, l, if it == 0 { Reselect::Containing(j as u32) } else { Reselect::None }, w, cand);
            ctr.passes += nu as u64;
            prop.prune(opts.sparse_eps);
        }
        ctr.tried += 1;
        let l_prop = prop.objective(ctx);
        if l_prop > l_cur {
            std::mem::swap(cur, prop);
            l_cur = l_prop;
            ctr.accepted += 1;
        }
        if n_used(&cur.n, opts.restart_min_mass) < 2 {
            break;
        }
    }
}

/// Partial summaries of a run of documents; `S` as dense rows over the sorted `words`.
struct Partial {
    n_docs: usize,
    words: Vec<u32>,
    s_rows: Vec<f64>,
    /// L-sparse steps: `S` as entries `(word << 32 | topic, value)`, sorted by key (dense
    /// rows over a leaf's vocabulary would be mostly zeros, and allocating and merging them
    /// cost more than the step itself at large K).
    s_keys: Vec<u64>,
    s_vals: Vec<f64>,
    n: Vec<f64>,
    h: Vec<f64>,
    p: Vec<f64>,
    q: Vec<f64>,
    usage: Vec<f64>,
    p_rem: f64,
    q0: f64,
    q_rem: f64,
    mh: Vec<f64>,
    mp: Vec<f64>,
    mq: Vec<f64>,
    doc_topic: Vec<f64>,
    ctr: Counters,
}

fn add_into(a: &mut [f64], b: &[f64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Large `f64` buffers reused across leaves, merges and calls: the dense `S` rows of a leaf
/// are `words × K` (tens of MB at large K), and allocating them afresh for every leaf and
/// merge faults their pages in and unmaps them again (TLB shootdowns on every core) — on a
/// warm-started step, whose documents converge in a pass or two, that was a third of the
/// time. Only where memory comes from changes: every buffer is cleared before use. The
/// process keeps one pool ([`POOL`]), trimmed to [`POOL_KEEP_BYTES`] after every call.
struct Pool(Mutex<Vec<Vec<f64>>>);

/// The buffers kept between calls of the document step.
static POOL: Pool = Pool(Mutex::new(Vec::new()));

/// At most this many bytes of buffers stay in [`POOL`] between calls (the smallest go first).
const POOL_KEEP_BYTES: usize = 128 << 20;

impl Pool {
    /// Drop kept buffers, smallest first, until at most `bytes` remain.
    fn trim(&self, bytes: usize) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        let mut total: usize = kept.iter().map(|v| v.capacity() * std::mem::size_of::<f64>()).sum();
        while total > bytes {
            match kept.pop() {
                Some(v) => total -= v.capacity() * std::mem::size_of::<f64>(),
                None => break,
            }
        }
    }

    /// An empty buffer, with capacity for `cap` values when a kept one has it.
    fn take(&self, cap: usize) -> Vec<f64> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let best = (0..kept.len()).filter(|&i| kept[i].capacity() >= cap).min_by_key(|&i| kept[i].capacity());
        let mut v = match best {
            Some(i) => kept.swap_remove(i),
            None => kept.pop().unwrap_or_default(),
        };
        v.clear();
        v.reserve(cap);
        v
    }

    /// Keep `v` for reuse, unless a few are kept already (about as many as are in use at
    /// once by the tree reduction; more would only raise the peak memory).
    fn give(&self, v: Vec<f64>) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if v.capacity() >= 1 << 16 && kept.len() < 2 * rayon::current_num_threads() + 2 {
            kept.push(v);
        }
    }
}

/// Merge two key-sorted entry lists, adding the values of equal keys (`a + b`).
fn merge_entries(ak: &[u64], av: &[f64], bk: &[u64], bv: &[f64]) -> (Vec<u64>, Vec<f64>) {
    let (mut keys, mut vals) = (Vec::with_capacity(ak.len() + bk.len()), Vec::with_capacity(ak.len() + bk.len()));
    let (mut i, mut j) = (0, 0);
    while i < ak.len() && j < bk.len() {
        match ak[i].cmp(&bk[j]) {
            Ordering::Less => {
                keys.push(ak[i]);
                vals.push(av[i]);
                i += 1;
            }
            Ordering::Greater => {
                keys.push(bk[j]);
                vals.push(bv[j]);
                j += 1;
            }
            Ordering::Equal => {
                keys.push(ak[i]);
                vals.push(av[i] + bv[j]);
                i += 1;
                j += 1;
            }
        }
    }
    keys.extend_from_slice(&ak[i..]);
    vals.extend_from_slice(&av[i..]);
    keys.extend_from_slice(&bk[j..]);
    vals.extend_from_slice(&bv[j..]);
    (keys, vals)
}

fn combine(mut a: Partial, b: Partial, k: usize, pool: &Pool) -> Partial {
    if !b.s_keys.is_empty() {
        let (keys, vals) = merge_entries(&a.s_keys, &a.s_vals, &b.s_keys, &b.s_vals);
        a.s_keys = keys;
        a.s_vals = vals;
    }
    let mut words = Vec::with_capacity(a.words.len() + b.words.len());
    let mut rows = pool.take((a.words.len() + b.words.len()) * k);
    let (mut i, mut j) = (0, 0);
    while i < a.words.len() || j < b.words.len() {
        let take_a = j >= b.words.len() || (i < a.words.len() && a.words[i] <= b.words[j]);
        let take_b = i >= a.words.len() || (j < b.words.len() && b.words[j] <= a.words[i]);
        if take_a && take_b {
            words.push(a.words[i]);
            let start = rows.len();
            rows.extend_from_slice(&a.s_rows[i * k..(i + 1) * k]);
            add_into(&mut rows[start..], &b.s_rows[j * k..(j + 1) * k]);
            i += 1;
            j += 1;
        } else if take_a {
            words.push(a.words[i]);
            rows.extend_from_slice(&a.s_rows[i * k..(i + 1) * k]);
            i += 1;
        } else {
            words.push(b.words[j]);
            rows.extend_from_slice(&b.s_rows[j * k..(j + 1) * k]);
            j += 1;
        }
    }
    a.words = words;
    pool.give(std::mem::replace(&mut a.s_rows, rows));
    pool.give(b.s_rows);
    a.n_docs += b.n_docs;
    for (x, y) in [(&mut a.n, &b.n), (&mut a.h, &b.h), (&mut a.p, &b.p), (&mut a.q, &b.q), (&mut a.usage, &b.usage)] {
        add_into(x, y);
    }
    for (x, y) in [(&mut a.mh, &b.mh), (&mut a.mp, &b.mp), (&mut a.mq, &b.mq)] {
        add_into(x, y);
    }
    a.p_rem += b.p_rem;
    a.q0 += b.q0;
    a.q_rem += b.q_rem;
    a.doc_topic.extend_from_slice(&b.doc_topic);
    a.ctr.iters += b.ctr.iters;
    a.ctr.passes += b.ctr.passes;
    a.ctr.tried += b.ctr.tried;
    a.ctr.accepted += b.ctr.accepted;
    a
}

/// Document-level summaries (`P`, `Q`, usage, merge `P`/`Q`) from the final counts `n`.
fn doc_summaries(ctx: &DocCtx, n: &[f64], opts: &DocTopicOptions, part: &mut Partial) {
    let k = ctx.k;
    let tot: f64 = (0..k).map(|j| n[j] + ctx.a[j]).sum::<f64>() + ctx.a_rem.unwrap_or(0.0);
    let psi_tot = digamma(tot);
    part.q0 -= gammaln(tot);
    for j in 0..k {
        let th = n[j] + ctx.a[j];
        let ell = ctx.psi(j, n[j]) - psi_tot;
        part.n[j] += n[j];
        part.p[j] += ell;
        part.q[j] += ctx.lgamma(j, n[j]) + (n[j] - th) * ell;
        if n[j] > opts.usage_threshold {
            part.usage[j] += 1.0;
        }
    }
    if let Some(r) = ctx.a_rem {
        let ell = digamma(r) - psi_tot;
        part.p_rem += ell;
        part.q_rem += gammaln(r) - r * ell;
    }
    for (m, &(x, y)) in opts.merge_pairs.iter().enumerate() {
        let th = n[x] + ctx.a[x] + n[y] + ctx.a[y];
        let ell = digamma(th) - psi_tot;
        part.mp[m] += ell;
        part.mq[m] += gammaln(th) + (n[x] + n[y] - th) * ell;
    }
    if opts.return_doc_topic {
        part.doc_topic.extend_from_slice(n);
    }
}

/// Scratch of one leaf.
struct Scratch {
    dense: (Dense, Dense),
    sparse: (Sparse, Sparse),
    acc: Vec<f64>,
    tmp: Vec<f64>,
    /// dense entropy: `Σ_u c_u L_u r_uj` of the document
    lw: Vec<f64>,
    cand: Vec<u32>,
    words: Vec<usize>,
}

fn run_leaf<I: CsrIndex>(b: &Batch<I>, opts: &DocTopicOptions, first: Option<&FirstPass>, d0: usize, d1: usize, pool: &Pool) -> Partial {
    let k = b.k;
    let sparse_l = opts.top_l.filter(|&l| l < k);
    let sparse = sparse_l.is_some();
    // dense: S as rows over the leaf's sorted vocabulary (`pos`: a word's row)
    let (mut words, mut pos) = (Vec::<u32>::new(), Vec::<u32>::new());
    if !sparse {
        let (lo, hi) = (b.indptr[d0], b.indptr[d1]);
        pos.resize(b.v, u32::MAX);
        if (hi - lo) * 8 >= b.v {
            // many tokens for the vocabulary: mark the leaf's words in `pos`, then read them
            // off in order — the sorted distinct words without sorting the tokens
            for w in &b.indices[lo..hi] {
                pos[w.fast()] = 0;
            }
            for (w, p) in pos.iter_mut().enumerate() {
                if *p == 0 {
                    *p = words.len() as u32;
                    words.push(w as u32);
                }
            }
        } else {
            words.extend(b.indices[lo..hi].iter().map(|w| w.fast() as u32));
            words.sort_unstable();
            words.dedup();
            for (i, &w) in words.iter().enumerate() {
                pos[w as usize] = i as u32;
            }
        }
    }
    let nm = opts.merge_pairs.len();
    // L-sparse: contributions to `S` as (key, value) in document order, summed per key below
    // (reserved for every entry the leaf can have: growing by doubling copied it several times)
    let mut trip: Vec<(u64, f64)> = Vec::with_capacity(sparse_l.map_or(0, |l| (b.indptr[d1] - b.indptr[d0]) * l));
    let mut part = Partial {
        n_docs: d1 - d0,
        s_rows: if sparse {
            Vec::new()
        } else {
            let mut v = pool.take(words.len() * k);
            v.resize(words.len() * k, 0.0);
            v
        },
        words,
        s_keys: Vec::new(),
        s_vals: Vec::new(),
        n: vec![0.0; k],
        h: vec![0.0; k],
        p: vec![0.0; k],
        q: vec![0.0; k],
        usage: vec![0.0; k],
        p_rem: 0.0,
        q0: 0.0,
        q_rem: 0.0,
        mh: vec![0.0; nm],
        mp: vec![0.0; nm],
        mq: vec![0.0; nm],
        doc_topic: Vec::with_capacity(if opts.return_doc_topic { (d1 - d0) * k } else { 0 }),
        ctr: Counters::default(),
    };
    let mut sc = Scratch {
        dense: (Dense::default(), Dense::default()),
        sparse: (Sparse::default(), Sparse::default()),
        acc: vec![0.0; k],
        tmp: vec![0.0; k],
        lw: vec![0.0; k],
        cand: Vec::with_capacity(k),
        words: Vec::new(),
    };
    let (mut rows, mut iota) = (pool.take(0), Vec::<usize>::new());
    for d in d0..d1 {
        let (s0, s1) = (b.indptr[d], b.indptr[d + 1]);
        sc.words.clear();
        sc.words.extend(b.indices[s0..s1].iter().map(|w| w.fast()));
        // gather the document's table rows once: every pass then streams contiguous memory
        rows.clear();
        for &w in &sc.words {
            rows.extend_from_slice(&b.tab[w * k..(w + 1) * k]);
        }
        if iota.len() < sc.words.len() {
            iota.extend(iota.len()..sc.words.len());
        }
        let ctx = DocCtx { tab: &rows, k, words: &iota[..sc.words.len()], counts: &b.data[s0..s1], a: b.a, pk: &b.pk, a_rem: b.a_rem };
        // restart proposals for this document: on, and the mask (if any) marks it
        let restart = opts.restarts && opts.restart_mask.as_ref().is_none_or(|m| m[d]);
        // its warm start, unless the cold mask marks it
        let init = b.init.filter(|_| !opts.cold_mask.as_ref().is_some_and(|m| m[d])).map(|x| &x[d * k..(d + 1) * k]);
        match sparse_l {
            None => {
                let (cur, prop) = (&mut sc.dense.0, &mut sc.dense.1);
                dense_doc(&ctx, opts, restart, init, cur, prop, &mut sc.acc, &mut sc.tmp, &mut part.ctr);
                // entropy without a logarithm per (word, topic): on an ordinary row
                // `r_uj = E_uj e_j / s_u` with `e_j = exp(δ_j)`, `δ_j = p_j − m`, so
                // `Σ_u c_u r_uj ln r_uj = Σ_u c_u r_uj ln E_uj + δ_j N_dj − Σ_u c_u r_uj ln s_u`:
                // the first sum from `S` and the table's logarithms once per distinct word of the
                // batch (`doc_topic_step_init`), the others per document below. A log-domain row
                // adds `c r (ln r − ln E)` directly (or `c r ln r` where `E` is 0: only in a row
                // no topic emits, whose responsibilities are uniform).
                let (nn, lw) = (&mut sc.acc, &mut sc.lw);
                nn.fill(0.0);
                lw.fill(0.0);
                for u in 0..sc.words.len() {
                    let c = ctx.counts[u];
                    let base = pos[sc.words[u]] as usize * k;
                    let srow = &mut part.s_rows[base..base + k];
                    if cur.fb[u] {
                        cur.log_row(&ctx, u, &mut sc.tmp);
                        let row = ctx.row(u);
                        for j in 0..k {
                            let r = sc.tmp[j];
                            srow[j] += c * r;
                            if r > 0.0 {
                                part.h[j] -= c * r * if row[j] > 0.0 { r.ln() - row[j].ln() } else { r.ln() };
                            }
                        }
                    } else {
                        let inv = 1.0 / cur.s[u];
                        dense_row_sums(ctx.row(u), &cur.e, inv, c, c * cur.s[u].ln(), &mut sc.tmp, srow, nn, lw);
                    }
                    for (m, &(x, y)) in opts.merge_pairs.iter().enumerate() {
                        let rt = sc.tmp[x] + sc.tmp[y];
                        if rt > 0.0 {
                            part.mh[m] -= c * rt * rt.ln();
                        }
                    }
                }
                for j in 0..k {
                    if nn[j] > 0.0 {
                        // `δ_j` as the last pass computed it (`Dense::pass`)
                        part.h[j] -= (cur.p[j] - cur.m) * nn[j] - lw[j];
                    }
                }
                let n = std::mem::take(&mut cur.n);
                doc_summaries(&ctx, &n, opts, &mut part);
                cur.n = n;
            }
            Some(l) => {
                let (cur, prop) = (&mut sc.sparse.0, &mut sc.sparse.1);
                let fp = first.map(|fp| (fp, &sc.words[..]));
                sparse_doc(&ctx, opts, restart, l, fp, init, cur, prop, &mut sc.tmp, &mut sc.cand, &mut part.ctr);
                for u in 0..sc.words.len() {
                    let c = ctx.counts[u];
                    let m = cur.cnt[u];
                    let (ix, vl) = (&cur.idx[u * l..u * l + m], &cur.val[u * l..u * l + m]);
                    for t in 0..m {
                        let (j, r) = (ix[t] as usize, vl[t]);
                        trip.push(((sc.words[u] as u64) << 32 | j as u64, c * r));
                        if r > 0.0 {
                            part.h[j] -= c * r * r.ln();
                        }
                    }
                    for (mi, &(x, y)) in opts.merge_pairs.iter().enumerate() {
                        let mut rt = 0.0;
                        for t in 0..m {
                            if ix[t] as usize == x || ix[t] as usize == y {
                                rt += vl[t];
                            }
                        }
                        if rt > 0.0 {
                            part.mh[mi] -= c * rt * rt.ln();
                        }
                    }
                }
                let n = std::mem::take(&mut cur.n);
                doc_summaries(&ctx, &n, opts, &mut part);
                cur.n = n;
            }
        }
    }
    // a stable sort keeps each key's contributions in document order: the same sums, in the
    // same order, as adding them into dense rows
    trip.sort_by_key(|e| e.0);
    part.s_keys.reserve(trip.len());
    part.s_vals.reserve(trip.len());
    for (key, x) in trip {
        if part.s_keys.last() == Some(&key) {
            *part.s_vals.last_mut().expect("same length") += x;
        } else {
            part.s_keys.push(key);
            part.s_vals.push(x);
        }
    }
    pool.give(rows);
    part
}

/// The document local step of a batch of documents in CSR form, reduced to the additive batch
/// summaries of the HDP topic model (or LDA when `a_rem` is `None`).
///
/// * `indptr` (D + 1), `indices` (nnz, word ids `< V`), `data` (nnz, counts ≥ 0): the batch's
///   document × vocabulary counts; duplicate ids within a document are allowed (their counts
///   add up).
/// * `exp_elog_phi` (V × K, C-contiguous): `exp(E[ln φ_kv])`, e.g. from [`topic_word_table`].
/// * `a` (K, > 0): document prior pseudocounts `α β_k` (LDA: `α / K`); `a_rem`: `α β_{>K}`
///   (> 0) or `None` (LDA: no rem entry).
///
/// # Errors
/// Shapes, non-contiguous arrays, `indptr` not starting at 0 or decreasing, word ids outside
/// `[0, V)`, negative or non-finite counts or table entries, non-positive priors, bad options.
pub fn doc_topic_step<I: CsrIndex>(
    indptr: ArrayView1<I>,
    indices: ArrayView1<I>,
    data: ArrayView1<f64>,
    exp_elog_phi: ArrayView2<f64>,
    a: ArrayView1<f64>,
    a_rem: Option<f64>,
    opts: &DocTopicOptions,
) -> Result<DocTopicOutput> {
    doc_topic_step_init(indptr, indices, data, exp_elog_phi, a, a_rem, None, opts)
}

/// [`doc_topic_step`] with an optional warm start: `init` (D × K, finite counts ≥ 0)
/// replaces the cold start of each document — its first pass is the update from
/// `N_dk = init[d, k]` (weights `exp ψ(N_dk + a_k)`) instead of from the prior's `a_k` — and
/// the iterations, restarts and summaries follow unchanged. A move's candidate started from
/// the current solution (a topic removed, say) converges in fewer passes than from cold.
///
/// # Errors
/// Those of [`doc_topic_step`]; `init` of the wrong shape, not contiguous, or with a negative
/// or non-finite entry.
#[allow(clippy::too_many_arguments)]
pub fn doc_topic_step_init<I: CsrIndex>(
    indptr: ArrayView1<I>,
    indices: ArrayView1<I>,
    data: ArrayView1<f64>,
    exp_elog_phi: ArrayView2<f64>,
    a: ArrayView1<f64>,
    a_rem: Option<f64>,
    init: Option<ArrayView2<f64>>,
    opts: &DocTopicOptions,
) -> Result<DocTopicOutput> {
    let mut b = validate(&indptr, &indices, &data, &exp_elog_phi, &a, a_rem, opts)?;
    if let Some(x) = init.as_ref() {
        b.init = Some(validate_init(x, b.indptr.len() - 1, b.k)?);
    }
    let (k, v) = (b.k, b.v);
    let n_docs = b.indptr.len() - 1;
    let nm = opts.merge_pairs.len();
    let pool = &POOL;
    // with a warm start every document has its own first pass: no shared selections per word
    let first = opts.top_l.filter(|&l| l < k && b.init.is_none()).map(|l| FirstPass::build(&b, l));
    let part =
        tree_reduce(n_docs, leaf_docs(n_docs), &|d0, d1| run_leaf(&b, opts, first.as_ref(), d0, d1, pool), &|x, y| combine(x, y, k, pool));
    drop(first);
    let Some(mut part) = part else {
        return Ok(DocTopicOutput {
            n_docs: 0,
            n: Array1::zeros(k),
            s: Array2::zeros((k, v)),
            h: Array1::zeros(k),
            p: Array1::zeros(k),
            p_rem: 0.0,
            q0: 0.0,
            q: Array1::zeros(k),
            q_rem: 0.0,
            doc_usage: Array1::zeros(k),
            merge_h: Array1::zeros(nm),
            merge_p: Array1::zeros(nm),
            merge_q: Array1::zeros(nm),
            doc_topic: opts.return_doc_topic.then(|| Array2::zeros((0, k))),
            n_iter: 0,
            n_type_passes: 0,
            restarts_tried: 0,
            restarts_accepted: 0,
        });
    };
    if !part.words.is_empty() {
        // the dense entropy's `Σ_dv c_dv r_dvj ln E_vj` part (`run_leaf`): `S` of the batch's
        // words times the table's logarithms, a logarithm per distinct word and topic instead
        // of per token and topic; fixed chunks summed in order (the same bits for any threads)
        let (words, rows, tab) = (&part.words, &part.s_rows, b.tab);
        let chunk = |c: usize| {
            let mut acc = vec![0.0; k];
            for i in c * ENTROPY_CHUNK..((c + 1) * ENTROPY_CHUNK).min(words.len()) {
                let w = words[i] as usize;
                let (srow, trow) = (&rows[i * k..(i + 1) * k], &tab[w * k..(w + 1) * k]);
                for j in 0..k {
                    // a zero entry of the table has no responsibility (or, in a row no topic
                    // emits, its entropy was added directly)
                    if srow[j] > 0.0 && trow[j] > 0.0 {
                        acc[j] += srow[j] * trow[j].ln();
                    }
                }
            }
            acc
        };
        let parts: Vec<Vec<f64>> = (0..words.len().div_ceil(ENTROPY_CHUNK)).into_par_iter().map(chunk).collect();
        for acc in parts {
            for j in 0..k {
                part.h[j] -= acc[j];
            }
        }
    }
    let mut s = Array2::<f64>::zeros((k, v));
    for (&key, &x) in part.s_keys.iter().zip(&part.s_vals) {
        s[[(key & 0xffff_ffff) as usize, (key >> 32) as usize]] = x;
    }
    for (i, &w) in part.words.iter().enumerate() {
        let row = &part.s_rows[i * k..(i + 1) * k];
        for j in 0..k {
            s[[j, w as usize]] = row[j];
        }
    }
    pool.give(std::mem::take(&mut part.s_rows));
    pool.trim(POOL_KEEP_BYTES);
    let doc_topic = if opts.return_doc_topic {
        Some(Array2::from_shape_vec((n_docs, k), part.doc_topic).map_err(|e| Error::Numerical { what: e.to_string() })?)
    } else {
        None
    };
    let out = DocTopicOutput {
        n_docs: part.n_docs,
        n: Array1::from(part.n),
        s,
        h: Array1::from(part.h),
        p: Array1::from(part.p),
        p_rem: part.p_rem,
        q0: part.q0,
        q: Array1::from(part.q),
        q_rem: part.q_rem,
        doc_usage: Array1::from(part.usage),
        merge_h: Array1::from(part.mh),
        merge_p: Array1::from(part.mp),
        merge_q: Array1::from(part.mq),
        doc_topic,
        n_iter: part.ctr.iters,
        n_type_passes: part.ctr.passes,
        restarts_tried: part.ctr.tried,
        restarts_accepted: part.ctr.accepted,
    };
    if !out.q0.is_finite() || out.p.iter().chain(out.q.iter()).any(|x| !x.is_finite()) {
        return Err(Error::NonFinite { what: "document summaries P/Q (prior pseudocounts too small?)".into() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array;

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
        }
    }

    /// `collect_at_floor` (AVX octets and portable tail) against a plain filter `row_k e_k ≥
    /// floor`, in index order with the same bits, on weights with ties at the floor and zeros;
    /// it may refuse only when the entries at the floor do not fit.
    #[test]
    fn collect_at_floor_matches_a_filter() {
        let mut g = Lcg(11);
        for case in 0..3000 {
            let n = (g.next() * if case % 3 == 0 { 500.0 } else { 40.0 }) as usize;
            let levels = 1 + (g.next() * 5.0) as usize;
            let mut draw = |zero: f64| {
                let x = if case % 2 == 0 { (g.next() * levels as f64).floor() / levels as f64 } else { g.next() };
                if g.next() < zero {
                    0.0
                } else {
                    x
                }
            };
            let row: Vec<f64> = (0..n).map(|_| draw(0.1)).collect();
            let e: Vec<f64> = (0..n).map(|_| draw(0.5)).collect();
            let mut floor = 0.01 + g.next() * if case % 5 == 0 { 0.2 } else { 0.8 };
            if case % 4 == 0 && n > 0 {
                // a floor equal to some weights (ties must be kept)
                let k = (g.next() * n as f64) as usize;
                if row[k] * e[k] > 0.0 {
                    floor = row[k] * e[k];
                }
            }
            let mut col = Collected { c: 3, ..Collected::default() }; // cleared by the call
            let ok = collect_at_floor(&row, &e, floor, &mut col);
            let want: Vec<(u32, u64)> = (0..n).filter(|&k| row[k] * e[k] >= floor).map(|k| (k as u32, (row[k] * e[k]).to_bits())).collect();
            if !ok {
                // only when the entries at the floor do not fit
                assert!(want.len() > Collected::CAP - 8, "case {case}: {} entries", want.len());
                continue;
            }
            let got: Vec<(u32, u64)> = (0..col.c).map(|t| (col.ids[t], col.w[t].to_bits())).collect();
            assert_eq!(got, want, "case {case} n {n}");
            // the 256-bit body too (the dispatch above takes the 512-bit one where it can), on
            // the whole octets
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx") {
                let whole = n - n % 8;
                let mut col = Collected::default();
                // SAFETY: AVX is present (checked just above); `whole ≤ n`.
                if unsafe { collect_at_floor_avx(&row[..whole], &e[..whole], floor, &mut col) } {
                    let got: Vec<(u32, u64)> = (0..col.c).map(|t| (col.ids[t], col.w[t].to_bits())).collect();
                    let want: Vec<(u32, u64)> = want.iter().copied().filter(|p| (p.0 as usize) < whole).collect();
                    assert_eq!(got, want, "case {case} n {n} (AVX)");
                }
            }
        }
        // nearly full: `CAP - 3` entries pass, then whole octets of which none passes (the
        // 512-bit body stores whole registers into the slack past `CAP`), or one more does
        for extra in [0, 1] {
            let n = Collected::CAP + 24;
            let row: Vec<f64> = (0..n).map(|k| if k < Collected::CAP - 3 || (extra == 1 && k == n - 2) { 1.0 } else { 0.5 }).collect();
            let e = vec![1.0; n];
            let mut col = Collected::default();
            let ok = collect_at_floor(&row, &e, 0.75, &mut col);
            assert_eq!(ok, extra == 0, "extra {extra}");
            if ok {
                assert_eq!(col.c, Collected::CAP - 3);
                assert!((0..col.c).all(|t| col.ids[t] == t as u32 && col.w[t] == 1.0));
            }
        }
    }

    /// The active-set collect (the dispatched one and the one without vectors) keeps exactly
    /// the entries at or above the floor, in the order of the active set, or reports an
    /// overflow only when more than `CAP - 8` pass.
    #[test]
    fn collect_active_matches_a_filter() {
        let mut g = Lcg(5);
        for case in 0..3000 {
            let k = 1 + (g.next() * if case % 3 == 0 { 600.0 } else { 60.0 }) as usize;
            let row: Vec<f64> = (0..k).map(|_| if g.next() < 0.1 { 0.0 } else { (g.next() * 4.0).floor() / 4.0 }).collect();
            // a random subset of the topics, ascending or not
            let mut act: Vec<u32> = (0..k as u32).filter(|_| g.next() < 0.7).collect();
            if case % 2 == 1 {
                act.reverse();
            }
            let ea: Vec<f64> = act.iter().map(|_| if g.next() < 0.3 { 0.0 } else { g.next() }).collect();
            let floor = if case % 4 == 0 && !act.is_empty() { row[act[0] as usize] * ea[0] } else { 0.01 + g.next() * 0.5 };
            let want: Vec<(u32, u64)> = act
                .iter()
                .zip(&ea)
                .filter(|&(&j, &e)| row[j as usize] * e >= floor)
                .map(|(&j, &e)| (j, (row[j as usize] * e).to_bits()))
                .collect();
            type Collect = fn(&[f64], &[u32], &[f64], f64, &mut Collected) -> bool;
            for (name, f) in [("dispatched", collect_active as Collect), ("scalar", collect_active_scalar as Collect)] {
                let mut col = Collected { c: 5, ..Collected::default() };
                if f(&row, &act, &ea, floor, &mut col) {
                    assert!(col.c <= Collected::CAP, "case {case} {name}: {} entries", col.c);
                    let got: Vec<(u32, u64)> = (0..col.c).map(|t| (col.ids[t], col.w[t].to_bits())).collect();
                    assert_eq!(got, want, "case {case} {name}");
                } else {
                    assert!(want.len() > Collected::CAP - 8, "case {case} {name}: {} entries", want.len());
                }
            }
        }
    }

    /// `Collected::take` (copy, ranking and threshold paths: up to `l`, up to 16, up to 128
    /// entries) against a sort by "larger weight first, then smaller index", on weights with many
    /// ties, the selection in ascending topic order.
    #[test]
    fn take_matches_a_sort() {
        let mut g = Lcg(5);
        for case in 0..4000 {
            let l = 1 + (g.next() * 12.0) as usize;
            let c = (g.next() * if case % 2 == 0 { 24.0 } else { Collected::CAP as f64 }) as usize;
            let levels = 1 + (g.next() * 6.0) as usize;
            let mut col = Collected::default();
            let mut id = 0u32;
            for _ in 0..c {
                id += 1 + (g.next() * 3.0) as u32;
                let x = if case % 3 == 0 { g.next() } else { 0.1 + (g.next() * levels as f64).floor() };
                col.push(id, x, true);
            }
            let (mut ix, mut vl) = (vec![0u32; l], vec![0.0; l]);
            let m = col.take(l, &mut ix, &mut vl);
            let mut want: Vec<(u32, f64)> = (0..c).map(|t| (col.ids[t], col.w[t])).collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            want.truncate(l);
            want.sort_by_key(|p| p.0);
            let got: Vec<(u32, f64)> = (0..m).map(|t| (ix[t], vl[t])).collect();
            assert_eq!(got, want, "case {case}: l {l}, c {c}");
        }
    }

    /// `scan_top` (plain, block-floor and collected paths) against a sort by "larger weight
    /// first, then smaller index", on weights with many ties (a few distinct values and zeros).
    #[test]
    fn scan_top_matches_a_sort() {
        let mut g = Lcg(7);
        for case in 0..3000 {
            let n = 1 + (g.next() * if case % 3 == 0 { 400.0 } else { 70.0 }) as usize;
            let l = 1 + (g.next() * SCAN_MAX_L as f64) as usize;
            let levels = 1 + (g.next() * 6.0) as usize;
            let ids: Vec<u32> = (0..n as u32).map(|t| 3 * t + 1).collect();
            let w: Vec<f64> =
                (0..n).map(|_| if case % 2 == 0 { (g.next() * levels as f64).floor() / levels as f64 } else { g.next() }).collect();
            let (mut ix, mut vl) = (vec![0u32; l], vec![0.0; l]);
            let m = scan_top(&ids, &w, l, &mut ix, &mut vl, &mut Collected::default());
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| w[b].total_cmp(&w[a]).then(a.cmp(&b)));
            let mut want: Vec<usize> = order[..l.min(n)].to_vec();
            want.sort_unstable();
            assert_eq!(m, want.len(), "case {case}");
            for (t, &p) in want.iter().enumerate() {
                assert_eq!((ix[t], vl[t].to_bits()), (ids[p], w[p].to_bits()), "case {case} n {n} l {l}");
            }
        }
    }

    /// Random corpus: (indptr, indices, data, table V×K, a).
    fn corpus(d: usize, v: usize, k: usize, seed: u64) -> Corpus {
        corpus_of(d, v, k, seed, None, 4.0)
    }

    /// Random corpus with `per_doc` entries per document (None: 0–7 at random) and counts
    /// `1 + ⌊span · U⌋`.
    fn corpus_of(d: usize, v: usize, k: usize, seed: u64, per_doc: Option<usize>, span: f64) -> Corpus {
        let mut g = Lcg(seed);
        let mut indptr = vec![0i64];
        let (mut ind, mut dat) = (Vec::new(), Vec::new());
        for _ in 0..d {
            let u = per_doc.unwrap_or_else(|| (g.next() * 8.0) as usize);
            for _ in 0..u {
                ind.push((g.next() * v as f64) as i64);
                dat.push(1.0 + (g.next() * span).floor());
            }
            indptr.push(ind.len() as i64);
        }
        let mut lam = Array2::<f64>::zeros((k, v));
        lam.mapv_inplace(|_| 0.05 + 3.0 * g.next() * g.next());
        let tab = topic_word_table(lam.view(), None).unwrap();
        let a = Array::from_iter((0..k).map(|_| 0.02 + g.next()));
        (indptr, ind, dat, tab, a)
    }

    type Corpus = (Vec<i64>, Vec<i64>, Vec<f64>, Array2<f64>, Array1<f64>);

    fn run(c: &Corpus, opts: &DocTopicOptions) -> DocTopicOutput {
        run_init(c, None, opts).unwrap()
    }

    fn run_init(c: &Corpus, init: Option<ArrayView2<f64>>, opts: &DocTopicOptions) -> Result<DocTopicOutput> {
        let (ip, ind, dat, tab, a) = c;
        doc_topic_step_init(
            ArrayView1::from(ip.as_slice()),
            ArrayView1::from(ind.as_slice()),
            ArrayView1::from(dat.as_slice()),
            tab.view(),
            a.view(),
            Some(0.3),
            init,
            opts,
        )
    }

    #[test]
    fn count_identities() {
        let c = corpus(40, 30, 5, 1);
        let opts = DocTopicOptions { return_doc_topic: true, ..Default::default() };
        let out = run(&c, &opts);
        let total: f64 = c.2.iter().sum();
        assert!((out.n.sum() - total).abs() < 1e-9);
        for k in 0..5 {
            assert!((out.s.row(k).sum() - out.n[k]).abs() < 1e-9);
        }
        let dt = out.doc_topic.unwrap();
        for d in 0..40 {
            let td: f64 = c.2[c.0[d] as usize..c.0[d + 1] as usize].iter().sum();
            assert!((dt.row(d).sum() - td).abs() < 1e-9);
        }
        assert!(out.h.iter().all(|&h| h >= 0.0));
    }

    /// A document's first pass read from the batch's per-word first pass is the one it would
    /// compute itself: the whole document step (supports, values and sums of every row, the
    /// counts, the restarts after it) has the same bits with and without it.
    #[test]
    fn first_pass_per_word_matches_the_documents_own() {
        let (d, k) = (60, 20);
        let c = corpus(d, 40, k, 7);
        let (ip, ind, dat, tab, a) = &c;
        let (ipv, indv, datv) = (ArrayView1::from(ip.as_slice()), ArrayView1::from(ind.as_slice()), ArrayView1::from(dat.as_slice()));
        let (tv, av) = (tab.view(), a.view());
        let words: Vec<usize> = ind.iter().map(|&w| w as usize).collect();
        for (l, max_iter) in [(1, 100), (2, 100), (3, 1), (8, 100), (16, 3)] {
            let opts = DocTopicOptions { top_l: Some(l), max_iter, ..Default::default() };
            let b = validate(&ipv, &indv, &datv, &tv, &av, Some(0.3), &opts).unwrap();
            let fp = FirstPass::build(&b, l);
            for doc in 0..d {
                let (s0, s1) = (ip[doc] as usize, ip[doc + 1] as usize);
                let ctx = DocCtx { tab: b.tab, k, words: &words[s0..s1], counts: &dat[s0..s1], a: b.a, pk: &b.pk, a_rem: b.a_rem };
                let (mut c1, mut p1, mut c2, mut p2) = (Sparse::default(), Sparse::default(), Sparse::default(), Sparse::default());
                let (mut tmp, mut cand, mut ctr) = (vec![0.0; k], Vec::new(), Counters::default());
                sparse_doc(&ctx, &opts, opts.restarts, l, None, None, &mut c1, &mut p1, &mut tmp, &mut cand, &mut ctr);
                sparse_doc(
                    &ctx,
                    &opts,
                    opts.restarts,
                    l,
                    Some((&fp, &words[s0..s1])),
                    None,
                    &mut c2,
                    &mut p2,
                    &mut tmp,
                    &mut cand,
                    &mut ctr,
                );
                let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&c1.n), bits(&c2.n), "l {l} doc {doc}");
                assert_eq!(c1.objective(&ctx).to_bits(), c2.objective(&ctx).to_bits(), "l {l} doc {doc}");
                for u in 0..s1 - s0 {
                    let m = c1.cnt[u];
                    assert_eq!(m, c2.cnt[u]);
                    assert_eq!(c1.idx[u * l..u * l + m], c2.idx[u * l..u * l + m]);
                    assert_eq!(bits(&c1.val[u * l..u * l + m]), bits(&c2.val[u * l..u * l + m]));
                    assert_eq!(c1.s[u].to_bits(), c2.s[u].to_bits());
                }
            }
        }
    }

    /// The fixed-size reweighting of a full support against a written-out loop: values, sum,
    /// counts and the verdict, with unusable sums (all table entries 0) among the rows.
    #[test]
    fn reweight_scatter_matches_the_general_loop() {
        fn check<const N: usize>(g: &mut Lcg) {
            let k = 40;
            let e: Vec<f64> = (0..k).map(|_| g.next() * g.next()).collect();
            let mut n1: Vec<f64> = (0..k).map(|_| g.next()).collect();
            let mut n2 = n1.clone();
            for row in 0..50 {
                let mut ix: Vec<u32> = Vec::new();
                while ix.len() < N {
                    let j = (g.next() * k as f64) as u32;
                    if !ix.contains(&j) {
                        ix.push(j);
                    }
                }
                let zero = row % 7 == 3;
                let tv: Vec<f64> = (0..N).map(|_| if zero { 0.0 } else { g.next() * 3.0 }).collect();
                let c = 1.0 + (g.next() * 5.0).floor();
                // the general loop
                let mut v1 = vec![0.0; N];
                let mut s = 0.0;
                for t in 0..N {
                    v1[t] = tv[t] * e[ix[t] as usize];
                    s += v1[t];
                }
                let ok1 = s > S_MIN && s.is_finite();
                if ok1 {
                    let inv = 1.0 / s;
                    v1.iter_mut().for_each(|x| *x *= inv);
                    for t in 0..N {
                        n1[ix[t] as usize] += c * v1[t];
                    }
                }
                let (mut v2, mut s2) = (vec![f64::NAN; N], -1.0);
                let ok2 = reweight_scatter::<N>(&ix, &mut v2, &tv, &e, &mut n2, c, &mut s2);
                assert_eq!(ok1, ok2);
                assert_eq!(v1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), v2.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
                if ok1 {
                    assert_eq!(s.to_bits(), s2.to_bits());
                }
                assert_eq!(n1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), n2.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            }
        }
        let mut g = Lcg(23);
        check::<2>(&mut g);
        check::<4>(&mut g);
        check::<8>(&mut g);
        check::<16>(&mut g);
    }

    /// The paired dense sweep against the row-by-row loop (`dot`, then `axpy` for a usable
    /// sum): the same sums, the same accumulator bits and the same verdict, for K = 1 … 19,
    /// odd and even numbers of rows, with unusable rows (all-zero table rows) among them.
    /// A dispatched function and each of its AVX and AVX-512 instances this CPU can run, by name,
    /// as function pointers of type `$ty`.
    macro_rules! instances {
        ($ty:ty, $dispatched:expr, $avx:expr, $avx512:expr) => {{
            #[allow(unused_mut)]
            let mut v: Vec<(&str, $ty)> = vec![("dispatched", $dispatched as $ty)];
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx") {
                    v.push(("avx", $avx as $ty));
                }
                if std::is_x86_feature_detected!("avx512f") {
                    v.push(("avx512", $avx512 as $ty));
                }
            }
            v
        }};
    }

    #[test]
    fn paired_dense_sweep_matches_row_by_row() {
        let mut g = Lcg(31);
        for k in (1..20).chain([37, 64, 101]) {
            let v = 12;
            let mut tab: Vec<f64> = (0..v * k).map(|_| g.next() * 2.0).collect();
            tab[3 * k..4 * k].fill(0.0);
            tab[7 * k..8 * k].fill(0.0);
            let e: Vec<f64> = (0..k).map(|_| g.next()).collect();
            for rows in 0..9 {
                let words: Vec<usize> = (0..rows).map(|_| (g.next() * v as f64) as usize).collect();
                let counts: Vec<f64> = (0..rows).map(|_| 1.0 + (g.next() * 3.0).floor()).collect();
                let (mut s1, mut acc1, mut fb1) = (vec![0.0; rows], vec![0.5; k], false);
                for (u, &w) in words.iter().enumerate() {
                    let row = &tab[w * k..(w + 1) * k];
                    s1[u] = dot(row, &e);
                    if s1[u] > S_MIN && s1[u].is_finite() {
                        axpy(&mut acc1, counts[u] / s1[u], row);
                    } else {
                        fb1 = true;
                    }
                }
                let bits = |x: &[f64]| x.iter().map(|y| y.to_bits()).collect::<Vec<_>>();
                // the dispatched sweep, and each vector width this CPU has
                type Sweep = unsafe fn(&[f64], usize, &[usize], &[f64], &[f64], &mut [f64], &mut [f64]) -> bool;
                for (name, f) in instances!(Sweep, dense_sweep, dense_sweep_avx, dense_sweep_avx512) {
                    let (mut s2, mut acc2) = (vec![0.0; rows], vec![0.5; k]);
                    // SAFETY: each instance is listed only when the CPU has its features.
                    let fb2 = unsafe { f(&tab, k, &words, &counts, &e, &mut s2, &mut acc2) };
                    assert_eq!(bits(&s1), bits(&s2), "k {k} rows {rows} {name}");
                    assert_eq!(bits(&acc1), bits(&acc2), "k {k} rows {rows} {name}");
                    assert_eq!(fb1, fb2, "{name}");
                }
            }
        }
    }

    /// The dense row's responsibilities and contributions, dispatched to the widest vectors the
    /// machine has, are bit for bit the element-by-element formulas.
    #[test]
    fn dense_row_sums_match_the_plain_formulas() {
        let mut g = Lcg(43);
        for k in (1..20).chain([37, 64, 101]) {
            let row: Vec<f64> = (0..k).map(|_| if g.next() < 0.2 { 0.0 } else { g.next() * 2.0 }).collect();
            let e: Vec<f64> = (0..k).map(|_| g.next()).collect();
            let (inv, c, cl) = (1.0 / (0.1 + g.next()), 1.0 + (g.next() * 4.0).floor(), g.next() - 0.5);
            let start: Vec<f64> = (0..k).map(|_| g.next()).collect();
            type Sums = unsafe fn(&[f64], &[f64], f64, f64, f64, &mut [f64], &mut [f64], &mut [f64], &mut [f64]);
            for (name, f) in instances!(Sums, dense_row_sums, dense_row_sums_avx, dense_row_sums_avx512) {
                let (mut out, mut srow, mut nn, mut lw) = (vec![0.0; k], start.clone(), start.clone(), start.clone());
                // SAFETY: each instance is listed only when the CPU has its features.
                unsafe { f(&row, &e, inv, c, cl, &mut out, &mut srow, &mut nn, &mut lw) };
                for j in 0..k {
                    let r = row[j] * e[j] * inv;
                    assert_eq!(out[j].to_bits(), r.to_bits(), "k {k} j {j} {name}");
                    assert_eq!(srow[j].to_bits(), (start[j] + c * r).to_bits(), "{name}");
                    assert_eq!(nn[j].to_bits(), (start[j] + c * r).to_bits(), "{name}");
                    assert_eq!(lw[j].to_bits(), (start[j] + cl * r).to_bits(), "{name}");
                }
            }
        }
    }

    #[test]
    fn thread_count_does_not_change_bits() {
        let c = corpus(150, 40, 7, 2);
        let opts = DocTopicOptions { merge_pairs: vec![(0, 3), (5, 1)], top_l: Some(3), ..Default::default() };
        let pool = |t: usize| rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
        let one = pool(1).install(|| run(&c, &opts));
        let three = pool(3).install(|| run(&c, &opts));
        assert_eq!(one.s, three.s);
        assert_eq!(one.q0.to_bits(), three.q0.to_bits());
        assert_eq!(one.h, three.h);
        assert_eq!(one.merge_q, three.merge_q);
    }

    /// The buffers kept between calls ([`POOL`]) are large enough to be reused by the next
    /// call, of another shape: each call's summaries are the same bits whatever ran before.
    #[test]
    fn buffers_kept_between_calls_do_not_change_results() {
        let (x, y) = (corpus_of(400, 4000, 40, 1, Some(150), 3.0), corpus_of(300, 6000, 24, 2, Some(200), 3.0));
        let opts = DocTopicOptions { max_iter: 3, ..Default::default() };
        let fresh_x = run(&x, &opts);
        assert!(POOL.0.lock().unwrap().iter().any(|b| b.capacity() >= 1 << 16), "large buffers are kept");
        let fresh_y = run(&y, &opts);
        for (c, want) in [(&x, &fresh_x), (&y, &fresh_y), (&x, &fresh_x)] {
            let got = run(c, &opts);
            assert_eq!(got.s, want.s);
            assert_eq!(got.h, want.h);
            assert_eq!(got.n, want.n);
            assert_eq!(got.q0.to_bits(), want.q0.to_bits());
        }
    }

    /// A warm start from the step's own solution converges in a fraction of the cold passes to
    /// the same counts; a warm start from zero counts is another first pass than the cold one
    /// (weights `exp ψ(a_k)`, not `a_k`); a wrong shape is refused. L-sparse steps also converge
    /// in fewer passes, to nearly the same counts (the cold run's final supports, reweighted
    /// since its last full reselection, need not be a fixed point of a full reselection).
    #[test]
    fn warm_start_from_the_solution_takes_fewer_passes() {
        let c = corpus(60, 30, 5, 4);
        let opts = DocTopicOptions { tol: 1e-10, restarts: false, return_doc_topic: true, ..Default::default() };
        let step = |init: Option<ArrayView2<f64>>, opts: &DocTopicOptions| run_init(&c, init, opts);
        let cold = step(None, &opts).unwrap();
        let dt = cold.doc_topic.clone().unwrap();
        let warm = step(Some(dt.view()), &opts).unwrap();
        assert!(3 * warm.n_type_passes < cold.n_type_passes, "{} vs {}", warm.n_type_passes, cold.n_type_passes);
        for j in 0..5 {
            assert!((warm.n[j] - cold.n[j]).abs() < 1e-6 * (1.0 + cold.n[j]), "topic {j}");
        }
        let zeros = Array2::<f64>::zeros(dt.dim());
        let from_zero = step(Some(zeros.view()), &DocTopicOptions { max_iter: 0, ..opts.clone() }).unwrap();
        let first = step(None, &DocTopicOptions { max_iter: 0, ..opts.clone() }).unwrap();
        assert!(from_zero.n.iter().zip(first.n.iter()).any(|(x, y)| (x - y).abs() > 1e-9));
        assert!(step(Some(dt.slice(ndarray::s![..10, ..])), &opts).is_err());
        // L-sparse: the warm first pass selects every row's support from the given counts
        let sparse = DocTopicOptions { top_l: Some(2), ..opts.clone() };
        let (cold, dt) = {
            let c = step(None, &sparse).unwrap();
            let dt = c.doc_topic.clone().unwrap();
            (c, dt)
        };
        let warm = step(Some(dt.view()), &sparse).unwrap();
        assert!(2 * warm.n_type_passes < cold.n_type_passes, "{} vs {}", warm.n_type_passes, cold.n_type_passes);
        for j in 0..5 {
            assert!((warm.n[j] - cold.n[j]).abs() < 1e-3 * (1.0 + cold.n[j]), "L-sparse, topic {j}");
        }
    }

    /// `cold_mask` starts the documents it marks from the prior despite the warm start: every
    /// document marked gives the cold step's summaries, none marked the warm step's, and a
    /// mixed mask gives per document the cold or the warm counts (dense and L-sparse, with
    /// restarts); a mask of the wrong length is refused.
    #[test]
    fn cold_mask_starts_the_marked_documents_from_the_prior() {
        let c = corpus(40, 30, 6, 5);
        for top_l in [None, Some(2)] {
            let opts = DocTopicOptions { top_l, return_doc_topic: true, ..Default::default() };
            let cold = run_init(&c, None, &opts).unwrap();
            let init = Array2::from_shape_fn((40, 6), |(d, j)| ((d * 7 + j * 3) % 5) as f64);
            let warm = run_init(&c, Some(init.view()), &opts).unwrap();
            let with = |m: Vec<bool>| run_init(&c, Some(init.view()), &DocTopicOptions { cold_mask: Some(m), ..opts.clone() }).unwrap();
            let all = with(vec![true; 40]);
            assert_eq!(all.doc_topic, cold.doc_topic, "{top_l:?}");
            assert_eq!(all.h, cold.h);
            assert_eq!(with(vec![false; 40]).doc_topic, warm.doc_topic);
            let mask: Vec<bool> = (0..40).map(|d| d % 3 == 0).collect();
            let mixed = with(mask.clone()).doc_topic.unwrap();
            let (dc, dw) = (cold.doc_topic.as_ref().unwrap(), warm.doc_topic.as_ref().unwrap());
            assert!((0..40).any(|d| dc.row(d) != dw.row(d)), "cold and warm differ somewhere");
            for (d, &m) in mask.iter().enumerate() {
                assert_eq!(mixed.row(d), if m { dc.row(d) } else { dw.row(d) }, "document {d}, {top_l:?}");
            }
        }
        let opts = DocTopicOptions { cold_mask: Some(vec![true; 39]), ..Default::default() };
        assert!(run_init(&c, None, &opts).is_err());
    }

    #[test]
    fn sparse_with_all_topics_equals_dense() {
        let c = corpus(20, 25, 6, 3);
        let (ip, ind, dat, tab, a) = &c;
        let opts = DocTopicOptions { sparse_eps: 0.0, max_iter: 12, tol: 0.0, restarts: false, ..Default::default() };
        let words: Vec<usize> = ind.iter().map(|&w| w as usize).collect();
        for d in 0..20 {
            let (s0, s1) = (ip[d] as usize, ip[d + 1] as usize);
            let ctx = DocCtx {
                tab: tab.as_slice().unwrap(),
                k: 6,
                words: &words[s0..s1],
                counts: &dat[s0..s1],
                a: a.as_slice().unwrap(),
                pk: &prior_terms(a.as_slice().unwrap()),
                a_rem: None,
            };
            let (mut c1, mut p1, mut c2, mut p2) = (Dense::default(), Dense::default(), Sparse::default(), Sparse::default());
            let mut ctr = Counters::default();
            let (mut acc, mut tmp, mut cand) = (vec![0.0; 6], vec![0.0; 6], Vec::new());
            dense_doc(&ctx, &opts, opts.restarts, None, &mut c1, &mut p1, &mut acc, &mut tmp, &mut ctr);
            sparse_doc(&ctx, &opts, opts.restarts, 6, None, None, &mut c2, &mut p2, &mut tmp, &mut cand, &mut ctr);
            for j in 0..6 {
                assert!((c1.n[j] - c2.n[j]).abs() < 1e-12 * (1.0 + c1.n[j]), "doc {d} topic {j}");
            }
        }
    }

    #[test]
    fn near_prior_digamma_and_gammaln_match_the_direct_functions() {
        let a = [1e-300, 1e-160, 1e-150, 1e-3, 0.05, 1.4616321449683622, 3.0, 250.0];
        let pk = prior_terms(&a);
        let ctx = DocCtx { tab: &[], k: a.len(), words: &[], counts: &[], a: &a, pk: &pk, a_rem: None };
        for (j, &x) in a.iter().enumerate() {
            for f in [0.0, 1e-300, 1e-20, 1e-12, 3e-10, 1e-9, 1e-9 * (1.0 + 1e-12), 1e-6, 0.5, 2.0] {
                let n = f * x;
                let (want_psi, want_lg) = (digamma(n + x), gammaln(n + x));
                let (got_psi, got_lg) = (ctx.psi(j, n), ctx.lgamma(j, n));
                // at the direct functions' rounding: relative, or absolute where the value is
                // below 1 (near the digamma's root 1.4616 its terms of size ~3 cancel)
                assert!((got_psi - want_psi).abs() <= 2e-15 * want_psi.abs().max(1.0), "psi a={x} n={n}: {got_psi} vs {want_psi}");
                assert!((got_lg - want_lg).abs() <= 2e-15 * want_lg.abs().max(1.0), "lgamma a={x} n={n}: {got_lg} vs {want_lg}");
                assert!(got_psi.is_finite() && got_lg.is_finite());
            }
        }
        // the expansion is used where it applies, and not where the trigamma overflows
        assert!(pk[3].near > 0.0 && pk[0].near < 0.0);
        assert_eq!(ctx.lgamma(0, 0.0), gammaln(1e-300));
    }

    #[test]
    fn restarts_never_decrease_the_document_objective() {
        let c = corpus(60, 20, 8, 4);
        let (ip, ind, dat, tab, a) = &c;
        let words: Vec<usize> = ind.iter().map(|&w| w as usize).collect();
        let mut accepted = 0;
        for d in 0..60 {
            let (s0, s1) = (ip[d] as usize, ip[d + 1] as usize);
            let ctx = DocCtx {
                tab: tab.as_slice().unwrap(),
                k: 8,
                words: &words[s0..s1],
                counts: &dat[s0..s1],
                a: a.as_slice().unwrap(),
                pk: &prior_terms(a.as_slice().unwrap()),
                a_rem: Some(0.2),
            };
            let mut vals = Vec::new();
            for restarts in [false, true] {
                let opts = DocTopicOptions { restarts, ..Default::default() };
                let (mut cur, mut prop) = (Dense::default(), Dense::default());
                let mut ctr = Counters::default();
                let (mut acc, mut tmp) = (vec![0.0; 8], vec![0.0; 8]);
                dense_doc(&ctx, &opts, opts.restarts, None, &mut cur, &mut prop, &mut acc, &mut tmp, &mut ctr);
                accepted += ctr.accepted;
                vals.push(ctx.objective(&cur.n, &cur.p, cur.lse_sum(&ctx)));
            }
            assert!(vals[1] >= vals[0], "doc {d}: {} < {}", vals[1], vals[0]);
        }
        let _ = accepted;
    }

    /// With the prior given, entries next to it take the digamma's expansion: the table agrees
    /// with the plain one to the digamma's rounding (a wrong slope would be off by ~1e-9 at the
    /// threshold), entries far from the prior are bit for bit the same, and a prior of the
    /// wrong length or sign is an error.
    #[test]
    fn table_with_prior_matches_the_plain_table() {
        let mut g = Lcg(41);
        let (k, v) = (7, 60);
        let prior = Array1::from_iter((0..v).map(|_| 1e-3 + 2.0 * g.next()));
        let lam = Array2::from_shape_fn((k, v), |(j, w)| {
            let p = prior[w];
            match (j + w) % 5 {
                0 => p,
                1 => p + p * 1e-12,
                2 => p + p * 0.99e-9,
                3 => p + p * 1.01e-9,
                _ => p + 10.0 * g.next(),
            }
        });
        let plain = topic_word_table(lam.view(), None).unwrap();
        let fast = topic_word_table(lam.view(), Some(prior.view())).unwrap();
        for ((w, j), &x) in plain.indexed_iter() {
            let y = fast[[w, j]];
            assert!((x - y).abs() <= 1e-13 * x, "word {w} topic {j}: {x} vs {y}");
            if (lam[[j, w]] - prior[w]).abs() > 1e-9 * prior[w] {
                assert_eq!(x.to_bits(), y.to_bits(), "word {w} topic {j}: far from the prior");
            }
        }
        assert!(topic_word_table(lam.view(), Some(prior.slice(ndarray::s![..v - 1]))).is_err());
        let mut bad = prior.clone();
        bad[3] = -1.0;
        assert!(topic_word_table(lam.view(), Some(bad.view())).is_err());
    }

    #[test]
    fn bad_inputs_name_the_argument() {
        let c = corpus(3, 10, 2, 5);
        let (ip, ind, dat, tab, a) = &c;
        let opts = DocTopicOptions::default();
        let mut bad = ind.clone();
        if let Some(x) = bad.first_mut() {
            *x = 10;
        }
        let call = |ip: &[i64], ind: &[i64], dat: &[f64]| {
            doc_topic_step(ArrayView1::from(ip), ArrayView1::from(ind), ArrayView1::from(dat), tab.view(), a.view(), None, &opts)
        };
        if !ind.is_empty() {
            let e = call(ip, &bad, dat).unwrap_err();
            assert!(e.to_string().contains("indices"), "{e}");
        }
        let e = call(&[0, 2, 1, ip[3]], ind, dat).unwrap_err();
        assert!(e.to_string().contains("indptr"), "{e}");
        let mut neg = dat.clone();
        neg.push(-1.0);
        let mut ind2 = ind.clone();
        ind2.push(0);
        let e = call(&[0, ip[1], ip[2], ip[3] + 1], &ind2, &neg).unwrap_err();
        assert!(e.to_string().contains("data"), "{e}");
    }
}
