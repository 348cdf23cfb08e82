//! Forward-backward and Viterbi for hidden Markov models (Hughes thesis §6.3.3; Rabiner 1989
//! scaling; Beal 2003 for the variational reading).
//!
//! # Inputs
//!
//! * `log_lik` — `C` (`T_total × K`, row-major): per-timestep emission log-potentials
//!   `C_tk = E_q[log p(x_t | φ_k)]`, the rows of all sequences concatenated;
//! * `seq_range` — offsets `0 = s_0 < s_1 < … < s_D = T_total`: sequence `d` owns rows
//!   `s_d .. s_{d+1}` (no empty sequences);
//! * `log_start` — `P_{0k} = E_q[ln π_{0k}]` (`K`), `log_trans` — `P_{jk} = E_q[ln π_{jk}]`
//!   (`K × K`). These are **sub-normalised**: `Σ_k exp(P_jk) < 1`, the missing mass being the
//!   probability of a jump to an inactive state. They are used as they are, never renormalised:
//!   the optimal `q(z_d)` is the normalised chain `q*(z) ∝ exp(P_{0z_1} + Σ_t C_{tz_t} +
//!   Σ_t P_{z_{t-1}z_t})` and its log normaliser `log Z_d` is what enters the ELBO identity
//!   `max_q E_q[f] + H(q) = log Z` (thesis §6.3.3, Eq. 6.48).
//!
//! # Outputs (one pass, summed over sequences)
//!
//! * `N_k = Σ_{d,t} r̂_dtk`; optionally the marginals `r̂` themselves (`T_total × K`);
//! * start counts `M0_k = Σ_d r̂_d1k` and transition counts `M_jk = Σ_d Σ_{t<T_d} ŝ_dtjk`,
//!   streamed: the `T × K × K` pairwise array is never formed;
//! * entropies of the chain, `H^start_k = −Σ_d r̂_d1k ln r̂_d1k` and
//!   `H_jk = −Σ_d Σ_t ŝ_dtjk ln(ŝ_dtjk / Σ_m ŝ_dtjm)` (thesis Eq. 6.24–6.25 with the start-state
//!   term corrected to `−r̂ ln r̂`), so that `H(q_d) = Σ_k H^start_k + Σ_jk H_jk`;
//! * `log Z_d` per sequence.
//!
//! # Algorithm
//!
//! Per sequence, the scaled (exp-space) recursion: with `c_t = max_k C_tk`, `E_tk = exp(C_tk − c_t)`,
//! `A = exp(P)`, the filtering messages `ã_t = (Aᵀ a_{t−1}) ∘ E_t`, `Z_t = Σ ã_t`, `a_t = ã_t / Z_t`
//! and `log Z = Σ_t (ln Z_t + c_t)`. One backward pass then computes `b_t = A (E_{t+1} ∘ b_{t+1}) /
//! Z_{t+1}`, the marginals `r̂_t = a_t ∘ b_t` (renormalised) and every pairwise statistic from
//! `ŝ_tjk = a_t(j) A_jk w_k / Z_{t+1}` with `w = E_{t+1} ∘ b_{t+1}`; the conditional
//! `ŝ_tjk / Σ_m ŝ_tjm = A_jk w_k / (A w)_j` gives the entropy with `2K` logarithms per step,
//! `ln(cond) = P_jk + ln w_k − ln (A w)_j`. Entries with `ŝ = 0` contribute nothing.
//!
//! If a scale `Z_t` underflows (below [`MIN_SCALE`]) or the backward messages lose their
//! normalisation `Σ_j a_t(j) b_t(j) = 1`, the sequence is recomputed by the log-space recursion
//! (log-sum-exp messages, identical outputs up to rounding), so well-posed input never fails.
//!
//! Sequences are processed in parallel; the per-leaf sums are combined by a fixed binary tree
//! over leaves of consecutive sequences (the shape of [`crate::parallel::tree_reduce`], with a
//! leaf size that depends on the number of sequences only), so every output is bit-identical for
//! any number of threads.

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2};
use rayon::prelude::*;

use crate::error::{Error, Result};

/// Below this value a forward scale `Z_t` is considered underflowed and the sequence is
/// recomputed in log space.
pub const MIN_SCALE: f64 = 1e-280;

/// Tolerance on `|Σ_j a_t(j) b_t(j) − 1|` before the scaled recursion is abandoned for a sequence.
const NORM_TOL: f64 = 1e-8;

/// Options of [`forward_backward`].
#[derive(Debug, Clone, Default)]
pub struct FbOptions {
    /// also return the marginals `r̂` (`T_total × K`)
    pub return_resp: bool,
    /// run the log-space recursion for every sequence (for testing; the scaled one is faster)
    pub log_space: bool,
    /// also return the per-sequence state counts `N_dk = Σ_t r̂_dtk` (`n_seqs × K`; delete moves)
    pub return_seq_counts: bool,
    /// candidate merge pairs `(i, j)`, `i < j`, whose merged entropy tables are tracked
    /// (thesis §6.5.1; see [`FbOutput::merge_h_row`])
    pub merge_pairs: Vec<(usize, usize)>,
}

