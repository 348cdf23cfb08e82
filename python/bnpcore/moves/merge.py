r"""Merge move (spec 01 §6.1).

Merging clusters :math:`k_A<k_B` sets :math:`\hat r'_{nk_A}=\hat r_{nk_A}+\hat r_{nk_B}` and
removes column :math:`k_B`. Its summaries need no data pass except the merged entropy

.. math:: H^{\rm merge}_{AB}=-\sum_n(\hat r_{nk_A}+\hat r_{nk_B})\ln(\hat r_{nk_A}+\hat r_{nk_B}),

computed in the Rust local step for the candidate pairs of the lap, batch by batch, from the
same responsibilities as the batch memo. Candidates are chosen at the start of a lap by the
m-score :math:`\Delta_{\rm data}+\Delta_{\rm alloc}` (an upper bound on :math:`\Delta\mathcal L`
because :math:`\Delta_{\rm ent}\le0`), and evaluated exactly at the end of the lap, greedily,
several disjoint merges per lap.
"""

from __future__ import annotations

import numpy as np

from bnpcore.moves._base import BatchRequest, LapContext, Move, accepts

__all__ = ["MergeMove", "candidate_pairs", "merge_scores"]


def merge_scores(model, G, chunk: int = 4096):
    r"""Exact :math:`\Delta_{\rm data}` and :math:`\Delta_{\rm alloc}` of merging every pair
    ``i < j`` (positions) of the summaries ``G`` (spec 01 §6.1.2).

    .. math::
        \Delta_{\rm data}&=c(\hat\lambda_i)+c(\hat\lambda_j)-c(\bar\lambda)-c\big(\bar\lambda\oplus(N_i+N_j,S_i+S_j)\big)\\
        \Delta_{\rm alloc}&=c_B(\hat\eta_j)-c_B(1,\gamma)+c_B(\hat\eta_i)-c_B(\hat\eta_{i1}+N_j,\hat\eta_{i0}-N_j)
        +\sum_{i<k<j}\big[c_B(\hat\eta_k)-c_B(\hat\eta_{k1},\hat\eta_{k0}-N_j)\big]

    with :math:`\hat\eta_k=(1+N_k,\gamma+N^>_k)` and :math:`c_B(a,b)=\ln\Gamma(a+b)-\ln\Gamma(a)-\ln\Gamma(b)`
    for the DP mixture. :math:`\Delta_{\rm alloc}` comes from the allocation model's core
    (``model.alloc.core.merge_delta``, all pairs in :math:`O(K^2)`), :math:`\Delta_{\rm data}`
    from the observation model's log normalisers.

    Returns
    -------
    d_data, d_alloc : ndarray of shape (K, K)
        Entries ``[i, j]`` with ``i < j``; the rest is ``-inf``.
    """
    N = np.asarray(G.N, dtype=np.float64)
    S = np.asarray(G.S, dtype=np.float64)
    K = N.shape[0]
    d_data = np.full((K, K), -np.inf)
    if K < 2:
        return d_data, np.full((K, K), -np.inf)
    core = model.obs.core
    single = np.asarray(core.elbo_data_per_cluster(N, S))
    iu, ju = np.triu_indices(K, 1)
    merged = np.empty(iu.shape[0])
    for lo in range(0, iu.shape[0], chunk):
        a, b = iu[lo : lo + chunk], ju[lo : lo + chunk]
        merged[lo : lo + chunk] = core.elbo_data_per_cluster(
            np.ascontiguousarray(N[a] + N[b]), np.ascontiguousarray(S[a] + S[b])
        )
    d_data[iu, ju] = merged - single[iu] - single[ju]

    d_alloc = model.alloc.merge_delta(G)
    return d_data, d_alloc


