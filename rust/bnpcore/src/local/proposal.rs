//! Restricted-step proposals of the birth and delete moves (Hughes thesis §4.2–§4.3; sparse
//! rows: the "at most `L` entries" family of the L-sparse local step, thesis §7.1).
//!
//! A proposal takes the responsibility mass `a_n = Σ_{k∈src} r_nk` of its source clusters and
//! spreads it over destination clusters (existing columns, or fresh clusters with their own
//! log-likelihood table and log weights): `r'_nj = a_n softmax_j(W'_nj)`; the destinations'
//! summaries `N'`, `S'`, `H'` are accumulated as for the main responsibilities.

use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut2, Axis};

use super::csr::Feats;

use super::top_l::{select_top_among, NONE};
use super::{ent_term, log_resp, softmax_row, Dest, LocalOptions, Partial, PropPartial, Proposal, Tile};
use crate::obs::LogLikTable;

/// Rows whose source mass `a_n` of a dense restricted step is at most this value give all of it
/// to the first destination cluster instead of spreading it by the destinations' softmax: the
/// destinations' log weights are then computed only for the rows where the mass matters (the
/// rows a birth or delete is about), and `r'` is still a valid responsibility matrix, so the
/// candidate's ELBO stays exact. The objective given up is at most `a_n` times a log-weight
/// range per row (≈ 1e-8 nats).
pub const PROPOSAL_MIN_MASS: f64 = 1e-10;

/// Scratch buffers of [`dense_proposal`].
#[derive(Default)]
pub(super) struct PropScratch {
    dw: Vec<f64>,
    r: Vec<f64>,
    lists: Vec<Vec<(u32, f64)>>,
    // many destinations: tile-sized destination weights for two GEMMs
    dwm: Vec<f64>,
    rp: Vec<f64>,
    // fresh destinations: the rows whose log weights are needed, and those weights (row-major)
    active: Vec<usize>,
    dwa: Vec<f64>,
}

/// Destination counts up to this use the row-by-row restricted step; more use two GEMMs over
/// the tile (row by row wins for a birth's 2–4 fresh clusters, GEMMs for a delete's absorbing
/// set of up to 10).
const ROWWISE_MAX_DEST: usize = 4;
/// ... unless fewer than one row in this many carries source mass above
/// [`PROPOSAL_MIN_MASS`] (a birth's target is usually a small part of the batch): the row-wise
/// path then costs less than GEMMs over every row of the tile.
const GEMM_MIN_ACTIVE_DIV: usize = 4;

impl PropScratch {
    /// Empty row lists and weight buffers for `j` destinations.
    fn reset(&mut self, j: usize) {
        self.lists.resize_with(j, Vec::new);
        self.lists.iter_mut().for_each(Vec::clear);
        self.dw.resize(j, 0.0);
        self.r.resize(j, 0.0);
    }

    /// `S'_j += Σ coefficient · φ(row)` over each destination's row list.
    fn flush(&self, phi: &Feats, st: &mut PropPartial) {
        for (jj, list) in self.lists.iter().enumerate() {
            if !list.is_empty() {
                phi.axpy_rows_into(&mut st.acc, jj, list);
            }
        }
    }
}

/// Log weights of a proposal's destinations for row `n` of the tile, into `dw`.
#[inline]
fn dest_weights(p: &Proposal, fresh: Option<&FreshRows>, tphi: &Feats, w: &ArrayView2<f64>, n: usize, dw: &mut [f64]) {
    match (&p.dest, fresh) {
        (Dest::Fresh { .. }, Some(fr)) => {
            for (jj, d) in dw.iter_mut().enumerate() {
                *d = fr.weight(tphi, n, jj);
            }
        }
        (Dest::Columns(cols), _) => {
            for (d, &col) in dw.iter_mut().zip(cols) {
                *d = w[[n, col]];
            }
        }
        (Dest::Fresh { .. }, None) => unreachable!("fresh rows prepared for every fresh proposal"),
    }
}

/// A fresh-cluster table transposed for row-by-row evaluation: `wt` is `J × F`.
pub(super) struct FreshRows {
    wt: Array2<f64>,
    cst: Array1<f64>,
    e_log_pi: Array1<f64>,
}

impl FreshRows {
    pub(super) fn new(table: &LogLikTable, e_log_pi: &Array1<f64>) -> FreshRows {
        match table {
            LogLikTable::Lin { w, cst, .. } => {
                FreshRows { wt: w.t().as_standard_layout().into_owned(), cst: cst.clone(), e_log_pi: e_log_pi.clone() }
            }
        }
    }