/// Everything [`forward_backward`] returns (sums over all sequences of the call).
#[derive(Debug, Clone)]
pub struct FbOutput {
    /// `N_k = Σ_{d,t} r̂_dtk`
    pub n: Array1<f64>,
    /// `M0_k = Σ_d r̂_d1k`
    pub start_count: Array1<f64>,
    /// `M_jk = Σ_d Σ_{t<T_d} ŝ_dtjk`
    pub trans_count: Array2<f64>,
    /// `H^start_k = −Σ_d r̂_d1k ln r̂_d1k`
    pub h_start: Array1<f64>,
    /// `H_jk = −Σ_d Σ_t ŝ_dtjk ln(ŝ_dtjk / Σ_m ŝ_dtjm)`
    pub h_trans: Array2<f64>,
    /// `log Z_d` per sequence
    pub log_z: Array1<f64>,
    /// `Σ_d log Z_d` (summed in sequence order)
    pub log_z_sum: f64,
    /// the marginals `r̂` if requested
    pub resp: Option<Array2<f64>>,
    /// number of sequences that needed the log-space recursion
    pub n_log_space: usize,
    /// per-sequence counts `N_dk` if requested (`n_seqs × K`)
    pub seq_counts: Option<Array2<f64>>,
    /// for merge pair `p = (i, j)`: merged outgoing row
    /// `R_b = −Σ_{d,t} (ŝ_tib + ŝ_tjb) ln((ŝ_tib + ŝ_tjb) / (ς_ti + ς_tj))` for `b ≠ i, j` (0 at `b = i, j`),
    /// with row sums `ς_ta = Σ_m ŝ_tam` (`n_pairs × K`)
    pub merge_h_row: Array2<f64>,
    /// merged incoming column `Q_a = −Σ (ŝ_tai + ŝ_taj) ln((ŝ_tai + ŝ_taj) / ς_ta)` for `a ≠ i, j`
    /// (0 at `a = i, j`) (`n_pairs × K`)
    pub merge_h_col: Array2<f64>,
    /// merged self entry `X = −Σ μ_t ln(μ_t / (ς_ti + ς_tj))`, `μ_t = ŝ_tii + ŝ_tij + ŝ_tji + ŝ_tjj`
    pub merge_h_self: Array1<f64>,
    /// merged start entropy `−Σ_d (r̂_d1i + r̂_d1j) ln(r̂_d1i + r̂_d1j)`
    pub merge_h_start: Array1<f64>,
}

/// Validate sequence offsets: `seq_range[0] == 0`, strictly increasing (no empty sequence), last
/// entry `n_rows`. Returns them as `usize`.
///
/// # Errors
/// [`Error::InvalidParam`] naming `seq_range`.
pub fn check_seq_range(seq_range: ArrayView1<i64>, n_rows: usize) -> Result<Vec<usize>> {
    let d = seq_range.len();
    if d < 2 {
        return Err(Error::param("seq_range", format!("needs at least 2 offsets (one sequence), got {d}")));
    }
    if seq_range[0] != 0 {
        return Err(Error::param("seq_range", format!("must start at 0, got {}", seq_range[0])));
    }
    let mut out = Vec::with_capacity(d);
    for (i, &v) in seq_range.iter().enumerate() {
        if i > 0 && v <= seq_range[i - 1] {
            return Err(Error::param(
                "seq_range",
                format!("offsets must be strictly increasing (sequence {} is empty or negative); drop empty sequences", i - 1),
            ));
        }
        out.push(usize::try_from(v).map_err(|_| Error::param("seq_range", format!("negative offset {v}")))?);
    }
    if out[d - 1] != n_rows {
        return Err(Error::param("seq_range", format!("must end at the number of rows of `log_lik` ({n_rows}), got {}", out[d - 1])));
    }
    Ok(out)
}

/// Shared read-only inputs of a call.
struct Model<'a> {
    k: usize,
    pairs: Vec<(usize, usize)>,
    c: &'a [f64],
    bounds: &'a [usize],
    log_start: Vec<f64>,
    pi0: Vec<f64>,
    /// `P` row-major
    log_a: Vec<f64>,
    /// `A = exp(P)` row-major
    a: Vec<f64>,
    /// `Aᵀ` row-major
    at: Vec<f64>,
}

fn check_inputs(log_lik: ArrayView2<f64>, log_start: ArrayView1<f64>, log_trans: ArrayView2<f64>) -> Result<usize> {
    let k = log_lik.ncols();
    if k == 0 {
        return Err(Error::shape("log_lik", "(T_total, K) with K >= 1", format!("{:?}", log_lik.dim())));
    }
    if log_start.len() != k {
        return Err(Error::shape("log_start", format!("({k},)"), format!("({},)", log_start.len())));
    }
    if log_trans.dim() != (k, k) {
        return Err(Error::shape("log_trans", format!("({k}, {k})"), format!("{:?}", log_trans.dim())));
    }
    if log_lik.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: "`log_lik`".into() });
    }
    if log_start.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: "`log_start`".into() });
    }
    if log_trans.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: "`log_trans`".into() });
    }
    Ok(k)
}

impl<'a> Model<'a> {
    fn new(c: &'a [f64], k: usize, bounds: &'a [usize], log_start: ArrayView1<f64>, log_trans: ArrayView2<f64>) -> Self {
        let log_start: Vec<f64> = log_start.to_vec();
        let pi0 = log_start.iter().map(|v| v.exp()).collect();
        let log_a: Vec<f64> = log_trans.iter().copied().collect();
        let a: Vec<f64> = log_a.iter().map(|v| v.exp()).collect();
        let mut at = vec![0.0; k * k];
        for j in 0..k {
            for l in 0..k {
                at[l * k + j] = a[j * k + l];
            }
        }
        Model { k, pairs: Vec::new(), c, bounds, log_start, pi0, log_a, a, at }
    }
}

/// Sums over the sequences of one leaf (or of a subtree after combination).
struct Acc {
    n: Vec<f64>,
    m0: Vec<f64>,
    m: Vec<f64>,
    h0: Vec<f64>,
    h: Vec<f64>,
    /// merge tables, `2K + 2` per pair: `[R (K), Q (K), X, H'start]`
    mp: Vec<f64>,
    log_z: Vec<f64>,
    /// per-sequence counts, `K` per sequence (only if requested)
    seq_n: Vec<f64>,
    n_log: usize,
}

