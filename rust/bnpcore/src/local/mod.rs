//! The fused local step (spec 01 §4.2): log weights `W_nk = E[log F(x_n|φ_k)] + E[ln π_k]`,
//! responsibilities `r_nk = exp(W_nk − lse_n)`, and their immediate reduction to additive
//! summaries — counts `N_k`, statistics `S_k`, entropies `H_k = −Σ r ln r` — plus everything
//! the proposal moves need from the same responsibilities (spec 01 §6):
//!
//! * merge pair entropies `H^merge_ab = −Σ_n (r_na + r_nb) ln(r_na + r_nb)`;
//! * restricted-step proposals (birth and delete): the mass `a_n = Σ_{k∈src} r_nk` is
//!   redistributed over destination clusters, `r'_nj = a_n softmax_j(W'_nj)`, and summarised;
//! * a responsibility column (birth subsample collection) and a co-occurrence vector
//!   `Σ_n r_nt r_nk` (choice of a delete's absorbing set).
//!
//! With `top_l = Some(L)`, `L < K`, responsibilities are L-sparse (spec 04 §1): per row the `L`
//! largest log weights are selected in linear time ([`top_l`]) and normalised over; every
//! output above is then computed from the sparse rows only (summaries by scatter-adding the
//! selected clusters, bucketed by cluster inside each tile; pair entropies, co-occurrences and
//! restricted steps as in spec 04 §3.2–§3.4). `L ≥ K` runs the dense kernel, so it reproduces
//! the dense result exactly. For the zero-mean Gaussian at large `K`, the sparse rows' candidate
//! clusters come from a single-precision GEMM with a rigorous error bound and their log weights
//! are recomputed in double precision ([`cand32`]): the same top `L`, about twice as fast.
//!
//! Work is organised for speed: every model's log-likelihood and statistic are linear in a
//! feature map `φ` ([`crate::obs::FeatureMap`]; the `vech` form for Gaussians), so per tile of
//! [`TILE_ROWS`] rows the local step builds `φ(X)` once, computes `W = φ(X) Wt` with one GEMM and
//! (dense) the summaries `Acc += Rᵀ φ(X)` with a second GEMM. Scratch buffers live per leaf.
//!
//! Rows are processed in fixed leaves ([`leaf_rows`], a function of `N` only) reduced by a
//! fixed tree ([`crate::parallel`]), so every output is bit-identical whatever the thread count.

mod cand32;
pub mod fwd_bwd;
pub mod top_l;

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis};

use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::obs::{LogLikTable, Obs, ObsModel};
use crate::parallel::{leaf_rows, tree_reduce, TILE_ROWS};
use crate::with_obs;
use top_l::{select_top_among, select_top_l, NONE};

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
    /// return column `c` of the responsibilities
    pub collect_col: Option<usize>,
    /// return `Σ_n r_nc r_nk` for this `c`
    pub cooccur_col: Option<usize>,
    /// return the responsibilities (dense `N × K`, or with `top_l` the `N × L` index and value
    /// arrays)
    pub return_resp: bool,
    /// keep at most this many clusters per row (L-sparse responsibilities); `None` is dense
    pub top_l: Option<usize>,
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
    /// merge pair entropies, one per pair
    pub pair_h: Array1<f64>,
    /// proposal summaries, one per proposal
    pub proposals: Vec<ProposalStats>,
    /// dense responsibilities if requested (without `top_l`)
    pub resp: Option<Array2<f64>>,
    /// with `top_l` and `return_resp`: cluster indices `N × min(L, K)`, ascending within a row,
    /// padded with [`top_l::NONE`]
    pub resp_idx: Option<Array2<u32>>,
    /// with `top_l` and `return_resp`: responsibilities `N × min(L, K)` matching `resp_idx`
    /// (0 in padding slots)
    pub resp_val: Option<Array2<f64>>,
    /// responsibility column if requested
    pub col: Option<Array1<f64>>,
    /// co-occurrence vector if requested
    pub cooccur: Option<Array1<f64>>,
    /// with `top_l`, when the candidates came from the single-precision GEMM ([`cand32`]): how
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
}

