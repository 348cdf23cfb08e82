//! L-sparse rows of a tile (`top_l = L < K`): per row the `L` largest log weights are selected
//! ([`super::top_l`], or among the f32 candidates of [`super::cand32`]) and normalised over; the
//! entropies, merge pair entropies, co-occurrences, collected column, restricted steps and
//! summaries are computed from the kept entries only (Hughes thesis §7.1; Hughes & Sudderth, *Fast learning of clusters and
//! topics via sparse posteriors*).

use ndarray::{s, Array1, Array2, ArrayView2};

use super::proposal::{budget_proposals_row, PropBufs, RowSlots};
use super::top_l::{select_top_among, select_top_l, NONE};
use super::{ent_term, log_add_exp, log_resp, softmax_row, LocalContext, Partial, Scratch, Tile};
use crate::linalg::gram_upper;

/// [`select_top_l`] on a row `w` that is `−∞` outside `cand` (with `cand` holding every
/// cluster with a finite value), looking at the candidates only: the same result.
pub(crate) fn select_top_l_of_candidates(w: &[f64], l: usize, cand: &[u32], scratch: &mut Vec<u32>, idx: &mut Vec<u32>) -> usize {
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
/// computed from them (Hughes thesis §7.1, eq. 7.3; moves of ch. 4). With `cands`, the log weights are those
/// of the candidates in `sc.c32` instead ([`cand32`]: a superset of every row's top `l`, plus
/// the proposals' destination columns), placed in the `−∞`-filled row `sc.wx`: the selection
/// over that row is the selection over the full row.
pub(super) fn sparse_tile(ctx: &LocalContext, tile: &Tile, l: usize, sc: &mut Scratch, part: &mut Partial) {
    let Tile { t0, rows, wt, .. } = *tile;
    let phi = &tile.phi;
    let (opts, k, defer_vech, cands) = (ctx.opts, ctx.k, ctx.defer_vech, ctx.cands);
    let (idx_writer, val_writer, col_writer) = (&ctx.out.idx, &ctx.out.val, &ctx.out.col);
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
    let mut out_col = if opts.collect_cols.is_empty() { None } else { Some(unsafe { col_writer.rows(t0, t0 + rows) }) };
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
        if let Some(bits) = part.co_bits.as_mut() {
            for s_ in 0..m {
                for t_ in s_ + 1..m {
                    let (a, b) = (sc.sel[s_] as usize, sc.sel[t_] as usize);
                    let bit = a.min(b) * k + a.max(b);
                    bits[bit / 64] |= 1u64 << (bit % 64);
                }
            }
        }
        if let (Some(c), Some(co)) = (opts.cooccur_col, part.cooccur.as_mut()) {
            if let Some(sc_) = slot(c, &sc.slot_of) {
                let f = wn * sc.gv[sc_];
                for s_ in 0..m {
                    co[sc.sel[s_] as usize] += f * sc.gv[s_];
                }
            }
        }
        if let Some(oc) = out_col.as_mut() {
            for (i, &c) in opts.collect_cols.iter().enumerate() {
                oc[[n, i]] = slot(c, &sc.slot_of).map_or(0.0, |s_| sc.gv[s_]);
            }
        }
        // restricted steps (births, deletes) with slot budgets (Hughes thesis §4.2–4.3 with L-sparse rows)
        if !opts.proposals.is_empty() {
            let mut bufs =
                PropBufs { cand: &mut sc.cand, dwr: &mut sc.dwr, support: &mut sc.support, gsub: &mut sc.gsub, psub: &mut sc.psub };
            let row = RowSlots { n, wn, wr, gv: &sc.gv[..m], slot_of: &sc.slot_of };
            budget_proposals_row(opts, l, &row, ctx.fresh, &mut bufs, part, &tile.tphi, phi);
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
        phi.axpy_rows_into(&mut part.acc, kk, &sc.bucket[lo..hi]);
    }
}

/// Sparse Gaussian summaries of one leaf from its `(cluster, row, coefficient)` entries: per
/// cluster, gather the centred rows `Y_k` (`n_k × D`) and `Z_k = diag(c) Y_k`, then
/// `Σ c y yᵀ = Z_kᵀ Y_k` is one GEMM (BLAS-3 instead of one rank-1 `vech` update per entry) and
/// `Σ c y` the column sums of `Z_k`; the upper triangle is added to the `vech` accumulator.
/// Entries are bucketed by a stable counting sort, so the summation order is fixed.
pub(super) fn vech_bucket_summaries(
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
        gram_upper(nk, d, &sc.gz, &sc.gy, sc.gram.as_slice_mut().expect("contiguous gram"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_among_candidates_matches_the_full_row() {
        let w = [f64::NEG_INFINITY, 2.0, f64::NEG_INFINITY, 0.5, 3.0, f64::NEG_INFINITY];
        let cand = [1u32, 3, 4];
        let (mut s1, mut a, mut s2, mut b) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for l in 1..5 {
            let m = select_top_l_of_candidates(&w, l, &cand, &mut s1, &mut a);
            let m2 = select_top_l(&w, l, &mut s2, &mut b);
            let keep = |v: &[u32]| {
                let mut k: Vec<u32> = v.iter().copied().filter(|&i| w[i as usize] > f64::NEG_INFINITY).collect();
                k.sort_unstable();
                k
            };
            assert_eq!(keep(&a[..m]), keep(&b[..m2]), "l = {l}");
        }
    }
}