impl Acc {
    fn zeros(k: usize, n_pairs: usize) -> Self {
        Acc {
            n: vec![0.0; k],
            m0: vec![0.0; k],
            m: vec![0.0; k * k],
            h0: vec![0.0; k],
            h: vec![0.0; k * k],
            mp: vec![0.0; n_pairs * (2 * k + 2)],
            log_z: Vec::new(),
            seq_n: Vec::new(),
            n_log: 0,
        }
    }
    fn add_assign(&mut self, o: &Acc) {
        add(&mut self.n, &o.n);
        add(&mut self.m0, &o.m0);
        add(&mut self.m, &o.m);
        add(&mut self.h0, &o.h0);
        add(&mut self.h, &o.h);
        add(&mut self.mp, &o.mp);
    }
    fn combine(mut self, o: Acc) -> Acc {
        self.add_assign(&o);
        self.log_z.extend_from_slice(&o.log_z);
        self.seq_n.extend_from_slice(&o.seq_n);
        self.n_log += o.n_log;
        self
    }
    fn clear(&mut self) {
        for v in [&mut self.n, &mut self.m0, &mut self.m, &mut self.h0, &mut self.h, &mut self.mp] {
            v.iter_mut().for_each(|x| *x = 0.0);
        }
    }
}

#[inline]
fn add(a: &mut [f64], b: &[f64]) {
    a.iter_mut().zip(b).for_each(|(x, &y)| *x += y);
}

/// Per-leaf scratch buffers, grown as needed and reused from sequence to sequence.
#[derive(Default)]
struct Scratch {
    e: Vec<f64>,
    alpha: Vec<f64>,
    z: Vec<f64>,
    b: Vec<f64>,
    bn: Vec<f64>,
    w: Vec<f64>,
    lw: Vec<f64>,
    aw: Vec<f64>,
    law: Vec<f64>,
    r: Vec<f64>,
    /// one pairwise matrix `ŝ_t` (only with merge pairs)
    s: Vec<f64>,
    /// its row sums
    rows: Vec<f64>,
}

/// Accumulate the merge tables of every pair from one pairwise matrix `s` (`K × K`, row-major).
fn merge_step(s: &[f64], rows: &mut [f64], k: usize, pairs: &[(usize, usize)], mp: &mut [f64]) {
    for (a, o) in rows.iter_mut().enumerate() {
        *o = s[a * k..(a + 1) * k].iter().sum();
    }
    let nlogq = |v: f64, tot: f64| if v > 0.0 && tot > 0.0 { -v * (v / tot).ln() } else { 0.0 };
    for (p, &(i, j)) in pairs.iter().enumerate() {
        let base = p * (2 * k + 2);
        let sij = rows[i] + rows[j];
        for b in 0..k {
            if b != i && b != j {
                mp[base + b] += nlogq(s[i * k + b] + s[j * k + b], sij);
                mp[base + k + b] += nlogq(s[b * k + i] + s[b * k + j], rows[b]);
            }
        }
        let mu = s[i * k + i] + s[i * k + j] + s[j * k + i] + s[j * k + j];
        mp[base + 2 * k] += nlogq(mu, sij);
    }
}

/// Merged start entropies from the first marginal `r1`.
fn merge_start(r1: &[f64], k: usize, pairs: &[(usize, usize)], mp: &mut [f64]) {
    for (p, &(i, j)) in pairs.iter().enumerate() {
        mp[p * (2 * k + 2) + 2 * k + 1] = -xlogx(r1[i] + r1[j]);
    }
}

fn grow(v: &mut Vec<f64>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// Neg-entropy helper `x ln x` with `0 ln 0 = 0`.
#[inline]
fn xlogx(x: f64) -> f64 {
    if x > 0.0 {
        x * x.ln()
    } else {
        0.0
    }
}

/// Scaled forward-backward of one sequence into `st` (zeroed by the caller). Returns `log Z`, or
/// `None` if the scaled recursion under- or overflowed (the caller then uses [`seq_log_space`]).
fn seq_scaled(m: &Model, c: &[f64], t_len: usize, sc: &mut Scratch, st: &mut Acc, resp: Option<&mut [f64]>) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { seq_scaled_avx2(m, c, t_len, sc, st, resp) };
        }
    }
    seq_scaled_impl(m, c, t_len, sc, st, resp)
}

/// [`seq_scaled_impl`] compiled with AVX2/FMA enabled (wider vectors for the `K`-long loops; Rust
/// never contracts `a * b + c` into an FMA on its own, so the results are bit-identical to the
/// baseline build).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn seq_scaled_avx2(m: &Model, c: &[f64], t_len: usize, sc: &mut Scratch, st: &mut Acc, resp: Option<&mut [f64]>) -> Option<f64> {
    seq_scaled_impl(m, c, t_len, sc, st, resp)
}

/// `y += a x` over equal-length slices.
#[inline(always)]
fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    let n = y.len().min(x.len());
    let (y, x) = (&mut y[..n], &x[..n]);
    for i in 0..n {
        y[i] += a * x[i];
    }
}

/// One row `j` of the pairwise statistics: `s = coef A_jk w_k`, `M_jk += s`,
/// `G_jk += s (ln w_k − ln (A w)_j)`.
#[inline(always)]
fn pair_row(mrow: &mut [f64], grow: &mut [f64], arow: &[f64], w: &[f64], lw: &[f64], coef: f64, lj: f64) {
    let n = mrow.len();
    let (grow, arow, w, lw) = (&mut grow[..n], &arow[..n], &w[..n], &lw[..n]);
    for i in 0..n {
        let s = coef * arow[i] * w[i];
        mrow[i] += s;
        grow[i] += s * (lw[i] - lj);
    }
}