def candidate_pairs(model, G, *, exclude=(), max_pairs: int = 25, max_K: int = 300, skip=None):
    """Merge candidates: pairs of positions ``(i, j)``, ``i < j``, with m-score > 0, none in
    ``exclude`` (positions), sorted by decreasing m-score, at most ``max_pairs``.

    With more than ``max_K`` clusters only the ``max_K`` largest are paired (the m-score costs
    one log-normaliser per pair). ``skip(i, j)`` may veto pairs (e.g. recent failures)."""
    K = G.K
    if K < 2 or max_pairs < 1:
        return []
    d_data, d_alloc = merge_scores(model, G)
    score = d_data + d_alloc
    ok = np.isfinite(score) & (score > 0)
    bad = np.zeros(K, dtype=bool)
    bad[list(exclude)] = True
    if max_K < K:
        small = np.argsort(-G.N, kind="stable")[max_K:]
        bad[small] = True
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


class MergeMove(Move):
    """Merge move: candidate pairs by m-score at the start of a lap, pair entropies from every
    batch visit, exact greedy evaluation of disjoint pairs at the end of the lap.

    ``max_per_lap`` caps the number of candidate pairs tracked in a lap.
    """

    kind = "merge"
    carried = ("failures",)

    def __init__(self, manager, start_lap, max_per_lap):
        super().__init__(manager, start_lap, max_per_lap)
        self.pairs: list = []  # (uid_a, uid_b) of this lap
        self.pair_H: dict = {}  # batch -> pair entropies of this lap's candidates
        self.failures: dict = {}  # (uid_a, uid_b) -> (N_a, N_b, structure version) at the failure

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
            skip=lambda i, j: self._failed(G, i, j),
        )
        self.pairs = [(int(G.uids[i]), int(G.uids[j])) for i, j in pos]
        for a, b in self.pairs:
            ctx.involved.update((a, b))

    def batch_request(self, ctx, b, visit):
        if not self.pairs:
            return None
        pos = [tuple(ctx.pos(p)) for p in self.pairs]
        return BatchRequest(merge_pairs=pos)

    def after_batch(self, ctx, b, visit, result):
        if self.pairs:
            self.pair_H[b] = np.asarray(result["pair_H"], dtype=np.float64).copy()

    def evaluate(self, ctx: LapContext, elbo: float):
        if not self.pairs:
            return 0, elbo
        if len(self.pair_H) != ctx.n_batches:  # pragma: no cover - every batch is visited once a lap
            raise RuntimeError("merge pair entropies are missing for some batches")
        B = ctx.n_batches
        totals = self.pair_H[0].copy()
        for b in range(1, B):
            totals = totals + self.pair_H[b]
        model, mgr = ctx.model, self.manager

        def candidate(m):
            ua, ub = self.pairs[m]
            pa, pb = sorted(int(p) for p in ctx.pos([ua, ub]))
            return ctx.G.merge(pa, pb, float(totals[m]))

        # greedy in order of the exact gain with the end-of-lap summaries
        gains = np.array([model.elbo(candidate(m)) - elbo for m in range(len(self.pairs))])
        order = np.lexsort((np.arange(len(self.pairs)), -gains))
        used: set = set()
        accepted = 0
        for m in order:
            ua, ub = self.pairs[m]
            if ua in used or ub in used:
                continue
            after = model.elbo(candidate(m))
            if accepts(elbo, after, mgr.accept_rtol):
                pa, pb = sorted(int(p) for p in ctx.pos([ua, ub]))
                new = mgr.apply(
                    ctx, lambda s, h, pa=pa, pb=pb: s.merge(pa, pb, float(h)), [self.pair_H[b][m] for b in range(B)],
                    frozen_part=lambda s, pa=pa, pb=pb: float(s.H[pa] + s.H[pb]),
                )
                mgr.log(ctx, "merge", [ua, ub], elbo, new, True)
                elbo = new
                used.update((ua, ub))
                accepted += 1
            else:
                mgr.log(ctx, "merge", [ua, ub], elbo, after, False)
                pa, pb = sorted(int(p) for p in ctx.pos([ua, ub]))
                self.failures[(ua, ub)] = (float(ctx.G.N[pa]), float(ctx.G.N[pb]), mgr.structure_version)
        self.pairs, self.pair_H = [], {}
        return accepted, elbo