    /// Number of fresh clusters `J`.
    fn len(&self) -> usize {
        self.cst.len()
    }

    /// Log weight of fresh cluster `jj` for row `n` of the tile: `φ(x_n)·w_jj + cst_jj + E[ln π_jj]`.
    #[inline]
    fn weight(&self, tphi: &Feats, n: usize, jj: usize) -> f64 {
        tphi.dot_row(n, self.wt.row(jj).as_slice().expect("contiguous")) + self.cst[jj] + self.e_log_pi[jj]
    }

    /// [`Self::weight`] of every fresh cluster for each of `rows` (`out` is `rows.len() × J`),
    /// bit for bit: on dense features two rows and up to four clusters at a time
    /// ([`dots_same`]: independent sums in flight instead of one dot product's chain of adds).
    fn weights_rows(&self, tphi: &Feats, rows: &[usize], out: &mut Vec<f64>) {
        let j = self.len();
        out.clear();
        out.resize(rows.len() * j, 0.0);
        let Feats::Dense(phi) = tphi else {
            for (o, &n) in out.chunks_exact_mut(j).zip(rows) {
                for (jj, v) in o.iter_mut().enumerate() {
                    *v = self.weight(tphi, n, jj);
                }
            }
            return;
        };
        let wt = self.wt.as_slice().expect("contiguous");
        let f = self.wt.ncols();
        let row = |n: usize| phi.row(n).to_slice().expect("contiguous");
        for (o, pair) in out.chunks_mut(2 * j).zip(rows.chunks(2)) {
            // a single last row is paired with itself
            let a = [row(pair[0]), row(pair[pair.len() - 1])];
            let mut g0 = 0;
            while g0 < j {
                let g = (j - g0).min(4);
                let w: [&[f64]; 4] = std::array::from_fn(|q| {
                    let c = g0 + q.min(g - 1);
                    &wt[c * f..(c + 1) * f]
                });
                let d = dots_same(a, w);
                for (r, orow) in o.chunks_exact_mut(j).enumerate() {
                    for q in 0..g {
                        orow[g0 + q] = d[r][q] + self.cst[g0 + q] + self.e_log_pi[g0 + q];
                    }
                }
                g0 += g;
            }
        }
    }
}

/// `out[r][g]` = `cand32::dot(a[r], w[g])` bit for bit (four lanes of products `i ≡ l (mod 4)`,
/// then `(s₀ + s₁) + (s₂ + s₃)`, then the remainder in order), eight sums at once.
fn dots_same(a: [&[f64]; 2], w: [&[f64]; 4]) -> [[f64; 4]; 2] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { dots_same_avx2(a, w) };
        }
    }
    dots_same_impl(a, w)
}

/// [`dots_same_impl`] with AVX2 intrinsics: the same products and additions in the same order
/// (one 4-lane register per sum, no fused multiply-add).
///
/// # Safety
/// The CPU must support AVX2; both rows have the same length and every `w[g]` is at least as long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dots_same_avx2(a: [&[f64]; 2], w: [&[f64]; 4]) -> [[f64; 4]; 2] {
    use std::arch::x86_64::{_mm256_add_pd, _mm256_loadu_pd, _mm256_mul_pd, _mm256_setzero_pd, _mm256_storeu_pd};
    let n = a[0].len();
    assert!(a[1].len() == n && w.iter().all(|v| v.len() >= n), "dots_same: lengths");
    let blocks = n / 4;
    let mut out = [[0.0f64; 4]; 2];
    // SAFETY (whole block): AVX2 is available (caller); every load reads 4 doubles at offsets
    // below `blocks * 4 <= n`, within both rows and every `w[g]` (asserted above).
    unsafe {
        let mut s = [[_mm256_setzero_pd(); 4]; 2];
        for i in 0..blocks {
            let x0 = _mm256_loadu_pd(a[0].as_ptr().add(i * 4));
            let x1 = _mm256_loadu_pd(a[1].as_ptr().add(i * 4));
            for g in 0..4 {
                let y = _mm256_loadu_pd(w[g].as_ptr().add(i * 4));
                s[0][g] = _mm256_add_pd(s[0][g], _mm256_mul_pd(x0, y));
                s[1][g] = _mm256_add_pd(s[1][g], _mm256_mul_pd(x1, y));
            }
        }
        for r in 0..2 {
            for g in 0..4 {
                let mut q = [0.0f64; 4];
                _mm256_storeu_pd(q.as_mut_ptr(), s[r][g]);
                let mut t = (q[0] + q[1]) + (q[2] + q[3]);
                for i in blocks * 4..n {
                    t += a[r][i] * w[g][i];
                }
                out[r][g] = t;
            }
        }
    }
    out
}

