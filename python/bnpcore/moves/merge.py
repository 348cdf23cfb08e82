r"""Merge move (Hughes thesis §4.1; Hughes & Sudderth 2013 §3.2).

Merging clusters :math:`k_A<k_B` sets :math:`\hat r'_{nk_A}=\hat r_{nk_A}+\hat r_{nk_B}` and
removes column :math:`k_B`. Its summaries need no data pass except the merged entropy

.. math:: H^{\rm merge}_{AB}=-\sum_n(\hat r_{nk_A}+\hat r_{nk_B})\ln(\hat r_{nk_A}+\hat r_{nk_B}),

computed in the Rust local step for the candidate pairs of the lap, batch by batch, from the
same responsibilities as the batch memo. Candidates are chosen at the start of a lap by the
m-score :math:`\Delta_{\rm data}+\Delta_{\rm alloc}` (an upper bound on :math:`\Delta\mathcal L`
because :math:`\Delta_{\rm ent}\le0`), and evaluated exactly at the end of the lap, greedily,
several disjoint merges per lap.

With L-sparse responsibilities (``top_l``) the local step also reports which pairs of clusters
some row held together, and the next lap scores only those pairs (and every pair with a cluster
born since; carried state, so a resumed fit scores the same pairs). Two clusters that no row's
top L ever holds together are far apart, and merging them is what a delete does better. Why: the
m-scores cost one log-normaliser per pair, every lap; on 100,000 image patches at K ≈ 90
(``top_l=4``) scoring the 3,916 pairs took 0.05 s a lap, a sixth of the lap, while 818 pairs
co-occurred and held 156 of the 162 pairs with a positive m-score (at K ≈ 370, 3,193 of
67,896 pairs held 815 of 847).
"""

from __future__ import annotations

import numpy as np

from bnpcore.moves._base import BatchRequest, LapContext, Move, accepts

__all__ = ["MergeMove", "candidate_pairs", "merge_scores"]


def merge_scores(model, G, pairs=None):
    r"""Exact :math:`\Delta_{\rm data}` and :math:`\Delta_{\rm alloc}` of merging every pair
    ``i < j`` (positions) of the summaries ``G`` (Hughes thesis §4.1), or only the ``pairs`` given.

    .. math::
        \Delta_{\rm data}&=c(\hat\lambda_i)+c(\hat\lambda_j)-c(\bar\lambda)-c\big(\bar\lambda\oplus(N_i+N_j,S_i+S_j)\big)\\
        \Delta_{\rm alloc}&=c_B(\hat\eta_j)-c_B(1,\gamma)+c_B(\hat\eta_i)-c_B(\hat\eta_{i1}+N_j,\hat\eta_{i0}-N_j)
        +\sum_{i<k<j}\big[c_B(\hat\eta_k)-c_B(\hat\eta_{k1},\hat\eta_{k0}-N_j)\big]

    with :math:`\hat\eta_k=(1+N_k,\gamma+N^>_k)` and :math:`c_B(a,b)=\ln\Gamma(a+b)-\ln\Gamma(a)-\ln\Gamma(b)`
    for the DP mixture. :math:`\Delta_{\rm alloc}` comes from the allocation model's core
    (``model.alloc.core.merge_delta``, all pairs in :math:`O(K^2)`), :math:`\Delta_{\rm data}`
    from the observation model's log normalisers (one per scored pair: the expensive part,
    pooled in Rust a chunk of pairs at a time, ``ObsModel.elbo_data_per_pair``).

    Parameters
    ----------
    pairs : tuple of two int arrays or None
        Positions ``(i, j)`` with ``i < j`` to score; None scores all pairs.

    Returns
    -------
    d_data, d_alloc : ndarray of shape (K, K)
        Entries ``[i, j]`` with ``i < j`` (of the scored pairs for ``d_data``); the rest is ``-inf``.
    """
    N = np.asarray(G.N, dtype=np.float64)
    S = np.asarray(G.S, dtype=np.float64)
    K = N.shape[0]
    d_data = np.full((K, K), -np.inf)
    if K < 2:
        return d_data, np.full((K, K), -np.inf)
    core = model.obs.core
    iu, ju = np.triu_indices(K, 1) if pairs is None else (np.asarray(pairs[0], dtype=np.intp), np.asarray(pairs[1], dtype=np.intp))
    if pairs is None:
        single = np.asarray(core.elbo_data_per_cluster(N, S))
    else:
        # the log normalisers of the clusters in some scored pair only (each row's own arithmetic)
        need = np.unique(np.concatenate([iu, ju]))
        single = np.full(K, np.nan)
        if need.size:
            single[need] = np.asarray(core.elbo_data_per_cluster(N[need], np.ascontiguousarray(S[need])))
    merged = np.asarray(core.elbo_data_per_pair(N, np.ascontiguousarray(S), iu.astype(np.int64), ju.astype(np.int64)))
    d_data[iu, ju] = merged - single[iu] - single[ju]

    d_alloc = model.alloc.merge_delta(G)
    return d_data, d_alloc