#[inline(always)]
fn seq_scaled_impl(m: &Model, c: &[f64], t_len: usize, sc: &mut Scratch, st: &mut Acc, mut resp: Option<&mut [f64]>) -> Option<f64> {
    let k = m.k;
    grow(&mut sc.e, t_len * k);
    grow(&mut sc.alpha, t_len * k);
    grow(&mut sc.z, t_len);
    for v in [&mut sc.b, &mut sc.bn, &mut sc.w, &mut sc.lw, &mut sc.aw, &mut sc.law, &mut sc.r] {
        grow(v, k);
    }
    let np = m.pairs.len();
    if np > 0 {
        grow(&mut sc.s, k * k);
        grow(&mut sc.rows, k);
    }
    let Scratch { e, alpha, z, b, bn, w, lw, aw, law, r, s: smat, rows } = sc;
    let mut log_z = 0.0;
    // forward
    for t in 0..t_len {
        let ct = &c[t * k..(t + 1) * k];
        let shift = ct.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let et = &mut e[t * k..(t + 1) * k];
        et.iter_mut().zip(ct).for_each(|(o, &v)| *o = (v - shift).exp());
        let (prev, cur) = alpha.split_at_mut(t * k);
        let at = &mut cur[..k];
        if t == 0 {
            at.iter_mut().zip(&m.pi0).zip(et.iter()).for_each(|((o, &p), &x)| *o = p * x);
        } else {
            let ap = &prev[(t - 1) * k..t * k];
            at.iter_mut().for_each(|o| *o = 0.0);
            for (j, &aj) in ap.iter().enumerate() {
                if aj != 0.0 {
                    let row = &m.a[j * k..(j + 1) * k];
                    axpy(at, aj, row);
                }
            }
            at.iter_mut().zip(et.iter()).for_each(|(o, &x)| *o *= x);
        }
        let zt: f64 = at.iter().sum();
        if !(zt >= MIN_SCALE) || !zt.is_finite() {
            return None;
        }
        let inv = 1.0 / zt;
        at.iter_mut().for_each(|o| *o *= inv);
        z[t] = zt;
        log_z += zt.ln() + shift;
    }
    // backward, fused with the marginals and the pairwise statistics
    let b = &mut b[..k];
    b.iter_mut().for_each(|v| *v = 1.0);
    let last = &alpha[(t_len - 1) * k..t_len * k];
    finish_marginal(last, b, &mut r[..k], 1.0)?;
    add(&mut st.n, &r[..k]);
    if let Some(rs) = resp.as_deref_mut() {
        rs[(t_len - 1) * k..t_len * k].copy_from_slice(&r[..k]);
    }
    for t in (0..t_len.saturating_sub(1)).rev() {
        let e1 = &e[(t + 1) * k..(t + 2) * k];
        let (w, lw, aw, law, bn) = (&mut w[..k], &mut lw[..k], &mut aw[..k], &mut law[..k], &mut bn[..k]);
        w.iter_mut().zip(e1).zip(b.iter()).for_each(|((o, &x), &y)| *o = x * y);
        lw.iter_mut().zip(w.iter()).for_each(|(o, &x)| *o = if x > 0.0 { x.ln() } else { 0.0 });
        aw.iter_mut().for_each(|o| *o = 0.0);
        for (l, &wl) in w.iter().enumerate() {
            if wl != 0.0 {
                let row = &m.at[l * k..(l + 1) * k];
                axpy(aw, wl, row);
            }
        }
        let inv = 1.0 / z[t + 1];
        bn.iter_mut().zip(aw.iter()).for_each(|(o, &x)| *o = x * inv);
        law.iter_mut().zip(aw.iter()).for_each(|(o, &x)| *o = if x > 0.0 { x.ln() } else { 0.0 });
        let at = &alpha[t * k..(t + 1) * k];
        finish_marginal(at, bn, &mut r[..k], 1.0)?;
        add(&mut st.n, &r[..k]);
        if let Some(rs) = resp.as_deref_mut() {
            rs[t * k..(t + 1) * k].copy_from_slice(&r[..k]);
        }
        for (j, &aj) in at.iter().enumerate() {
            let coef = aj * inv;
            if coef == 0.0 {
                continue;
            }
            let lj = law[j];
            let arow = &m.a[j * k..(j + 1) * k];
            let mrow = &mut st.m[j * k..(j + 1) * k];
            // `st.h` holds G_jk = Σ_t ŝ_tjk (ln w_k − ln (A w)_j) until the end of the sequence
            let grow = &mut st.h[j * k..(j + 1) * k];
            pair_row(mrow, grow, arow, w, lw, coef, lj);
        }
        if np > 0 {
            for (j, &aj) in at.iter().enumerate() {
                let coef = aj * inv;
                let srow = &mut smat[j * k..(j + 1) * k];
                srow.iter_mut().zip(&m.a[j * k..(j + 1) * k]).zip(w.iter()).for_each(|((o, &x), &y)| *o = coef * x * y);
            }
            merge_step(&smat[..k * k], &mut rows[..k], k, &m.pairs, &mut st.mp);
        }
        b.copy_from_slice(bn);
    }
    // H_jk = −Σ_t ŝ_tjk (P_jk + ln w_k − ln (A w)_j) = −P_jk M_jk − G_jk (P is finite)
    st.h.iter_mut().zip(&st.m).zip(&m.log_a).for_each(|((h, &mv), &p)| *h = -(p * mv) - *h);
    st.m0.copy_from_slice(&r[..k]);
    merge_start(&r[..k], k, &m.pairs, &mut st.mp);
    st.h0.iter_mut().zip(&r[..k]).for_each(|(o, &x)| *o = -xlogx(x));
    Some(log_z)
}

/// `r = a ∘ b / Σ(a ∘ b)`; `None` if the sum is not within [`NORM_TOL`] of `target`.
#[inline]
fn finish_marginal(a: &[f64], b: &[f64], r: &mut [f64], target: f64) -> Option<()> {
    r.iter_mut().zip(a).zip(b).for_each(|((o, &x), &y)| *o = x * y);
    let s: f64 = r.iter().sum();
    if !s.is_finite() || (s - target).abs() > NORM_TOL {
        return None;
    }
    let inv = 1.0 / s;
    r.iter_mut().for_each(|o| *o *= inv);
    Some(())
}

