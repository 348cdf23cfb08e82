//! Dense rows of a tile: `r_nk = exp(W_nk − lse_n)` over all `K` clusters, entropies, merge pair
//! entropies, co-occurrences, the collected column and the summaries `N`, `Acc += Rᵀ φ(X)` (one
//! GEMM); restricted steps of proposals via [`super::proposal`].

use ndarray::{s, Axis};

use super::proposal::{budget_proposals_row, dense_proposal, PropBufs, RowSlots};
use super::top_l::NONE;
use super::{ent_term, log_add_exp, log_resp, softmax_row, LocalContext, Partial, Scratch, Tile};

/// Dense responsibilities of one tile (log weights in `sc.w`) and their summaries.
pub(super) fn dense_tile(ctx: &LocalContext, tile: &Tile, sc: &mut Scratch, part: &mut Partial) {
    let Tile { t0, rows, wt, .. } = *tile;
    let (opts, phi) = (ctx.opts, &tile.phi);
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
        if lse[n] == f64::NEG_INFINITY {
            for j in 0..k {
                h[j] += wn * ent_term(rr[j], log_resp(wr[j], lse[n], k));
            }
        } else {
            // ln r_j = w_j − lse without log_resp's per-entry test, so the loop vectorises
            let l = lse[n];
            for ((hj, &r), &w) in h.iter_mut().zip(rr).zip(wr) {
                *hj += wn * ent_term(r, w - l);
            }
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
            let row = RowSlots { n, wn: wt(n), wr: wr.as_slice().expect("contiguous"), gv: &sc.gv, slot_of: &sc.slot_of };
            budget_proposals_row(opts, l, &row, ctx.fresh, &mut bufs, part, &tile.tphi, phi);
            for &j in &sc.sel {
                sc.slot_of[j as usize] = NONE;
            }
        }
    }
    if opts.top_l.is_none() {
        for (pi, p) in opts.proposals.iter().enumerate() {
            dense_proposal(p, ctx.fresh[pi].as_ref(), tile, &w, &resp, &mut sc.prop, &mut part.props[pi]);
        }
    }
    if !opts.collect_cols.is_empty() {
        // SAFETY: rows t0..t0+rows belong to this leaf only.
        let mut out = unsafe { ctx.out.col.rows(t0, t0 + rows) };
        for (i, &c) in opts.collect_cols.iter().enumerate() {
            out.column_mut(i).assign(&resp.column(c));
        }
    }
    if opts.return_resp && !ctx.out.resp.ptr.is_null() {
        // SAFETY: rows t0..t0+rows belong to this leaf only.
        let mut out = unsafe { ctx.out.resp.rows(t0, t0 + rows) };
        out.assign(&resp);
    }
    if opts.weights.is_some() {
        for (n, mut row) in resp.rows_mut().into_iter().enumerate() {
            row *= wt(n);
        }
    }
    part.n += &resp.sum_axis(Axis(0));
    phi.add_t_product(resp.view(), part.acc.view_mut());
}

#[cfg(test)]
mod tests {
    use crate::alloc::Alloc;
    use crate::local::{LocalOptions, Proposal};
    use crate::obs::{Mult, Obs};
    use ndarray::{array, Axis};

    /// Dense rows are distributions, the summaries are their weighted sums, and the merge pair
    /// entropy and collected column come from the same rows.
    #[test]
    fn dense_rows_summaries_and_move_outputs_agree() {
        let obs = Obs::Mult(Mult::new(array![0.5, 0.5, 0.5]).unwrap());
        let x = array![[3.0, 0.0, 1.0], [0.0, 2.0, 2.0], [1.0, 1.0, 0.0], [5.0, 0.0, 0.0], [0.0, 0.0, 4.0]];
        let (n0, s0) = (array![2.0, 3.0, 1.0], array![[4.0, 0.0, 1.0], [0.0, 3.0, 2.0], [0.0, 0.0, 3.0]]);
        let w = array![1.0, 0.5, 2.0, 1.0, 0.25];
        let opts = LocalOptions {
            weights: Some(w.view()),
            merge_pairs: vec![(0, 2)],
            proposals: vec![Proposal { src: vec![1], dest: crate::local::Dest::Columns(vec![0, 2]), carry: None }],
            collect_cols: vec![1, 0],
            return_resp: true,
            ..Default::default()
        };
        let out = obs.local_step(x.view(), n0.view(), s0.view(), &Alloc::Dp { gamma: 1.0 }, &opts).unwrap();
        let r = out.resp.unwrap();
        for row in r.rows() {
            assert!((row.sum() - 1.0).abs() < 1e-14);
        }
        let rw = &r * &w.view().insert_axis(Axis(1));
        let (n, s) = obs.summarize(x.view(), rw.view()).unwrap();
        assert!(out.n.iter().zip(&n).all(|(a, b)| (a - b).abs() < 1e-12));
        assert!(out.s.iter().zip(&s).all(|(a, b)| (a - b).abs() < 1e-12));
        let pair: f64 = (0..5).map(|i| w[i] * -(r[[i, 0]] + r[[i, 2]]) * (r[[i, 0]] + r[[i, 2]]).ln()).sum();
        assert!((out.moves.pair_h[0] - pair).abs() < 1e-12);
        let cols = out.moves.cols.unwrap();
        assert_eq!(cols.column(0), r.column(1));
        assert_eq!(cols.column(1), r.column(0));
        // the proposal moves column 1's mass onto columns 0 and 2: its counts total the mass
        assert!((out.moves.proposals[0].n.sum() - n[1]).abs() < 1e-12);
    }
}