/// The portable build of [`dots_same`].
#[inline(always)]
fn dots_same_impl(a: [&[f64]; 2], w: [&[f64]; 4]) -> [[f64; 4]; 2] {
    let n = a[0].len();
    let blocks = n / 4;
    let mut s = [[[0.0f64; 4]; 4]; 2];
    for i in 0..blocks {
        let x: [&[f64]; 2] = std::array::from_fn(|r| &a[r][i * 4..i * 4 + 4]);
        for g in 0..4 {
            let y = &w[g][i * 4..i * 4 + 4];
            for r in 0..2 {
                for l in 0..4 {
                    s[r][g][l] += x[r][l] * y[l];
                }
            }
        }
    }
    let mut out = [[0.0f64; 4]; 2];
    for r in 0..2 {
        for g in 0..4 {
            let q = &s[r][g];
            let mut t = (q[0] + q[1]) + (q[2] + q[3]);
            for i in blocks * 4..n {
                t += a[r][i] * w[g][i];
            }
            out[r][g] = t;
        }
    }
    out
}

/// Restricted step of one proposal on the dense rows of a tile (Hughes thesis §4.2–4.3):
/// `a_n = Σ_{c∈src} r_nc`, `r'_nj = a_n softmax_j(W̃_nj)` for `a_n >` [`PROPOSAL_MIN_MASS`],
/// `r'_n0 = a_n` otherwise; accumulates `N'`, `S'`, `H'` of the destination columns. The few
/// destination columns are evaluated and accumulated on the rows of `φ` (dot products, then
/// `axpy`s over each destination's row list): skinny GEMMs would spend more on packing than on
/// arithmetic. Fresh destinations' log weights are computed first for all the rows that are
/// re-spread, two rows and up to four clusters at a time ([`FreshRows::weights_rows`], the same
/// values as row by row).
///
/// With [`super::Carry`] only the rows with anchor mass `m_n > 0` are visited, and what is
/// accumulated are the changes `r'_nj − r_{n,cols[j]}` of their responsibilities (the whole
/// columns are completed from the step's own summaries after the reduction); a row with
/// `m_n ≤` [`PROPOSAL_MIN_MASS`] gives its anchor mass to destination 0.
pub(super) fn dense_proposal(
    p: &Proposal,
    fresh: Option<&FreshRows>,
    tile: &Tile,
    w: &ArrayView2<f64>,
    resp: &ArrayViewMut2<f64>,
    ps: &mut PropScratch,
    st: &mut PropPartial,
) {
    let j = st.n.len();
    let Tile { rows, wt, .. } = *tile;
    let carry = p.carry.as_ref();
    if j > ROWWISE_MAX_DEST && carry.is_none() {
        // the GEMMs run over every row of the tile: worth it only when many rows carry source mass
        let active = (0..rows).filter(|&n| p.src.iter().map(|&c| resp[[n, c]]).sum::<f64>() > PROPOSAL_MIN_MASS).count();
        if active * GEMM_MIN_ACTIVE_DIV >= rows {
            return dense_proposal_gemm(p, tile, w, resp, ps, st);
        }
    }
    let (tphi, phi) = (&tile.tphi, &tile.phi);
    // what row n already gives destination jj: its own column's responsibility when carried
    let own = |n: usize, jj: usize| carry.map_or(0.0, |c| resp[[n, c.cols[jj]]]);
    let mass = |n: usize, cols: &[usize]| -> f64 { cols.iter().map(|&c| resp[[n, c]]).sum() };
    ps.reset(j);
    // the mass that decides whether the row is re-spread: the source's, or the anchor's
    let decisive = |n: usize| mass(n, carry.map_or(&p.src, |c| &c.anchor));
    // fresh destinations: their log weights for every row that is re-spread, computed up front
    // in blocks of rows (the same values as row by row)
    let fresh_rows = match (&p.dest, fresh) {
        (Dest::Fresh { .. }, Some(fr)) => {
            ps.active.clear();
            ps.active.extend((0..rows).filter(|&n| decisive(n) > PROPOSAL_MIN_MASS));
            fr.weights_rows(tphi, &ps.active, &mut ps.dwa);
            true
        }
        _ => false,
    };
    let mut next_active = 0;
    for n in 0..rows {
        let m = decisive(n);
        if m.is_nan() || m <= 0.0 {
            continue;
        }
        let wn = wt(n);
        if m <= PROPOSAL_MIN_MASS {
            let old = own(n, 0);
            st.n[0] += wn * m;
            st.h[0] += wn * (ent_plain(old + m) - ent_plain(old));
            ps.lists[0].push((n as u32, wn * m));
            continue;
        }
        let an = if carry.is_some() { mass(n, &p.src) } else { m };
        if fresh_rows {
            debug_assert_eq!(ps.active[next_active], n);
            ps.dw.copy_from_slice(&ps.dwa[next_active * j..(next_active + 1) * j]);
            next_active += 1;
        } else {
            dest_weights(p, fresh, tphi, w, n, &mut ps.dw);
        }
        spread_mass(an, wn, &ps.dw, &mut ps.r, &mut st.h);
        for jj in 0..j {
            let old = own(n, jj);
            if carry.is_some() {
                st.h[jj] -= wn * ent_plain(old);
            }
            let d = ps.r[jj] - old;
            if if carry.is_some() { d != 0.0 } else { d > 0.0 } {
                st.n[jj] += d * wn;
                ps.lists[jj].push((n as u32, d * wn));
            }
        }
    }
    ps.flush(phi, st);
}