/// Log-space forward-backward of one sequence into `st` (zeroed by the caller); returns `log Z`.
/// Always succeeds for finite inputs.
fn seq_log_space(m: &Model, c: &[f64], t_len: usize, sc: &mut Scratch, st: &mut Acc, mut resp: Option<&mut [f64]>) -> f64 {
    let k = m.k;
    grow(&mut sc.alpha, t_len * k);
    grow(&mut sc.z, t_len);
    for v in [&mut sc.b, &mut sc.bn, &mut sc.w, &mut sc.r, &mut sc.aw] {
        grow(v, k);
    }
    let np = m.pairs.len();
    if np > 0 {
        grow(&mut sc.s, k * k);
        grow(&mut sc.rows, k);
    }
    let Scratch { alpha: la, z: lz, b: lb, bn: lbn, w: v, r, aw: tmp, s: smat, rows, .. } = sc;
    let tmp = &mut tmp[..k];
    let mut log_z = 0.0;
    for t in 0..t_len {
        let ct = &c[t * k..(t + 1) * k];
        let (prev, cur) = la.split_at_mut(t * k);
        let cur = &mut cur[..k];
        if t == 0 {
            cur.iter_mut().zip(&m.log_start).zip(ct).for_each(|((o, &p), &x)| *o = p + x);
        } else {
            let ap = &prev[(t - 1) * k..t * k];
            for l in 0..k {
                for j in 0..k {
                    tmp[j] = ap[j] + m.log_a[j * k + l];
                }
                cur[l] = lse(tmp) + ct[l];
            }
        }
        let s = lse(cur);
        cur.iter_mut().for_each(|o| *o -= s);
        lz[t] = s;
        log_z += s;
    }
    let lb = &mut lb[..k];
    lb.iter_mut().for_each(|x| *x = 0.0);
    let r = &mut r[..k];
    log_marginal(&la[(t_len - 1) * k..t_len * k], lb, r);
    add(&mut st.n, r);
    if let Some(rs) = resp.as_deref_mut() {
        rs[(t_len - 1) * k..t_len * k].copy_from_slice(r);
    }
    for t in (0..t_len.saturating_sub(1)).rev() {
        let c1 = &c[(t + 1) * k..(t + 2) * k];
        let (v, lbn) = (&mut v[..k], &mut lbn[..k]);
        v.iter_mut().zip(c1).zip(lb.iter()).for_each(|((o, &x), &y)| *o = x + y);
        for j in 0..k {
            for l in 0..k {
                tmp[l] = m.log_a[j * k + l] + v[l];
            }
            lbn[j] = lse(tmp) - lz[t + 1];
        }
        let at = &la[t * k..(t + 1) * k];
        log_marginal(at, lbn, r);
        add(&mut st.n, r);
        if let Some(rs) = resp.as_deref_mut() {
            rs[t * k..(t + 1) * k].copy_from_slice(r);
        }
        for j in 0..k {
            for l in 0..k {
                let lcond = m.log_a[j * k + l] + v[l] - lz[t + 1] - lbn[j];
                let s = (at[j] + lbn[j] + lcond).exp();
                if s > 0.0 {
                    st.m[j * k + l] += s;
                    st.h[j * k + l] -= s * lcond;
                }
                if np > 0 {
                    smat[j * k + l] = s;
                }
            }
        }
        if np > 0 {
            merge_step(&smat[..k * k], &mut rows[..k], k, &m.pairs, &mut st.mp);
        }
        lb.copy_from_slice(lbn);
    }
    st.m0.copy_from_slice(r);
    st.h0.iter_mut().zip(r.iter()).for_each(|(o, &x)| *o = -xlogx(x));
    merge_start(r, k, &m.pairs, &mut st.mp);
    log_z
}

/// `r = softmax(la + lb)`.
fn log_marginal(la: &[f64], lb: &[f64], r: &mut [f64]) {
    r.iter_mut().zip(la).zip(lb).for_each(|((o, &x), &y)| *o = x + y);
    let s = lse(r);
    r.iter_mut().for_each(|o| *o = (*o - s).exp());
}

#[inline]
fn lse(v: &[f64]) -> f64 {
    crate::special::logsumexp(v)
}

/// Sequences per leaf of the reduction tree: a function of the number of sequences only.
fn seqs_per_leaf(n_seqs: usize) -> usize {
    n_seqs.div_ceil(64).max(1)
}

fn leaf(m: &Model, opts: &FbOptions, s0: usize, s1: usize, mut resp: Option<&mut [f64]>) -> Acc {
    let k = m.k;
    let log_space = opts.log_space;
    let mut acc = Acc::zeros(k, m.pairs.len());
    let mut st = Acc::zeros(k, m.pairs.len());
    let mut sc = Scratch::default();
    let row0 = m.bounds[s0];
    for d in s0..s1 {
        let (a, b) = (m.bounds[d], m.bounds[d + 1]);
        let c = &m.c[a * k..b * k];
        let t_len = b - a;
        let mut rs = resp.as_deref_mut().map(|r| &mut r[(a - row0) * k..(b - row0) * k]);
        st.clear();
        let scaled = if log_space { None } else { seq_scaled(m, c, t_len, &mut sc, &mut st, rs.as_deref_mut()) };
        let lz = match scaled {
            Some(v) => v,
            None => {
                st.clear();
                if !log_space {
                    acc.n_log += 1;
                }
                seq_log_space(m, c, t_len, &mut sc, &mut st, rs)
            }
        };
        acc.add_assign(&st);
        acc.log_z.push(lz);
        if opts.return_seq_counts {
            acc.seq_n.extend_from_slice(&st.n);
        }
    }
    if log_space {
        acc.n_log = s1 - s0;
    }
    acc
}

fn rec(m: &Model, opts: &FbOptions, c0: usize, c1: usize, chunk: usize, resp: Option<&mut [f64]>) -> Acc {
    let n_seqs = m.bounds.len() - 1;
    if c1 - c0 == 1 {
        return leaf(m, opts, c0 * chunk, ((c0 + 1) * chunk).min(n_seqs), resp);
    }
    let mid = c0 + (c1 - c0) / 2;
    let split = (m.bounds[mid * chunk] - m.bounds[c0 * chunk]) * m.k;
    let (ra, rb) = match resp {
        Some(r) => {
            let (x, y) = r.split_at_mut(split);
            (Some(x), Some(y))
        }
        None => (None, None),
    };
    let (a, b) = rayon::join(|| rec(m, opts, c0, mid, chunk, ra), || rec(m, opts, mid, c1, chunk, rb));
    a.combine(b)
}

