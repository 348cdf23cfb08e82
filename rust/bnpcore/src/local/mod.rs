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
//! Rows are processed in fixed chunks reduced by a fixed tree ([`crate::parallel`]), so every
//! output is bit-identical whatever the thread count.

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis};

use crate::error::{Error, Result};
use crate::obs::{LogLikTable, Obs, ObsModel};
use crate::parallel::{tree_reduce, CHUNK_ROWS};
use crate::with_obs;

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
    /// return the dense responsibilities
    pub return_resp: bool,
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
    /// `Σ_n w_n lse_n` (the optimal local objective)
    pub lse_sum: f64,
    /// merge pair entropies, one per pair
    pub pair_h: Array1<f64>,
    /// proposal summaries, one per proposal
    pub proposals: Vec<ProposalStats>,
    /// dense responsibilities if requested
    pub resp: Option<Array2<f64>>,
    /// responsibility column if requested
    pub col: Option<Array1<f64>>,
    /// co-occurrence vector if requested
    pub cooccur: Option<Array1<f64>>,
}

struct Partial {
    n: Array1<f64>,
    s: Array2<f64>,
    h: Array1<f64>,
    lse: f64,
    pair_h: Vec<f64>,
    props: Vec<ProposalStats>,
    cooccur: Option<Array1<f64>>,
}

impl Partial {
    fn add(mut self, o: Partial) -> Partial {
        self.n += &o.n;
        self.s += &o.s;
        self.h += &o.h;
        self.lse += o.lse;
        for (a, b) in self.pair_h.iter_mut().zip(o.pair_h) {
            *a += b;
        }
        for (a, b) in self.props.iter_mut().zip(o.props) {
            a.n += &b.n;
            a.s += &b.s;
            a.h += &b.h;
        }
        if let (Some(a), Some(b)) = (self.cooccur.as_mut(), o.cooccur) {
            *a += &b;
        }
        self
    }
}

/// Raw row-block writer for outputs whose rows are written by disjoint leaves.
struct RowWriter {
    ptr: *mut f64,
    ncols: usize,
}
// SAFETY: leaves write to disjoint row ranges only.
unsafe impl Sync for RowWriter {}
unsafe impl Send for RowWriter {}
impl RowWriter {
    /// # Safety
    /// `a..b` must be in bounds and not accessed by anybody else concurrently.
    unsafe fn rows(&self, a: usize, b: usize) -> ArrayViewMut2<'_, f64> {
        // SAFETY: guaranteed by the caller.
        unsafe { ArrayViewMut2::from_shape_ptr((b - a, self.ncols), self.ptr.add(a * self.ncols)) }
    }
}

#[inline]
fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((a - m).exp() + (b - m).exp()).ln()
}