def neighbour_pairs(G, eligible, n_neighbours: int):
    r"""Pairs ``(i, j)``, ``i < j``, of eligible clusters where ``j`` is among the
    ``n_neighbours`` nearest clusters of ``i`` or the reverse.

    Distance: Euclidean between the clusters' average sufficient statistics
    :math:`S_k/N_k` (means and second moments for Gaussians, word frequencies for multinomials,
    feature frequencies for binary data), each coordinate divided by its spread across the
    clusters. Clusters that merge well have similar statistics, so scoring only neighbour pairs
    exactly keeps the good candidates while the cost grows as :math:`K\,m` instead of
    :math:`K^2/2` log-normalisers. Only the choice of candidates depends on it: every merge is
    still accepted only if the exact ELBO rises.
    """
    idx = np.flatnonzero(eligible)
    m = idx.size
    if m < 2:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    Z = np.asarray(G.S, dtype=np.float64)[idx] / np.maximum(np.asarray(G.N, dtype=np.float64)[idx], 1e-300)[:, None]
    sd = Z.std(axis=0)
    Z = Z[:, sd > 0] / sd[sd > 0]
    sq = np.einsum("ij,ij->i", Z, Z)
    dist = sq[:, None] + sq[None, :] - 2.0 * (Z @ Z.T)
    np.fill_diagonal(dist, np.inf)
    nn = min(int(n_neighbours), m - 1)
    near = np.argpartition(dist, nn - 1, axis=1)[:, :nn]
    a = np.repeat(np.arange(m), nn)
    b = near.ravel()
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keys = np.unique(lo * m + hi)
    return idx[keys // m], idx[keys % m]


def candidate_pairs(model, G, *, exclude=(), max_pairs: int = 25, max_K: int = 300, skip=None,
                    max_scored_pairs: int = 5000, n_neighbours: int = 16, allowed=None):
    """Merge candidates: pairs of positions ``(i, j)``, ``i < j``, with m-score > 0, none in
    ``exclude`` (positions), sorted by decreasing m-score, at most ``max_pairs``.

    With more than ``max_K`` clusters only the ``max_K`` largest are paired. ``allowed`` (a
    K × K boolean matrix, either triangle, or None) restricts the scored pairs (the pairs some
    L-sparse row held together). When the eligible (and allowed) pairs are more than
    ``max_scored_pairs``, only neighbour pairs (:func:`neighbour_pairs`, ``n_neighbours`` per
    cluster) among them are scored, so the cost of the m-scores (one log-normaliser per scored
    pair) grows linearly in K. ``skip(i, j)`` may veto pairs (e.g. recent failures)."""
    K = G.K
    if K < 2 or max_pairs < 1:
        return []
    bad = np.zeros(K, dtype=bool)
    bad[list(exclude)] = True
    if max_K < K:
        small = np.argsort(-G.N, kind="stable")[max_K:]
        bad[small] = True
    n_ok = int(np.sum(~bad))
    scored = None
    if allowed is not None:
        allowed = np.asarray(allowed, dtype=bool)
        A = np.triu((allowed | allowed.T) & ~bad[:, None] & ~bad[None, :], 1)
        iu, ju = np.nonzero(A)
        if iu.size > max_scored_pairs:
            ni, nj = neighbour_pairs(G, ~bad, n_neighbours)
            keep = A[ni, nj]
            iu, ju = ni[keep], nj[keep]
        scored = (iu, ju)
    elif n_ok * (n_ok - 1) // 2 > max_scored_pairs:
        scored = neighbour_pairs(G, ~bad, n_neighbours)
    d_data, d_alloc = merge_scores(model, G, pairs=scored)
    score = d_data + d_alloc
    ok = np.isfinite(score) & (score > 0)
    ok &= ~bad[:, None] & ~bad[None, :]
    ii, jj = np.nonzero(ok)
    if ii.size == 0:
        return []
    out = []
    for o in np.lexsort((jj, ii, -score[ii, jj])):
        if len(out) >= max_pairs:
            break
        i, j = int(ii[o]), int(jj[o])
        if skip is None or not skip(i, j):
            out.append((i, j))
    return out


def _pair_positions(stats, ua, ub):
    """Positions ``(i, j)``, ``i < j``, of clusters ``ua`` and ``ub`` (uids) in ``stats``."""
    i, j = sorted(int(p) for p in stats.positions([ua, ub]))
    return i, j


class MergeMove(Move):
    """Merge move: candidate pairs by m-score at the start of a lap, pair entropies from every
    batch visit, exact greedy evaluation of disjoint pairs at the end of the lap.

    ``max_per_lap`` caps the number of candidate pairs tracked in a lap.
    """

    kind = "merge"
    carried = ("failures", "co")

    def __init__(self, manager, start_lap, max_per_lap):
        super().__init__(manager, start_lap, max_per_lap)
        self.pairs: list = []  # (uid_a, uid_b) of this lap
        self.pair_H: dict = {}  # batch -> pair entropies of this lap's candidates
        self.failures: dict = {}  # (uid_a, uid_b) -> (N_a, N_b, structure version) at the failure
        # L-sparse fits: the uid pairs some row held together in the last lap, and the uids
        # that lap knew ({} until a lap has collected them); this lap's, batch by batch
        self.co: dict = {}
        self.co_lap: dict = {}

    def _allowed(self, G):
        """K × K: the pairs the last lap saw together, and every pair with a cluster it did not
        know (born since); None without that information (dense rows, first laps)."""
        if not self.co:
            return None
        uids = np.asarray(G.uids, dtype=np.int64)
        known = np.isin(uids, np.asarray(self.co["uids"], dtype=np.int64))
        allowed = ~known[:, None] | ~known[None, :]
        pairs = np.asarray(self.co["pairs"], dtype=np.int64).reshape(-1, 2)
        pos = {int(u): i for i, u in enumerate(uids)}
        ij = np.array([(pos[a], pos[b]) for a, b in pairs.tolist() if a in pos and b in pos], dtype=np.intp).reshape(-1, 2)
        allowed[ij[:, 0], ij[:, 1]] = True
        allowed[ij[:, 1], ij[:, 0]] = True
        return allowed

    def _close_co(self, ctx):
        """This lap's pairs (every batch visited) become the next lap's."""
        if len(self.co_lap) == ctx.n_batches and ctx.n_batches > 0:
            pairs = np.concatenate([self.co_lap[b][1] for b in range(ctx.n_batches)])
            self.co = {"uids": self.co_lap[0][0], "pairs": np.unique(pairs, axis=0)}
        else:
            self.co = {}
        self.co_lap = {}

    def _failed(self, G, i, j) -> bool:
        key = (int(G.uids[i]), int(G.uids[j]))
        if key not in self.failures:
            return False
        na, nb, version = self.failures[key]
        tol = self.manager.options["merge_retry_change"]
        if version != self.manager.structure_version or abs(G.N[i] - na) > tol * na or abs(G.N[j] - nb) > tol * nb:
            del self.failures[key]
            return False
        return True

    def plan(self, ctx: LapContext) -> None:
        self.pairs, self.pair_H = [], {}
        if not ctx.exact or ctx.lap < max(self.start_lap, 2) or ctx.G.K < 2:
            return
        G = ctx.G
        excl = [i for i, u in enumerate(G.uids) if int(u) in ctx.involved]
        opts = self.manager.options
        pos = candidate_pairs(
            ctx.model, G, exclude=excl, max_pairs=self.max_per_lap, max_K=int(opts["merge_allpairs_max_K"]),
            skip=lambda i, j: self._failed(G, i, j), max_scored_pairs=int(opts["merge_max_scored_pairs"]),
            n_neighbours=int(opts["merge_neighbours"]), allowed=self._allowed(G),
        )
        self.pairs = [(int(G.uids[i]), int(G.uids[j])) for i, j in pos]
        for a, b in self.pairs:
            ctx.involved.update((a, b))

    def batch_request(self, ctx, b, visit):
        sparse = ctx.exact and getattr(ctx.model, "top_l", None) is not None and ctx.model.top_l < ctx.G.K
        if not self.pairs and not sparse:
            return None
        pos = [tuple(ctx.pos(p)) for p in self.pairs]
        return BatchRequest(merge_pairs=pos, cooccur_pairs=sparse)

    def after_batch(self, ctx, b, visit, result):
        if self.pairs:
            self.pair_H[b] = np.asarray(result["pair_H"], dtype=np.float64).copy()
        co = result.get("co_pairs")
        if co is not None:  # (the clusters of the lap's batch visits: moves change them only at its end)
            uids = np.asarray(ctx.G.uids, dtype=np.int64).copy()
            self.co_lap[b] = (uids, uids[np.asarray(co, dtype=np.intp).reshape(-1, 2)])

    def evaluate(self, ctx: LapContext, elbo: float):
        self._close_co(ctx)
        if not self.pairs:
            return 0, elbo
        if len(self.pair_H) != ctx.n_batches:  # pragma: no cover - every batch is visited once a lap
            raise RuntimeError("merge pair entropies are missing for some batches")
        B = ctx.n_batches
        totals = self.pair_H[0].copy()
        for b in range(1, B):
            totals = totals + self.pair_H[b]
        model, mgr = ctx.model, self.manager
        # the lap's accepted merges are chained on G itself for the decisions (each candidate is
        # the exact summaries of the model with the merges accepted so far) and applied to the
        # batch memos once at the end: G is then their tree sum again, as after every lap
        G = ctx.G

        def candidate(m):
            ua, ub = self.pairs[m]
            pa, pb = _pair_positions(G, ua, ub)
            return G.merge(pa, pb, float(totals[m]))

        def all_gains(elbo, used=frozenset()):
            """ELBO change of each candidate not touching ``used`` with the current summaries
            (−inf for the others): from the merge scores (one log-normaliser per pair, Δdata +
            Δalloc + merged − separate entropies) when the model has them, else one whole ELBO
            per candidate."""
            live = [m for m, pr in enumerate(self.pairs) if not (set(pr) & used)]
            out = np.full(len(self.pairs), -np.inf)
            if not live:
                return out
            try:
                pos = np.array([_pair_positions(G, *self.pairs[m]) for m in live], dtype=np.intp)
                dd, da = merge_scores(model, G, pairs=(pos[:, 0], pos[:, 1]))
                H = np.asarray(G.H, dtype=np.float64)
                i, j = pos[:, 0], pos[:, 1]
                out[live] = dd[i, j] + da[i, j] + totals[live] - H[i] - H[j]
            except (AttributeError, NotImplementedError):  # a family without merge scores
                out[live] = [model.elbo(candidate(m)) - elbo for m in live]
            return out

        # greedy in order of the gain with the end-of-lap summaries; the decision of each pair
        # that could rise the ELBO is taken on the exact whole ELBO of the candidate
        gains = all_gains(elbo)
        order = np.lexsort((np.arange(len(self.pairs)), -gains))
        slack = 1e-6 + 10.0 * mgr.accept_rtol * abs(elbo)
        used: set = set()
        done: list = []  # accepted: (uid_a, uid_b, candidate index), in order
        for m in order:
            ua, ub = self.pairs[m]
            if ua in used or ub in used:
                continue
            if gains[m] < -slack:
                # clearly negative (the gain is exact up to round-off): rejected without a
                # whole-ELBO evaluation
                cand, after = None, elbo + float(gains[m])
            else:
                cand = candidate(m)
                after = model.elbo(cand)
            if accepts(elbo, after, mgr.accept_rtol) and gains[m] >= -slack:
                mgr.log(ctx, "merge", [ua, ub], elbo, after, True)
                G, elbo = cand, after
                used.update((ua, ub))
                done.append((ua, ub, int(m)))
                # the allocation term of the other pairs changed (cluster order, sizes)
                gains = all_gains(elbo, frozenset(used))
            else:
                mgr.log(ctx, "merge", [ua, ub], elbo, after, False)
                pa, pb = _pair_positions(G, ua, ub)
                self.failures[(ua, ub)] = (float(G.N[pa]), float(G.N[pb]), mgr.structure_version)
        if done:

            def merge_all(s, hs):
                # hs: each merged entropy, or None for the sum of the two (a frozen memo holds no
                # mass of these clusters)
                for (ua, ub, _), h in zip(done, hs):
                    pa, pb = _pair_positions(s, ua, ub)
                    s = s.merge(pa, pb, float(s.H[pa] + s.H[pb]) if h is None else float(h))
                return s

            elbo = mgr.apply(ctx, merge_all, [[self.pair_H[b][m] for _, _, m in done] for b in range(B)],
                             frozen_part=lambda s: [None] * len(done))
        accepted = len(done)
        self.pairs, self.pair_H = [], {}
        return accepted, elbo