/// Forward-backward over all sequences (see the module docs for inputs, outputs and algorithm).
///
/// # Errors
/// [`Error::Shape`] if `log_start` is not `(K,)` or `log_trans` not `(K, K)`;
/// [`Error::NonFinite`] for NaN/inf in any input; [`Error::InvalidParam`] for bad `seq_range`;
/// [`Error::InvalidData`] if `log_lik` is not C-contiguous; [`Error::InvalidParam`] for a merge pair
/// that is not `i < j < K`.
pub fn forward_backward(
    log_lik: ArrayView2<f64>,
    seq_range: ArrayView1<i64>,
    log_start: ArrayView1<f64>,
    log_trans: ArrayView2<f64>,
    opts: &FbOptions,
) -> Result<FbOutput> {
    let k = check_inputs(log_lik, log_start, log_trans)?;
    let bounds = check_seq_range(seq_range, log_lik.nrows())?;
    let c = log_lik.as_slice().ok_or_else(|| Error::data("log_lik", "must be C-contiguous (use np.ascontiguousarray)"))?;
    if let Some(&(i, j)) = opts.merge_pairs.iter().find(|&&(i, j)| !(i < j && j < k)) {
        return Err(Error::param("merge_pairs", format!("each pair (i, j) needs i < j < K = {k}, got ({i}, {j})")));
    }
    let mut m = Model::new(c, k, &bounds, log_start, log_trans);
    m.pairs.clone_from(&opts.merge_pairs);
    let n_seqs = bounds.len() - 1;
    let chunk = seqs_per_leaf(n_seqs);
    let mut resp = if opts.return_resp { Some(vec![0.0; log_lik.nrows() * k]) } else { None };
    let acc = rec(&m, opts, 0, n_seqs.div_ceil(chunk), chunk, resp.as_deref_mut());
    let np = opts.merge_pairs.len();
    let w = 2 * k + 2;
    let mp = Array2::from_shape_vec((np, w), acc.mp).map_err(|e| Error::Numerical { what: e.to_string() })?;
    let seq_counts = if opts.return_seq_counts {
        Some(Array2::from_shape_vec((n_seqs, k), acc.seq_n).map_err(|e| Error::Numerical { what: e.to_string() })?)
    } else {
        None
    };
    let log_z_sum = acc.log_z.iter().sum();
    let kk = (k, k);
    let to2 = |v: Vec<f64>| Array2::from_shape_vec(kk, v).map_err(|e| Error::Numerical { what: e.to_string() });
    Ok(FbOutput {
        n: Array1::from(acc.n),
        start_count: Array1::from(acc.m0),
        trans_count: to2(acc.m)?,
        h_start: Array1::from(acc.h0),
        h_trans: to2(acc.h)?,
        log_z: Array1::from(acc.log_z),
        log_z_sum,
        resp: match resp {
            Some(r) => Some(Array2::from_shape_vec((log_lik.nrows(), k), r).map_err(|e| Error::Numerical { what: e.to_string() })?),
            None => None,
        },
        n_log_space: acc.n_log,
        seq_counts,
        merge_h_row: mp.slice(s![.., ..k]).to_owned(),
        merge_h_col: mp.slice(s![.., k..2 * k]).to_owned(),
        merge_h_self: mp.column(2 * k).to_owned(),
        merge_h_start: mp.column(2 * k + 1).to_owned(),
    })
}

/// Output of [`local_step_obs`].
#[derive(Debug, Clone)]
pub struct HmmLocalOutput {
    /// forward-backward outputs (`resp` only if requested)
    pub fb: FbOutput,
    /// observation statistics `S_k = Σ_t r̂_tk s(x_t)` (`K × stat_dim`)
    pub s: Array2<f64>,
    /// `Σ_t h(x_t)`
    pub h_sum: f64,
}

/// The whole HMM local step of a batch of sequences for an observation model: emission
/// log-potentials `C = E_q[log p(x_t | φ_k)]` from the posterior `(n_post, s_post)`, forward-backward
/// with `(log_start, log_trans)`, and the observation statistics of the marginals (the model's own
/// dense `summarize`, so they are exactly the mixtures' statistics with `r̂` as responsibilities).
///
/// # Errors
/// As [`forward_backward`] and the observation model's `e_log_lik` / `summarize`.
pub fn local_step_obs(
    obs: &crate::obs::Obs,
    x: ArrayView2<f64>,
    n_post: ArrayView1<f64>,
    s_post: ArrayView2<f64>,
    seq_range: ArrayView1<i64>,
    log_start: ArrayView1<f64>,
    log_trans: ArrayView2<f64>,
    opts: &FbOptions,
) -> Result<HmmLocalOutput> {
    let c = obs.e_log_lik(x, n_post, s_post)?;
    let mut fb = forward_backward(c.view(), seq_range, log_start, log_trans, &FbOptions { return_resp: true, ..opts.clone() })?;
    let resp = fb.resp.take().ok_or_else(|| Error::Numerical { what: "forward-backward returned no marginals".into() })?;
    let (_, s) = obs.summarize(x, resp.view())?;
    let h_sum = obs.h_sum(x);
    if opts.return_resp {
        fb.resp = Some(resp);
    }
    Ok(HmmLocalOutput { fb, s, h_sum })
}

/// Output of [`viterbi`].
#[derive(Debug, Clone)]
pub struct ViterbiOutput {
    /// MAP state of every row (`T_total`)
    pub states: Array1<i64>,
    /// log-weight `P_{0z_1} + Σ_t C_{tz_t} + Σ_t P_{z_{t−1}z_t}` of each sequence's MAP path
    pub score: Array1<f64>,
}