/// Softmax of `w` in place into `out`; returns the log-sum-exp. Rows of `-inf` get a uniform
/// distribution (never NaN).
#[inline]
fn softmax_row(w: &[f64], out: &mut [f64]) -> f64 {
    let m = w.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        let u = 1.0 / w.len() as f64;
        out.iter_mut().for_each(|o| *o = u);
        return f64::NEG_INFINITY;
    }
    let mut tot = 0.0;
    for (o, &v) in out.iter_mut().zip(w) {
        let e = (v - m).exp();
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
fn log_resp(w: f64, lse: f64, len: usize) -> f64 {
    if lse == f64::NEG_INFINITY {
        -(len as f64).ln()
    } else {
        w - lse
    }
}

/// `−r ln r` computed from `ln r` (0 when `r` underflows).
#[inline]
fn ent_term(r: f64, log_r: f64) -> f64 {
    if r > 0.0 {
        -r * log_r
    } else {
        0.0
    }
}

fn validate(k: usize, n_rows: usize, e_log_pi: ArrayView1<f64>, opts: &LocalOptions) -> Result<()> {
    if e_log_pi.len() != k {
        return Err(Error::shape("e_log_pi", format!("({k},)"), format!("({},)", e_log_pi.len())));
    }
    if e_log_pi.iter().any(|v| v.is_nan() || *v == f64::INFINITY) {
        return Err(Error::NonFinite { what: "`e_log_pi`".into() });
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
    let sd = model.stat_dim();
    let fresh_w: Vec<Option<(usize, &LogLikTable, &Array1<f64>)>> = opts
        .proposals
        .iter()
        .map(|p| match &p.dest {
            Dest::Fresh { table, e_log_pi } => Some((table.n_clusters(), table, e_log_pi)),
            Dest::Columns(_) => None,
        })
        .collect();
    let dest_len = |p: &Proposal| match &p.dest {
        Dest::Columns(c) => c.len(),
        Dest::Fresh { table, .. } => table.n_clusters(),
    };

    let mut resp_out = if opts.return_resp { Some(Array2::<f64>::zeros((n_rows, k))) } else { None };
    let mut col_out = opts.collect_col.map(|_| Array1::<f64>::zeros(n_rows));
    let resp_writer = RowWriter { ptr: resp_out.as_mut().map_or(std::ptr::null_mut(), |r| r.as_mut_ptr()), ncols: k };
    let col_writer = RowWriter { ptr: col_out.as_mut().map_or(std::ptr::null_mut(), |c| c.as_mut_ptr()), ncols: 1 };

    let leaf = |a: usize, b: usize| -> Partial {
        let xb = x.slice(s![a..b, ..]);
        let rows = b - a;
        let mut w = Array2::<f64>::zeros((rows, k));
        table.eval_block(xb, w.view_mut());
        w += &e_log_pi;
        let mut resp = Array2::<f64>::zeros((rows, k));
        let mut part = Partial {
            n: Array1::zeros(k),
            s: Array2::zeros((k, sd)),
            h: Array1::zeros(k),
            lse: 0.0,
            pair_h: vec![0.0; opts.merge_pairs.len()],
            props: opts
                .proposals
                .iter()
                .map(|p| {
                    let j = dest_len(p);
                    ProposalStats { n: Array1::zeros(j), s: Array2::zeros((j, sd)), h: Array1::zeros(j) }
                })
                .collect(),
            cooccur: opts.cooccur_col.map(|_| Array1::zeros(k)),
        };
        let mut lse = vec![0.0; rows];
        for n in 0..rows {
            let wr = w.row(n);
            let mut rr = resp.row_mut(n);
            let l = softmax_row(wr.as_slice().expect("contiguous"), rr.as_slice_mut().expect("contiguous"));
            lse[n] = l;
        }
        let wt = |n: usize| opts.weights.map_or(1.0, |wv| wv[a + n]);
        for n in 0..rows {
            let wn = wt(n);
            if lse[n].is_finite() {
                part.lse += wn * lse[n];
            }
            for j in 0..k {
                part.h[j] += wn * ent_term(resp[[n, j]], log_resp(w[[n, j]], lse[n], k));
            }
            for (m, &(pa, pb)) in opts.merge_pairs.iter().enumerate() {
                let l = log_add_exp(log_resp(w[[n, pa]], lse[n], k), log_resp(w[[n, pb]], lse[n], k));
                part.pair_h[m] += wn * ent_term(resp[[n, pa]] + resp[[n, pb]], l);
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
        // proposals
        for (pi, p) in opts.proposals.iter().enumerate() {
            let j = dest_len(p);
            let mut dw = Array2::<f64>::zeros((rows, j));
            match &p.dest {
                Dest::Columns(cols) => {
                    for (jj, &c) in cols.iter().enumerate() {
                        dw.column_mut(jj).assign(&w.column(c));
                    }
                }
                Dest::Fresh { .. } => {
                    let (_, t, elp) = fresh_w[pi].expect("fresh proposal");
                    t.eval_block(xb, dw.view_mut());
                    dw += elp;
                }
            }
            let mut rp = Array2::<f64>::zeros((rows, j));
            let st = &mut part.props[pi];
            for n in 0..rows {
                let an: f64 = p.src.iter().map(|&c| resp[[n, c]]).sum();
                let mut row = rp.row_mut(n);
                let lse_p = softmax_row(dw.row(n).as_slice().expect("contiguous"), row.as_slice_mut().expect("contiguous"));
                let wn = wt(n);
                if an > 0.0 {
                    let la = an.ln();
                    for jj in 0..j {
                        let r = an * row[jj];
                        st.h[jj] += wn * ent_term(r, la + log_resp(dw[[n, jj]], lse_p, j));
                        row[jj] = r * wn;
                    }
                } else {
                    row.fill(0.0);
                }
            }
            st.n += &rp.sum_axis(Axis(0));
            model.summarize_block(xb, rp.view(), st.s.view_mut());
        }
        if let Some(c) = opts.collect_col {
            // SAFETY: rows a..b belong to this leaf only.
            let mut out = unsafe { col_writer.rows(a, b) };
            out.column_mut(0).assign(&resp.column(c));
        }
        if opts.return_resp {
            // SAFETY: rows a..b belong to this leaf only.
            let mut out = unsafe { resp_writer.rows(a, b) };
            out.assign(&resp);
        }
        if let Some(wv) = opts.weights {
            for (n, mut row) in resp.rows_mut().into_iter().enumerate() {
                row *= wv[a + n];
            }
        }
        part.n += &resp.sum_axis(Axis(0));
        model.summarize_block(xb, resp.view(), part.s.view_mut());
        part
    };
    let total = tree_reduce(n_rows, CHUNK_ROWS, &leaf, &|p: Partial, q: Partial| p.add(q));
    let total = match total {
        Some(t) => t,
        None => Partial {
            n: Array1::zeros(k),
            s: Array2::zeros((k, sd)),
            h: Array1::zeros(k),
            lse: 0.0,
            pair_h: vec![0.0; opts.merge_pairs.len()],
            props: opts
                .proposals
                .iter()
                .map(|p| {
                    let j = dest_len(p);
                    ProposalStats { n: Array1::zeros(j), s: Array2::zeros((j, sd)), h: Array1::zeros(j) }
                })
                .collect(),
            cooccur: opts.cooccur_col.map(|_| Array1::zeros(k)),
        },
    };
    Ok(LocalOutput {
        n: total.n,
        s: total.s,
        h: total.h,
        h_sum: weighted_h_sum(model, x, opts.weights),
        lse_sum: total.lse,
        pair_h: Array1::from(total.pair_h),
        proposals: total.props,
        resp: resp_out,
        col: col_out,
        cooccur: total.cooccur,
    })
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