impl Partial {
    fn zeros(k: usize, f: usize, n_pairs: usize, prop_lens: &[usize], cooccur: bool) -> Partial {
        Partial {
            n: Array1::zeros(k),
            acc: Array2::zeros((k, f)),
            h: Array1::zeros(k),
            lse: 0.0,
            pair_h: vec![0.0; n_pairs],
            props: prop_lens
                .iter()
                .map(|&j| PropPartial { n: Array1::zeros(j), acc: Array2::zeros((j, f)), h: Array1::zeros(j) })
                .collect(),
            cooccur: if cooccur { Some(Array1::zeros(k)) } else { None },
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
    let mut tot = 0.0;
    for (o, &v) in out.iter_mut().zip(w) {
        let t = v - m;
        let e = if t > EXP_CUTOFF { t.exp() } else { 0.0 };
        *o = e;
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
    }
    for (name, c) in [("collect_col", opts.collect_col), ("cooccur_col", opts.cooccur_col)] {
        if let Some(c) = c {
            if c >= k {
                return Err(Error::param(name, format!("column {c} out of range for {k} clusters")));
            }
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

/// Per-leaf scratch buffers, reused from tile to tile.
struct Scratch {
    phi: Vec<f64>,
    sphi: Vec<f64>,
    w: Array2<f64>,
    resp: Array2<f64>,
    lse: Vec<f64>,
    dest_w: Vec<Array2<f64>>,
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

/// Local step + summaries of one batch for a concrete model and a prepared table.
///
/// # Errors
/// Shape/finiteness/option errors (checked before any work).
pub fn local_step<M: ObsModel>(
    model: &M,
    x: ArrayView2<f64>,
    table: &LogLikTable,
    e_log_pi: ArrayView1<f64>,
    opts: &LocalOptions,
) -> Result<LocalOutput> {
    model.check_data(x, "X")?;
    let n_rows = x.nrows();
    let k = table.n_clusters();
    validate(k, n_rows, e_log_pi, opts)?;
    // features of the log weights (the table's) and of the summaries (the model's): the same map
    // up to the centre of the full-covariance Gaussian's tables
    let feat = table.feature_map().clone();
    let sfeat = model.feature_map();
    let same_feat = sfeat == feat;
    let f_dim = sfeat.dim(x.ncols());
    for p in &opts.proposals {
        if let Dest::Fresh { table: t, .. } = &p.dest {
            if *t.feature_map() != feat {
                return Err(Error::param("proposals", "fresh clusters must come from the same observation model"));
            }
        }
    }
    let sparse_l = opts.top_l.filter(|&l| l < k);
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
    // dense restricted steps evaluate the fresh clusters row by row
    let fresh: Vec<Option<FreshRows>> = opts
        .proposals
        .iter()
        .map(|p| match (&p.dest, opts.top_l) {
            (Dest::Fresh { table, e_log_pi }, None) => Some(FreshRows::new(table, e_log_pi)),
            _ => None,
        })
        .collect();
    // L-sparse zero-mean Gaussian rows at large K: candidates from an f32 GEMM, exact selection
    let c32 = sparse_l.and_then(|l| cand32::Cand32::prepare(table, &elp, n_rows, l));
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
    let mut col_out = opts.collect_col.map(|_| Array1::<f64>::zeros(n_rows));
    // with top_l >= K the dense rows are the sparse values (indices 0..K filled in below)
    let resp_writer =
        if sparse_l.is_none() && out_l.is_some() { RowWriter::new(val_out.as_mut(), k) } else { RowWriter::new(resp_out.as_mut(), k) };
    let idx_writer = RowWriter::new(idx_out.as_mut(), out_l.unwrap_or(0));
    let val_writer = RowWriter::new(val_out.as_mut(), out_l.unwrap_or(0));
    let col_ptr = col_out.as_mut().map_or(std::ptr::null_mut(), |c| c.as_mut_ptr());
    let col_writer = RowWriter { ptr: col_ptr, ncols: 1 };

    let leaf = |a: usize, b: usize| -> Partial {
        let mut part = Partial::zeros(k, f_dim, opts.merge_pairs.len(), &prop_lens, opts.cooccur_col.is_some());
        let tile = TILE_ROWS.min(b - a);
        let mut sc = Scratch {
            phi: Vec::new(),
            sphi: Vec::new(),
            w: Array2::zeros((if c32.is_some() { 0 } else { tile }, k)),
            resp: Array2::zeros((if sparse_l.is_some() { 0 } else { tile }, k)),
            lse: vec![0.0; tile],
            dest_w: prop_lens.iter().map(|&j| Array2::zeros((if opts.top_l.is_some() { tile } else { 0 }, j))).collect(),
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
            let t1 = (t0 + TILE_ROWS).min(b);
            let rows = t1 - t0;
            let xt = x.slice(s![t0..t1, ..]);
            let mut phi_buf = std::mem::take(&mut sc.phi);
            let mut sphi_buf = std::mem::take(&mut sc.sphi);
            {
                // (the f32 candidate path builds its own features; f64 ones only for proposals)
                let phi = if c32.is_some() && opts.proposals.is_empty() {
                    ArrayView2::from_shape((0, 0), &[][..]).expect("empty features")
                } else {
                    feat.apply(xt, &mut phi_buf)
                };
                if let (Some(c), Some(l)) = (&c32, sparse_l) {
                    c.tile(xt, l, &extra_cols, &mut sc.c32);
                    n_cand.fetch_add(sc.c32.idx.len() as u64, std::sync::atomic::Ordering::Relaxed);
                } else {
                    let mut w = sc.w.slice_mut(s![0..rows, ..]);
                    table.eval_features(phi, w.view_mut());
                    for mut row in w.rows_mut() {
                        let r = row.as_slice_mut().expect("contiguous");
                        r.iter_mut().zip(&elp).for_each(|(o, &e)| *o += e);
                    }
                }
                // with top_l the restricted steps need the fresh clusters' weights of every row;
                // dense rows evaluate them in dense_tile, only where the source mass matters
                if opts.top_l.is_some() {
                    for (pi, p) in opts.proposals.iter().enumerate() {
                        if let Dest::Fresh { table: t, e_log_pi: fe } = &p.dest {
                            let mut dw = sc.dest_w[pi].slice_mut(s![0..rows, ..]);
                            t.eval_features(phi, dw.view_mut());
                            dw += fe;
                        }
                    }
                }
                let wt = |n: usize| opts.weights.map_or(1.0, |wv| wv[t0 + n]);
                let tphi = phi;
                let phi = if same_feat || (defer_vech && opts.proposals.is_empty()) { phi } else { sfeat.apply(xt, &mut sphi_buf) };
                match sparse_l {
                    None => dense_tile(model, opts, &fresh, &tphi, &phi, t0, rows, &mut sc, &mut part, &wt, &resp_writer, &col_writer),
                    Some(l) => sparse_tile(
                        opts,
                        &phi,
                        t0,
                        rows,
                        l,
                        k,
                        &mut sc,
                        &mut part,
                        &wt,
                        &idx_writer,
                        &val_writer,
                        &col_writer,
                        defer_vech,
                        c32.is_some(),
                    ),
                }
            }
            sc.phi = phi_buf;
            sc.sphi = sphi_buf;
            t0 = t1;
        }
        if defer_vech {
            if let crate::obs::FeatureMap::Vech { d, linear, center } = &sfeat {
                vech_bucket_summaries(x, *d, *linear, center.as_ref(), k, &mut sc, &mut part.acc);
            }
        }
        part
    };
    let leaf_n = leaf_rows(n_rows);
    let total = tree_reduce(n_rows, leaf_n, &leaf, &|p: Partial, q: Partial| p.add(q))
        .unwrap_or_else(|| Partial::zeros(k, f_dim, opts.merge_pairs.len(), &prop_lens, opts.cooccur_col.is_some()));
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
    let s_total = model.acc_finish(total.n.view(), total.acc);
    let proposals = total.props.into_iter().map(|p| ProposalStats { s: model.acc_finish(p.n.view(), p.acc), n: p.n, h: p.h }).collect();
    Ok(LocalOutput {
        n: total.n,
        s: s_total,
        h: total.h,
        h_sum: weighted_h_sum(model, x, opts.weights),
        lse_sum: total.lse,
        pair_h: Array1::from(total.pair_h),
        proposals,
        resp: resp_out,
        resp_idx: idx_out,
        resp_val: val_out,
        col: col_out,
        cooccur: total.cooccur,
        n_candidates: c32.map(|_| n_cand.into_inner()),
    })
}

/// Sparse Gaussian summaries of one leaf from its `(cluster, row, coefficient)` entries: per
/// cluster, gather the centred rows `Y_k` (`n_k × D`) and `Z_k = diag(c) Y_k`, then
/// `Σ c y yᵀ = Z_kᵀ Y_k` is one GEMM (BLAS-3 instead of one rank-1 `vech` update per entry) and
/// `Σ c y` the column sums of `Z_k`; the upper triangle is added to the `vech` accumulator.
/// Entries are bucketed by a stable counting sort, so the summation order is fixed.
fn vech_bucket_summaries(
    x: ArrayView2<f64>,
    d: usize,
    linear: bool,
    center: Option<&Array1<f64>>,
    k: usize,
    sc: &mut Scratch,
    acc: &mut Array2<f64>,
) {
    let entries = std::mem::take(&mut sc.entries);
    sc.cnt.clear();
    sc.cnt.resize(k + 1, 0);
    for e in &entries {
        sc.cnt[e.0 as usize + 1] += 1;
    }
    for j in 0..k {
        sc.cnt[j + 1] += sc.cnt[j];
    }
    sc.bucket.clear();
    sc.bucket.resize(entries.len(), (0, 0.0));
    sc.pos.clear();
    sc.pos.extend_from_slice(&sc.cnt[..k]);
    for e in &entries {
        let p = &mut sc.pos[e.0 as usize];
        sc.bucket[*p as usize] = (e.1, e.2);
        *p += 1;
    }
    if sc.gram.dim() != (d, d) {
        sc.gram = Array2::zeros((d, d));
    }
    let lin = if linear { d } else { 0 };
    for kk in 0..k {
        let (lo, hi) = (sc.cnt[kk] as usize, sc.cnt[kk + 1] as usize);
        let nk = hi - lo;
        if nk == 0 {
            continue;
        }
        sc.gy.clear();
        sc.gy.resize(nk * d, 0.0);
        sc.gz.clear();
        sc.gz.resize(nk * d, 0.0);
        for (i, &(row, c)) in sc.bucket[lo..hi].iter().enumerate() {
            let xr = x.row(row as usize);
            let y = &mut sc.gy[i * d..(i + 1) * d];
            match center {
                Some(cv) => y.iter_mut().zip(xr.iter().zip(cv.iter())).for_each(|(o, (&a, &b))| *o = a - b),
                None => y.iter_mut().zip(xr.iter()).for_each(|(o, &a)| *o = a),
            }
            let z = &mut sc.gz[i * d..(i + 1) * d];
            z.iter_mut().zip(y.iter()).for_each(|(o, &v)| *o = c * v);
        }
        let yv = ArrayView2::from_shape((nk, d), &sc.gy[..]).expect("gather buffer");
        let zv = ArrayView2::from_shape((nk, d), &sc.gz[..]).expect("gather buffer");
        gemm(1.0, zv.t(), yv, 0.0, sc.gram.view_mut());
        let mut arow = acc.row_mut(kk);
        let a = arow.as_slice_mut().expect("contiguous");
        if lin > 0 {
            for i in 0..nk {
                for j in 0..d {
                    a[j] += sc.gz[i * d + j];
                }
            }
        }
        let mut p = lin;
        for i in 0..d {
            for j in i..d {
                a[p] += sc.gram[[i, j]];
                p += 1;
            }
        }
    }
    sc.entries = entries;
    sc.entries.clear();
}

/// Dense responsibilities of one tile (log weights in `sc.w`) and their summaries.
#[allow(clippy::too_many_arguments)]
fn dense_tile<M: ObsModel>(
    _model: &M,
    opts: &LocalOptions,
    fresh: &[Option<FreshRows>],
    tphi: &ArrayView2<f64>,
    phi: &ArrayView2<f64>,
    t0: usize,
    rows: usize,
    sc: &mut Scratch,
    part: &mut Partial,
    wt: &dyn Fn(usize) -> f64,
    resp_writer: &RowWriter<f64>,
    col_writer: &RowWriter<f64>,
) {
    let k = sc.w.ncols();
    let w = sc.w.slice(s![0..rows, ..]);
    let mut resp = sc.resp.slice_mut(s![0..rows, ..]);
    for n in 0..rows {
        let wr = w.row(n);
        let mut rr = resp.row_mut(n);
        sc.lse[n] = softmax_row(wr.as_slice().expect("contiguous"), rr.as_slice_mut().expect("contiguous"));
    }
    let lse = &sc.lse;
    for n in 0..rows {
        let wn = wt(n);
        if lse[n].is_finite() {
            part.lse += wn * lse[n];
        }
        let wr = w.row(n);
        let wr = wr.as_slice().expect("contiguous");
        let rr = resp.row(n);
        let rr = rr.as_slice().expect("contiguous");
        let h = part.h.as_slice_mut().expect("contiguous");
        for j in 0..k {
            h[j] += wn * ent_term(rr[j], log_resp(wr[j], lse[n], k));
        }
        for (m, &(pa, pb)) in opts.merge_pairs.iter().enumerate() {
            let l = log_add_exp(log_resp(wr[pa], lse[n], k), log_resp(wr[pb], lse[n], k));
            part.pair_h[m] += wn * ent_term(rr[pa] + rr[pb], l);
        }
    }
    if let (Some(c), Some(co)) = (opts.cooccur_col, part.cooccur.as_mut()) {
        for n in 0..rows {
            let f = wt(n) * resp[[n, c]];
            if f != 0.0 {
                co.scaled_add(f, &resp.row(n));
            }
        }
    }
    if let (Some(l), false) = (opts.top_l, opts.proposals.is_empty()) {
        // top_l >= K: the rows are dense, but proposals must stay in the "at most L entries"
        // family the next local steps optimise over (slot budgets, as for sparse rows)
        for n in 0..rows {
            let rr = resp.row(n);
            let rr = rr.as_slice().expect("contiguous");
            sc.sel.clear();
            sc.gv.clear();
            for (j, &r) in rr.iter().enumerate() {
                if r > 0.0 {
                    sc.slot_of[j] = sc.sel.len() as u32;
                    sc.sel.push(j as u32);
                    sc.gv.push(r);
                }
            }
            let wr = w.row(n);
            let mut bufs =
                PropBufs { cand: &mut sc.cand, dwr: &mut sc.dwr, support: &mut sc.support, gsub: &mut sc.gsub, psub: &mut sc.psub };
            budget_proposals_row(
                opts,
                l,
                n,
                wt(n),
                wr.as_slice().expect("contiguous"),
                &sc.gv,
                &sc.slot_of,
                &sc.dest_w,
                &mut bufs,
                part,
                phi,
            );
            for &j in &sc.sel {
                sc.slot_of[j as usize] = NONE;
            }
        }
    }
    if opts.top_l.is_none() {
        for (pi, p) in opts.proposals.iter().enumerate() {
            dense_proposal(p, fresh[pi].as_ref(), tphi, phi, &w, &resp, rows, wt, &mut sc.prop, &mut part.props[pi]);
        }
    }
    if let Some(c) = opts.collect_col {
        // SAFETY: rows t0..t0+rows belong to this leaf only.
        let mut out = unsafe { col_writer.rows(t0, t0 + rows) };
        out.column_mut(0).assign(&resp.column(c));
    }
    if opts.return_resp && !resp_writer.ptr.is_null() {
        // SAFETY: rows t0..t0+rows belong to this leaf only.
        let mut out = unsafe { resp_writer.rows(t0, t0 + rows) };
        out.assign(&resp);
    }
    if opts.weights.is_some() {
        for (n, mut row) in resp.rows_mut().into_iter().enumerate() {
            row *= wt(n);
        }
    }
    part.n += &resp.sum_axis(Axis(0));
    gemm(1.0, resp.t(), phi.view(), 1.0, part.acc.view_mut());
}

/// Rows whose source mass `a_n` of a dense restricted step is at most this value give all of it
/// to the first destination cluster instead of spreading it by the destinations' softmax: the
/// destinations' log weights are then computed only for the rows where the mass matters (the
/// rows a birth or delete is about), and `r'` is still a valid responsibility matrix, so the
/// candidate's ELBO stays exact. The objective given up is at most `a_n` times a log-weight
/// range per row (≈ 1e-8 nats).
pub const PROPOSAL_MIN_MASS: f64 = 1e-10;

/// Scratch buffers of [`dense_proposal`].
#[derive(Default)]
struct PropScratch {
    dw: Vec<f64>,
    r: Vec<f64>,
    lists: Vec<Vec<(u32, f64)>>,
    // many destinations: tile-sized destination weights for two GEMMs
    dwm: Vec<f64>,
    rp: Vec<f64>,
}

/// Destination counts up to this use the row-by-row restricted step; more use two GEMMs over
/// the tile (row by row wins for a birth's 2–4 fresh clusters, GEMMs for a delete's absorbing
/// set of up to 10).
const ROWWISE_MAX_DEST: usize = 4;

/// A fresh-cluster table transposed for row-by-row evaluation: `wt` is `J × F`.
struct FreshRows {
    wt: Array2<f64>,
    cst: Array1<f64>,
    e_log_pi: Array1<f64>,
}

impl FreshRows {
    fn new(table: &LogLikTable, e_log_pi: &Array1<f64>) -> FreshRows {
        match table {
            LogLikTable::Lin { w, cst, .. } => {
                FreshRows { wt: w.t().as_standard_layout().into_owned(), cst: cst.clone(), e_log_pi: e_log_pi.clone() }
            }
        }
    }
}

/// Restricted step of one proposal on the dense rows of a tile (spec 01 §6.2.4, §6.3.2):
/// `a_n = Σ_{c∈src} r_nc`, `r'_nj = a_n softmax_j(W̃_nj)` for `a_n >` [`PROPOSAL_MIN_MASS`],
/// `r'_n0 = a_n` otherwise; accumulates `N'`, `S'`, `H'` of the destination columns. The few
/// destination columns are evaluated and accumulated row by row (dot products and `axpy`s on
/// the rows of `φ`): skinny GEMMs would spend more on packing than on arithmetic.
#[allow(clippy::too_many_arguments)]
fn dense_proposal(
    p: &Proposal,
    fresh: Option<&FreshRows>,
    tphi: &ArrayView2<f64>,
    phi: &ArrayView2<f64>,
    w: &ArrayView2<f64>,
    resp: &ArrayViewMut2<f64>,
    rows: usize,
    wt: &dyn Fn(usize) -> f64,
    ps: &mut PropScratch,
    st: &mut PropPartial,
) {
    let j = st.n.len();
    if j > ROWWISE_MAX_DEST {
        return dense_proposal_gemm(p, tphi, phi, w, resp, rows, wt, ps, st);
    }
    ps.lists.resize_with(j, Vec::new);
    ps.lists.iter_mut().for_each(Vec::clear);
    ps.dw.resize(j, 0.0);
    ps.r.resize(j, 0.0);
    for n in 0..rows {
        let an: f64 = p.src.iter().map(|&c| resp[[n, c]]).sum();
        if an.is_nan() || an <= 0.0 {
            continue;
        }
        let wn = wt(n);
        if an <= PROPOSAL_MIN_MASS {
            st.n[0] += an * wn;
            st.h[0] += wn * ent_term(an, an.ln());
            ps.lists[0].push((n as u32, an * wn));
            continue;
        }
        match (&p.dest, fresh) {
            (Dest::Fresh { .. }, Some(fr)) => {
                let x = tphi.row(n);
                let x = x.as_slice().expect("contiguous");
                for jj in 0..j {
                    let wr = fr.wt.row(jj);
                    ps.dw[jj] = cand32::dot(x, wr.as_slice().expect("contiguous")) + fr.cst[jj] + fr.e_log_pi[jj];
                }
            }
            (Dest::Columns(cols), _) => {
                for (jj, &c) in cols.iter().enumerate() {
                    ps.dw[jj] = w[[n, c]];
                }
            }
            (Dest::Fresh { .. }, None) => {
                unreachable!("fresh rows prepared for every fresh proposal")
            }
        }
        spread_mass(an, wn, &ps.dw, &mut ps.r, &mut st.h);
        for jj in 0..j {
            let r = ps.r[jj];
            if r > 0.0 {
                st.n[jj] += r * wn;
                ps.lists[jj].push((n as u32, r * wn));
            }
        }
    }
    for (jj, list) in ps.lists.iter().enumerate() {
        if !list.is_empty() {
            let mut acc = st.acc.row_mut(jj);
            axpy_rows(acc.as_slice_mut().expect("contiguous"), phi, list);
        }
    }
}

/// One row of a restricted step: `out_j = a_n softmax_j(dw_j)` (`a_n > 0`) and, with row weight
/// `wn`, `h_j += wn·(−out_j ln out_j)`, the logarithm taken from the log weights.
#[inline]
fn spread_mass(an: f64, wn: f64, dw: &[f64], out: &mut [f64], h: &mut Array1<f64>) {
    let j = dw.len();
    let lse = softmax_row(dw, out);
    let la = an.ln();
    for jj in 0..j {
        let r = an * out[jj];
        h[jj] += wn * ent_term(r, la + log_resp(dw[jj], lse, j));
        out[jj] = r;
    }
}

/// [`dense_proposal`] for many destinations: the destination weights of the tile come from one
/// GEMM (fresh clusters) and `S'` from another, over all rows (rows at or below the mass
/// threshold get their one-hot row `r'_n0 = a_n` without a softmax).
#[allow(clippy::too_many_arguments)]
fn dense_proposal_gemm(
    p: &Proposal,
    tphi: &ArrayView2<f64>,
    phi: &ArrayView2<f64>,
    w: &ArrayView2<f64>,
    resp: &ArrayViewMut2<f64>,
    rows: usize,
    wt: &dyn Fn(usize) -> f64,
    ps: &mut PropScratch,
    st: &mut PropPartial,
) {
    let j = st.n.len();
    ps.dwm.clear();
    ps.dwm.resize(rows * j, 0.0);
    let mut dw = ArrayViewMut2::from_shape((rows, j), &mut ps.dwm[..]).expect("destination weights");
    match &p.dest {
        Dest::Fresh { table, e_log_pi } => {
            table.eval_features(*tphi, dw.view_mut());
            dw += e_log_pi;
        }
        Dest::Columns(cols) => {
            for n in 0..rows {
                for (jj, &c) in cols.iter().enumerate() {
                    dw[[n, jj]] = w[[n, c]];
                }
            }
        }
    }
    ps.rp.clear();
    ps.rp.resize(rows * j, 0.0);
    let mut rp = ArrayViewMut2::from_shape((rows, j), &mut ps.rp[..]).expect("proposal rows");
    for n in 0..rows {
        let an: f64 = p.src.iter().map(|&c| resp[[n, c]]).sum();
        if an.is_nan() || an <= 0.0 {
            continue;
        }
        let wn = wt(n);
        let mut row = rp.row_mut(n);
        let row = row.as_slice_mut().expect("contiguous");
        if an <= PROPOSAL_MIN_MASS {
            st.h[0] += wn * ent_term(an, an.ln());
            row[0] = an * wn;
            continue;
        }
        let dwr = dw.row(n);
        spread_mass(an, wn, dwr.as_slice().expect("contiguous"), row, &mut st.h);
        row.iter_mut().for_each(|r| *r *= wn);
    }
    st.n += &rp.sum_axis(Axis(0));
    gemm(1.0, rp.t(), *phi, 1.0, st.acc.view_mut());
}

/// Scratch buffers of [`budget_proposals_row`].
struct PropBufs<'a> {
    cand: &'a mut Vec<u32>,
    dwr: &'a mut Vec<f64>,
    support: &'a mut Vec<u32>,
    gsub: &'a mut Vec<f64>,
    psub: &'a mut Vec<f64>,
}

/// Restricted steps (births, deletes) of one row held as `m = gv.len()` entries (`slot_of[k]` is
/// the slot of cluster `k`, [`NONE`] if absent) under the "at most `l` entries" family (spec 04
/// §3.3-§3.4): the source mass `a_n` goes to the destinations the row already holds outside the
/// source (no slot needed) plus the best `|src ∩ T_n| + l − m` others, softmax-weighted.
#[allow(clippy::too_many_arguments)]
fn budget_proposals_row(
    opts: &LocalOptions,
    l: usize,
    n: usize,
    wn: f64,
    wr: &[f64],
    gv: &[f64],
    slot_of: &[u32],
    dest_w: &[Array2<f64>],
    b: &mut PropBufs,
    part: &mut Partial,
    phi: &ArrayView2<f64>,
) {
    let m = gv.len();
    let slot = |c: usize| -> Option<usize> {
        let v = slot_of[c];
        if v == NONE {
            None
        } else {
            Some(v as usize)
        }
    };
    for (pi, p) in opts.proposals.iter().enumerate() {
        let mut an = 0.0;
        let mut n_src = 0;
        for &c in &p.src {
            if let Some(s_) = slot(c) {
                an += gv[s_];
                n_src += 1;
            }
        }
        if !(an > 0.0) {
            continue;
        }
        let jn = dest_w[pi].ncols();
        // destination log weights of this row
        b.dwr.clear();
        match &p.dest {
            Dest::Columns(cols) => b.dwr.extend(cols.iter().map(|&c| wr[c])),
            Dest::Fresh { .. } => b.dwr.extend(dest_w[pi].row(n).iter()),
        }
        // destinations already held by the row (outside the source) cost no slot
        b.support.clear();
        b.cand.clear();
        for jj in 0..jn {
            let present = match &p.dest {
                Dest::Columns(cols) => slot(cols[jj]).is_some() && !p.src.contains(&cols[jj]),
                Dest::Fresh { .. } => false,
            };
            if present {
                b.support.push(jj as u32);
            } else {
                b.cand.push(jj as u32);
            }
        }
        let free = n_src + l.saturating_sub(m);
        let pick = select_top_among(b.dwr, b.cand, free);
        b.support.extend_from_slice(&b.cand[..pick]);
        b.support.sort_unstable();
        b.gsub.clear();
        b.gsub.extend(b.support.iter().map(|&j| b.dwr[j as usize]));
        b.psub.clear();
        b.psub.resize(b.gsub.len(), 0.0);
        let lse_p = softmax_row(b.gsub, b.psub);
        let la = an.ln();
        let st = &mut part.props[pi];
        for (q, &jj) in b.support.iter().enumerate() {
            let jj = jj as usize;
            let r = an * b.psub[q];
            st.h[jj] += wn * ent_term(r, la + log_resp(b.gsub[q], lse_p, b.gsub.len()));
            st.n[jj] += wn * r;
            let coef = wn * r;
            if coef != 0.0 {
                let mut accr = st.acc.row_mut(jj);
                axpy_rows(accr.as_slice_mut().expect("contiguous"), phi, &[(n as u32, coef)]);
            }
        }
    }
}

/// [`select_top_l`] on a row `w` that is `−∞` outside `cand` (with `cand` holding every
/// cluster with a finite value), looking at the candidates only: the same result.
fn select_top_l_of_candidates(w: &[f64], l: usize, cand: &[u32], scratch: &mut Vec<u32>, idx: &mut Vec<u32>) -> usize {
    scratch.clear();
    scratch.extend_from_slice(cand);
    let m = select_top_among(w, scratch, l);
    idx.clear();
    idx.extend_from_slice(&scratch[..m]);
    let finite = |i: &u32| w[*i as usize] > f64::NEG_INFINITY;
    if idx.iter().any(finite) {
        idx.retain(finite);
        idx.len()
    } else {
        // no finite log weight at all: the dense kernel's uniform fallback keeps the first l
        select_top_l(w, l, scratch, idx)
    }
}

/// L-sparse responsibilities of one tile (log weights in `sc.w`, `l < K`) and everything
/// computed from them (spec 04 §1.3, §1.6, §3.2–§3.4). With `cands`, the log weights are those
/// of the candidates in `sc.c32` instead ([`cand32`]: a superset of every row's top `l`, plus
/// the proposals' destination columns), placed in the `−∞`-filled row `sc.wx`: the selection
/// over that row is the selection over the full row.
#[allow(clippy::too_many_arguments)]
fn sparse_tile(
    opts: &LocalOptions,
    phi: &ArrayView2<f64>,
    t0: usize,
    rows: usize,
    l: usize,
    k: usize,
    sc: &mut Scratch,
    part: &mut Partial,
    wt: &dyn Fn(usize) -> f64,
    idx_writer: &RowWriter<u32>,
    val_writer: &RowWriter<f64>,
    col_writer: &RowWriter<f64>,
    defer_vech: bool,
    cands: bool,
) {
    let w = sc.w.slice(s![0..if cands { 0 } else { rows }, ..]);
    sc.idx.clear();
    sc.idx.resize(rows * l, NONE);
    sc.val.clear();
    sc.val.resize(rows * l, 0.0);
    let write_resp = opts.return_resp && !idx_writer.ptr.is_null();
    // SAFETY (three writers below): the targets exist when requested, rows t0..t0+rows are in
    // bounds and belong to this tile of this leaf only.
    let mut out_idx = if write_resp { Some(unsafe { idx_writer.rows(t0, t0 + rows) }) } else { None };
    let mut out_val = if write_resp { Some(unsafe { val_writer.rows(t0, t0 + rows) }) } else { None };
    let mut out_col = if opts.collect_col.is_some() { Some(unsafe { col_writer.rows(t0, t0 + rows) }) } else { None };
    for n in 0..rows {
        if cands {
            let (ci, cv) = sc.c32.row(n);
            for (&c, &v) in ci.iter().zip(cv) {
                sc.wx[c as usize] = v;
            }
        }
        let wrow = if cands { None } else { Some(w.row(n)) };
        let wr = match &wrow {
            Some(r) => r.as_slice().expect("contiguous"),
            None => &sc.wx[..],
        };
        let m = if cands {
            select_top_l_of_candidates(wr, l, sc.c32.row(n).0, &mut sc.cand, &mut sc.sel)
        } else {
            select_top_l(wr, l, &mut sc.cand, &mut sc.sel)
        };
        sc.g.clear();
        sc.g.extend(sc.sel.iter().map(|&i| wr[i as usize]));
        sc.gv.clear();
        sc.gv.resize(m, 0.0);
        let lse = softmax_row(&sc.g, &mut sc.gv);
        let wn = wt(n);
        if lse.is_finite() {
            part.lse += wn * lse;
        }
        for s_ in 0..m {
            let kk = sc.sel[s_] as usize;
            let r = sc.gv[s_];
            sc.idx[n * l + s_] = kk as u32;
            sc.val[n * l + s_] = r;
            part.h[kk] += wn * ent_term(r, log_resp(sc.g[s_], lse, m));
            part.n[kk] += wn * r;
            sc.slot_of[kk] = s_ as u32;
        }
        if let (Some(oi), Some(ov)) = (out_idx.as_mut(), out_val.as_mut()) {
            for s_ in 0..m {
                oi[[n, s_]] = sc.sel[s_];
                ov[[n, s_]] = sc.gv[s_];
            }
        }
        let slot = |c: usize, so: &[u32]| -> Option<usize> {
            let v = so[c];
            if v == NONE {
                None
            } else {
                Some(v as usize)
            }
        };
        let logr = |s_: usize, g: &[f64]| log_resp(g[s_], lse, m);
        // merge pair entropies: only rows holding a or b contribute
        for (mi, &(pa, pb)) in opts.merge_pairs.iter().enumerate() {
            let term = match (slot(pa, &sc.slot_of), slot(pb, &sc.slot_of)) {
                (Some(sa), Some(sb)) => ent_term(sc.gv[sa] + sc.gv[sb], log_add_exp(logr(sa, &sc.g), logr(sb, &sc.g))),
                (Some(sa), None) => ent_term(sc.gv[sa], logr(sa, &sc.g)),
                (None, Some(sb)) => ent_term(sc.gv[sb], logr(sb, &sc.g)),
                (None, None) => 0.0,
            };
            part.pair_h[mi] += wn * term;
        }
        if let (Some(c), Some(co)) = (opts.cooccur_col, part.cooccur.as_mut()) {
            if let Some(sc_) = slot(c, &sc.slot_of) {
                let f = wn * sc.gv[sc_];
                for s_ in 0..m {
                    co[sc.sel[s_] as usize] += f * sc.gv[s_];
                }
            }
        }
        if let (Some(c), Some(oc)) = (opts.collect_col, out_col.as_mut()) {
            oc[[n, 0]] = slot(c, &sc.slot_of).map_or(0.0, |s_| sc.gv[s_]);
        }
        // restricted steps (births, deletes) with slot budgets (spec 04 §3.3-§3.4)
        if !opts.proposals.is_empty() {
            let mut bufs =
                PropBufs { cand: &mut sc.cand, dwr: &mut sc.dwr, support: &mut sc.support, gsub: &mut sc.gsub, psub: &mut sc.psub };
            budget_proposals_row(opts, l, n, wn, wr, &sc.gv[..m], &sc.slot_of, &sc.dest_w, &mut bufs, part, phi);
        }
        for s_ in 0..m {
            sc.slot_of[sc.sel[s_] as usize] = NONE;
        }
        if cands {
            for &c in sc.c32.row(n).0 {
                sc.wx[c as usize] = f64::NEG_INFINITY;
            }
        }
    }
    if defer_vech {
        // Gaussian statistics are summed per cluster over the whole leaf (vech_bucket_summaries)
        for n in 0..rows {
            let wn = wt(n);
            for s_ in 0..l {
                let kk = sc.idx[n * l + s_];
                if kk == NONE {
                    break;
                }
                sc.entries.push((kk, (t0 + n) as u32, wn * sc.val[n * l + s_]));
            }
        }
        return;
    }
    // summaries: bucket the tile's entries by cluster (stable counting sort), then
    // Acc_k += Σ_{n in bucket k} w_n r_nk φ(x_n)
    sc.cnt.clear();
    sc.cnt.resize(k + 1, 0);
    for &kk in &sc.idx {
        if kk != NONE {
            sc.cnt[kk as usize + 1] += 1;
        }
    }
    for j in 0..k {
        sc.cnt[j + 1] += sc.cnt[j];
    }
    let total = sc.cnt[k] as usize;
    sc.bucket.clear();
    sc.bucket.resize(total, (0, 0.0));
    {
        sc.pos.clear();
        sc.pos.extend_from_slice(&sc.cnt[..k]);
        let pos = &mut sc.pos;
        for n in 0..rows {
            let wn = wt(n);
            for s_ in 0..l {
                let kk = sc.idx[n * l + s_];
                if kk == NONE {
                    break;
                }
                let p = &mut pos[kk as usize];
                sc.bucket[*p as usize] = (n as u32, wn * sc.val[n * l + s_]);
                *p += 1;
            }
        }
    }
    for kk in 0..k {
        let (lo, hi) = (sc.cnt[kk] as usize, sc.cnt[kk + 1] as usize);
        if lo == hi {
            continue;
        }
        let mut accr = part.acc.row_mut(kk);
        axpy_rows(accr.as_slice_mut().expect("contiguous"), phi, &sc.bucket[lo..hi]);
    }
}

impl Obs {
    /// Local step + summaries of one batch with the posterior of effective summaries
    /// `(n_post, s_post)` and log weights `e_log_pi` (see [`local_step`]).
    ///
    /// # Errors
    /// Shape/finiteness/option errors, or a non-positive-definite posterior.
    pub fn local_step(
        &self,
        x: ArrayView2<f64>,
        n_post: ArrayView1<f64>,
        s_post: ArrayView2<f64>,
        e_log_pi: ArrayView1<f64>,
        opts: &LocalOptions,
    ) -> Result<LocalOutput> {
        let table = self.e_log_lik_table(n_post, s_post)?;
        with_obs!(self, m => local_step(m, x, &table, e_log_pi, opts))
    }
}