/// MAP state sequences (Viterbi, in log space), in parallel over sequences. Ties go to the
/// smallest state index, so the result is deterministic.
///
/// `V_1k = P_{0k} + C_1k`, `V_tk = C_tk + max_j (V_{t−1,j} + P_jk)` with back-pointers,
/// `z_T = argmax_k V_Tk`, `z_t = ptr_{t+1}(z_{t+1})`.
///
/// # Errors
/// As [`forward_backward`].
pub fn viterbi(
    log_lik: ArrayView2<f64>,
    seq_range: ArrayView1<i64>,
    log_start: ArrayView1<f64>,
    log_trans: ArrayView2<f64>,
) -> Result<ViterbiOutput> {
    let k = check_inputs(log_lik, log_start, log_trans)?;
    let bounds = check_seq_range(seq_range, log_lik.nrows())?;
    let c = log_lik.as_slice().ok_or_else(|| Error::data("log_lik", "must be C-contiguous (use np.ascontiguousarray)"))?;
    let m = Model::new(c, k, &bounds, log_start, log_trans);
    let mut pt = vec![0.0; k * k];
    for j in 0..k {
        for l in 0..k {
            pt[l * k + j] = m.log_a[j * k + l];
        }
    }
    let n_seqs = bounds.len() - 1;
    let res: Vec<(Vec<i64>, f64)> = (0..n_seqs)
        .into_par_iter()
        .map(|d| {
            let (a, b) = (bounds[d], bounds[d + 1]);
            viterbi_seq(&m, &pt, &c[a * k..b * k], b - a)
        })
        .collect();
    let mut states = Vec::with_capacity(log_lik.nrows());
    let mut score = Vec::with_capacity(n_seqs);
    for (z, s) in res {
        states.extend_from_slice(&z);
        score.push(s);
    }
    Ok(ViterbiOutput { states: Array1::from(states), score: Array1::from(score) })
}