/// `−r ln r` (0 for `r ≤ 0`).
#[inline]
fn ent_plain(r: f64) -> f64 {
    ent_term(r, if r > 0.0 { r.ln() } else { 0.0 })
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
fn dense_proposal_gemm(
    p: &Proposal,
    tile: &Tile,
    w: &ArrayView2<f64>,
    resp: &ArrayViewMut2<f64>,
    ps: &mut PropScratch,
    st: &mut PropPartial,
) {
    let Tile { rows, wt, .. } = *tile;
    let (tphi, phi) = (&tile.tphi, &tile.phi);
    let j = st.n.len();
    ps.dwm.clear();
    ps.dwm.resize(rows * j, 0.0);
    let mut dw = ArrayViewMut2::from_shape((rows, j), &mut ps.dwm[..]).expect("destination weights");
    match &p.dest {
        Dest::Fresh { table, e_log_pi } => {
            tphi.eval(table, dw.view_mut());
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
    phi.add_t_product(rp.view(), st.acc.view_mut());
}

/// Scratch buffers of [`budget_proposals_row`].
pub(super) struct PropBufs<'a> {
    pub(super) cand: &'a mut Vec<u32>,
    pub(super) dwr: &'a mut Vec<f64>,
    pub(super) support: &'a mut Vec<u32>,
    pub(super) gsub: &'a mut Vec<f64>,
    pub(super) psub: &'a mut Vec<f64>,
}

/// One row of the L-sparse (or budgeted dense) layout as the restricted steps see it.
pub(super) struct RowSlots<'a> {
    /// row index within the tile
    pub(super) n: usize,
    /// row weight `w_n`
    pub(super) wn: f64,
    /// the row's log weights over all `K` clusters
    pub(super) wr: &'a [f64],
    /// the row's kept responsibilities, one per slot
    pub(super) gv: &'a [f64],
    /// slot of each cluster, [`NONE`] if the row does not hold it
    pub(super) slot_of: &'a [u32],
}

/// Restricted steps (births, deletes) of one row held as `m = gv.len()` entries (`slot_of[k]` is
/// the slot of cluster `k`, [`NONE`] if absent) under the "at most `l` entries" family (Hughes thesis
/// §4.2–4.3 with L-sparse rows): the source mass `a_n` goes to the destinations the row already holds outside the
/// source (no slot needed) plus the best `|src ∩ T_n| + l − m` others, softmax-weighted.
pub(super) fn budget_proposals_row(
    opts: &LocalOptions,
    l: usize,
    row: &RowSlots,
    fresh: &[Option<FreshRows>],
    b: &mut PropBufs,
    part: &mut Partial,
    tphi: &Feats,
    phi: &Feats,
) {
    let RowSlots { n, wn, wr, gv, slot_of } = *row;
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
        if let Some(c) = &p.carry {
            // only the anchor's rows change (the whole columns are completed after the reduction)
            let ma: f64 = c.anchor.iter().filter_map(|&k| slot(k)).map(|s_| gv[s_]).sum();
            if !(ma > 0.0) {
                continue;
            }
        }
        // destination log weights of this row (fresh clusters evaluated here, only for the
        // rows whose support holds the source: a tile-wide GEMM would evaluate every row)
        b.dwr.clear();
        match (&p.dest, fresh[pi].as_ref()) {
            (Dest::Columns(cols), _) => b.dwr.extend(cols.iter().map(|&c| wr[c])),
            (Dest::Fresh { .. }, Some(fr)) => b.dwr.extend((0..fr.len()).map(|jj| fr.weight(tphi, n, jj))),
            (Dest::Fresh { .. }, None) => unreachable!("fresh rows prepared for every fresh proposal"),
        }
        let jn = b.dwr.len();
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
                phi.axpy_rows_into(&mut st.acc, jj, &[(n as u32, coef)]);
            }
        }
        if let Some(c) = &p.carry {
            // minus the row's own responsibilities on the continued columns
            for (jj, &col) in c.cols.iter().enumerate() {
                if let Some(s_) = slot(col) {
                    let old = gv[s_];
                    st.h[jj] -= wn * ent_plain(old);
                    st.n[jj] -= wn * old;
                    if wn * old != 0.0 {
                        phi.axpy_rows_into(&mut st.acc, jj, &[(n as u32, -(wn * old))]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    #[test]
    fn dots_same_equal_the_row_by_row_dots_bit_for_bit() {
        let mut rng = Rng::new(7);
        for n in [0usize, 1, 3, 4, 5, 8, 153, 272] {
            let v = |rng: &mut Rng| (0..n).map(|_| rng.normal() * 10f64.powi((rng.below(7) as i32) - 3)).collect::<Vec<f64>>();
            let a = [v(&mut rng), v(&mut rng)];
            let w = [v(&mut rng), v(&mut rng), v(&mut rng), v(&mut rng)];
            let ar = [&a[0][..], &a[1][..]];
            let wr = [&w[0][..], &w[1][..], &w[2][..], &w[3][..]];
            let got = [dots_same(ar, wr), dots_same_impl(ar, wr)];
            for d in got {
                for r in 0..2 {
                    for g in 0..4 {
                        assert_eq!(d[r][g].to_bits(), super::super::cand32::dot(ar[r], wr[g]).to_bits(), "n={n} r={r} g={g}");
                    }
                }
            }
        }
    }

    #[test]
    fn fresh_weights_of_many_rows_equal_the_row_by_row_weights() {
        let mut rng = Rng::new(11);
        for (rows, f, j) in [(1usize, 9usize, 1usize), (5, 9, 2), (7, 153, 3), (6, 20, 5), (9, 33, 8)] {
            let phi = Array2::from_shape_fn((rows, f), |_| rng.normal());
            let fr = FreshRows {
                wt: Array2::from_shape_fn((j, f), |_| rng.normal()),
                cst: Array1::from_shape_fn(j, |_| rng.normal()),
                e_log_pi: Array1::from_shape_fn(j, |_| -rng.uniform()),
            };
            let tphi = Feats::Dense(phi.view());
            // every row, some rows, a repeated row, no row
            for idx in [(0..rows).collect::<Vec<_>>(), (0..rows).step_by(2).collect(), vec![rows - 1, 0, rows - 1], vec![]] {
                let mut out = Vec::new();
                fr.weights_rows(&tphi, &idx, &mut out);
                assert_eq!(out.len(), idx.len() * j);
                for (i, &n) in idx.iter().enumerate() {
                    for jj in 0..j {
                        assert_eq!(out[i * j + jj].to_bits(), fr.weight(&tphi, n, jj).to_bits(), "rows={rows} f={f} j={j} n={n} jj={jj}");
                    }
                }
            }
        }
    }

    #[test]
    fn spread_mass_splits_the_source_mass_by_softmax() {
        let (an, wn) = (0.6, 2.0);
        let dw = [0.0, 1.0_f64.ln()];
        let mut out = [0.0; 2];
        let mut h = Array1::zeros(2);
        spread_mass(an, wn, &dw, &mut out, &mut h);
        assert!((out[0] - 0.3).abs() < 1e-15 && (out[1] - 0.3).abs() < 1e-15);
        for j in 0..2 {
            assert!((h[j] - wn * (-0.3 * 0.3f64.ln())).abs() < 1e-14);
        }
    }
}