fn viterbi_seq(m: &Model, pt: &[f64], c: &[f64], t_len: usize) -> (Vec<i64>, f64) {
    let k = m.k;
    let mut ptr = vec![0u32; t_len * k];
    let mut v: Vec<f64> = m.log_start.iter().zip(&c[..k]).map(|(&p, &x)| p + x).collect();
    let mut vn = vec![0.0; k];
    for t in 1..t_len {
        for l in 0..k {
            let col = &pt[l * k..(l + 1) * k];
            let mut best = f64::NEG_INFINITY;
            let mut arg = 0usize;
            for (j, (&vj, &p)) in v.iter().zip(col).enumerate() {
                let cand = vj + p;
                if cand > best {
                    best = cand;
                    arg = j;
                }
            }
            vn[l] = best + c[t * k + l];
            ptr[t * k + l] = u32::try_from(arg).unwrap_or(u32::MAX);
        }
        std::mem::swap(&mut v, &mut vn);
    }
    let mut best = f64::NEG_INFINITY;
    let mut zl = 0usize;
    for (l, &x) in v.iter().enumerate() {
        if x > best {
            best = x;
            zl = l;
        }
    }
    let mut z = vec![0i64; t_len];
    z[t_len - 1] = zl as i64;
    for t in (1..t_len).rev() {
        zl = ptr[t * k + zl] as usize;
        z[t - 1] = zl as i64;
    }
    (z, best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array1, Array2};

    /// Tiny deterministic pseudo-random stream (no dev-dependency needed).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
        }
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.next().max(1e-300), self.next());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
    }

    fn problem(seed: u64, lens: &[usize], k: usize, spread: f64) -> (Array2<f64>, Array1<i64>, Array1<f64>, Array2<f64>) {
        let mut g = Lcg(seed);
        let t: usize = lens.iter().sum();
        let c = Array2::from_shape_fn((t, k), |_| spread * g.normal());
        let mut r = vec![0i64];
        for &l in lens {
            r.push(r.last().unwrap() + l as i64);
        }
        let p0 = Array1::from_shape_fn(k, |_| (0.05 + 0.9 * g.next()).ln() - 0.3);
        let p = Array2::from_shape_fn((k, k), |_| (0.05 + 0.9 * g.next()).ln() - 0.5);
        (c, Array1::from(r), p0, p)
    }

    /// Brute force over all K^T paths of one sequence: (log Z, marginals, M0, M, H0, H, path entropy).
    fn brute(c: &Array2<f64>, p0: &Array1<f64>, p: &Array2<f64>) -> (f64, Array2<f64>, Array2<f64>, f64, Vec<usize>, f64) {
        let (t, k) = c.dim();
        let n = k.pow(t as u32);
        let mut w = Vec::with_capacity(n);
        let paths: Vec<Vec<usize>> = (0..n)
            .map(|mut i| {
                let mut z = vec![0; t];
                for s in z.iter_mut() {
                    *s = i % k;
                    i /= k;
                }
                z
            })
            .collect();
        for z in &paths {
            let mut s = p0[z[0]] + c[[0, z[0]]];
            for u in 1..t {
                s += p[[z[u - 1], z[u]]] + c[[u, z[u]]];
            }
            w.push(s);
        }
        let lz = crate::special::logsumexp(&w);
        let mut r = Array2::zeros((t, k));
        let mut m = Array2::zeros((k, k));
        let mut ent = 0.0;
        let (mut best, mut arg) = (f64::NEG_INFINITY, 0);
        for (i, z) in paths.iter().enumerate() {
            let q = (w[i] - lz).exp();
            ent -= xlogx(q);
            if w[i] > best {
                best = w[i];
                arg = i;
            }
            for u in 0..t {
                r[[u, z[u]]] += q;
                if u + 1 < t {
                    m[[z[u], z[u + 1]]] += q;
                }
            }
        }
        (lz, r, m, ent, paths[arg].clone(), best)
    }

    #[test]
    fn matches_brute_force_and_log_space() {
        for (seed, k, spread) in [(1u64, 1usize, 3.0), (2, 2, 3.0), (3, 3, 3.0), (4, 3, 300.0), (5, 2, 1e4)] {
            let lens = [4usize, 1, 5];
            let (c, sr, p0, p) = problem(seed, &lens, k, spread);
            for log_space in [false, true] {
                let out = forward_backward(
                    c.view(),
                    sr.view(),
                    p0.view(),
                    p.view(),
                    &FbOptions { return_resp: true, log_space, ..Default::default() },
                )
                .unwrap();
                let resp = out.resp.as_ref().unwrap();
                let mut m_all = Array2::<f64>::zeros((k, k));
                let mut ent_all = 0.0;
                for d in 0..lens.len() {
                    let (a, b) = (sr[d] as usize, sr[d + 1] as usize);
                    let cd = c.slice(ndarray::s![a..b, ..]).to_owned();
                    let (lz, r, m, ent, _, _) = brute(&cd, &p0, &p);
                    assert!((out.log_z[d] - lz).abs() <= 1e-9 * lz.abs().max(1.0), "logZ {seed} {log_space}");
                    for (x, y) in resp.slice(ndarray::s![a..b, ..]).iter().zip(r.iter()) {
                        assert!((x - y).abs() < 1e-10, "resp {seed} {log_space}: {x} vs {y}");
                    }
                    m_all += &m;
                    ent_all += ent;
                }
                for (x, y) in out.trans_count.iter().zip(m_all.iter()) {
                    assert!((x - y).abs() < 1e-10, "M {seed} {log_space}");
                }
                let h = out.h_start.sum() + out.h_trans.sum();
                assert!((h - ent_all).abs() < 1e-8 * ent_all.abs().max(1.0), "entropy {seed} {log_space}: {h} vs {ent_all}");
                assert!(out.h_trans.iter().all(|&v| v >= -1e-12));
            }
        }
    }

    #[test]
    fn viterbi_matches_brute_force() {
        for seed in 0..6u64 {
            let (c, _, p0, p) = problem(seed + 10, &[5], 3, 2.0);
            let (_, _, _, _, path, best) = brute(&c, &p0, &p);
            let v = viterbi(c.view(), array![0i64, 5].view(), p0.view(), p.view()).unwrap();
            assert_eq!(v.states.iter().map(|&z| z as usize).collect::<Vec<_>>(), path);
            assert!((v.score[0] - best).abs() < 1e-12 * best.abs().max(1.0));
        }
    }

    #[test]
    fn underflowing_transitions_fall_back_to_log_space() {
        // state 1 unreachable in the scaled recursion (A = exp(-800) = 0) but the only plausible emission
        let c = array![[0.0, -1.0], [-5000.0, 0.0], [-5000.0, 0.0]];
        let p0 = array![0.0f64.ln_1p(), -800.0];
        let p = array![[-0.1, -800.0], [-800.0, -0.1]];
        let sr = array![0i64, 3];
        let a = forward_backward(c.view(), sr.view(), p0.view(), p.view(), &FbOptions { return_resp: true, ..Default::default() }).unwrap();
        let b = forward_backward(
            c.view(),
            sr.view(),
            p0.view(),
            p.view(),
            &FbOptions { return_resp: true, log_space: true, ..Default::default() },
        )
        .unwrap();
        assert_eq!(a.n_log_space, 1);
        assert!((a.log_z_sum - b.log_z_sum).abs() < 1e-12 * b.log_z_sum.abs());
        assert!(a.resp.unwrap().iter().all(|v| v.is_finite()));
    }

    #[test]
    fn bit_identical_for_any_thread_count() {
        let lens: Vec<usize> = (0..150).map(|i| 1 + (i * 7) % 23).collect();
        let (c, sr, p0, p) = problem(99, &lens, 4, 3.0);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                forward_backward(c.view(), sr.view(), p0.view(), p.view(), &FbOptions { return_resp: true, ..Default::default() }).unwrap()
            })
        };
        let (a, b) = (run(1), run(3));
        assert_eq!(a.log_z_sum.to_bits(), b.log_z_sum.to_bits());
        assert!(a.h_trans.iter().zip(b.h_trans.iter()).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert!(a.trans_count.iter().zip(b.trans_count.iter()).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert_eq!(a.resp, b.resp);
        // sanity relations of the summaries
        let n_seqs = lens.len() as f64;
        assert!((a.start_count.sum() - n_seqs).abs() < 1e-9);
        let pairs: usize = lens.iter().map(|l| l - 1).sum();
        assert!((a.trans_count.sum() - pairs as f64).abs() < 1e-9);
        let col = a.trans_count.sum_axis(ndarray::Axis(0)) + &a.start_count;
        assert!(col.iter().zip(a.n.iter()).all(|(x, y)| (x - y).abs() < 1e-9));
    }

    #[test]
    fn autotraits() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<FbOptions>();
        send_sync::<FbOutput>();
        send_sync::<ViterbiOutput>();
        send_sync::<HmmLocalOutput>();
        send_sync::<crate::alloc::hdp_hmm::HmmHyper>();
        send_sync::<crate::alloc::hdp_hmm::HdpGlobal>();
        send_sync::<crate::alloc::hdp_hmm::AllocElbo>();
    }

    #[test]
    fn bad_input_is_an_error() {
        let c = Array2::<f64>::zeros((3, 2));
        let p0 = Array1::<f64>::zeros(2);
        let p = Array2::<f64>::zeros((2, 2));
        let o = &FbOptions::default();
        assert!(forward_backward(c.view(), array![0i64, 2].view(), p0.view(), p.view(), o).is_err());
        assert!(forward_backward(c.view(), array![0i64, 0, 3].view(), p0.view(), p.view(), o).is_err());
        assert!(forward_backward(c.view(), array![1i64, 3].view(), p0.view(), p.view(), o).is_err());
        assert!(forward_backward(c.view(), array![0i64, 3].view(), array![0.0].view(), p.view(), o).is_err());
        assert!(forward_backward(c.view(), array![0i64, 3].view(), array![0.0, f64::NAN].view(), p.view(), o).is_err());
        assert!(forward_backward(c.view(), array![0i64, 3].view(), p0.view(), p.view(), o).is_ok());
    }
}
