r"""Delete move (spec 01 §6.3).

A delete removes a target cluster :math:`k_t` and redistributes its mass over an absorbing set
:math:`A`: with :math:`a_n=\hat r_{nk_t}+\sum_{j\in A}\hat r_{nj}`,

.. math:: \hat r'_{nj}=a_n\,\mathrm{softmax}_{j\in A}(\tilde W_{nj})\ (j\in A),\qquad
          \hat r'_{nk_t}=0,\qquad \hat r'_{nk}=\hat r_{nk}\ (k\notin A\cup\{k_t\}),

the exact optimum of the local objective restricted to :math:`A` for the weights
:math:`\tilde W_{nj}=\mathbb E\log F(x_n\mid\tilde\phi_j)+\mathbb E[\ln\tilde\pi_j]`. The Rust local
step computes the |A| candidate columns' summaries at every batch visit, from the batch's own
responsibilities; the candidate is evaluated exactly at the end of the lap.

Target: the smallest non-empty cluster not involved in another move and not failed
``delete_max_fail`` times since the last accepted move (any kind) at about its current size (a
change of ``delete_retry_change`` in its size resets the count). Absorbing set: every other uninvolved cluster if there are at most
``delete_max_absorb``, otherwise the ``delete_max_absorb`` ones with the largest co-occurrence
:math:`\sum_n\hat r_{nk_t}\hat r_{nk}` (collected for the planned target during the previous
lap) or, without it, the largest merge data gain with the target.

Refinement (spec 01 §6.3.3). With one batch (``algorithm="full"``) the candidate is refined
``delete_refine_iters`` times at the end of the iteration: global step for the candidate, then
the restricted step again with the globals and data of the batch visit (which reproduces the
same responsibilities bit for bit, so the candidate stays consistent with the memo). With several
batches there are no extra passes: in the first lap :math:`\tilde\phi_A` are the
current parameters of :math:`A` and :math:`\tilde\pi` the current weights without the target; if the
candidate is not accepted, the next lap uses the candidate's own global step (the parameters of
:math:`A` after absorbing the target's mass) — at most ``delete_laps`` laps. Each lap's candidate
summaries come from that lap's responsibilities, so every evaluation is exact. This is what lets
a delete escape where every pairwise merge lowers the ELBO (1-D N(0,1) data, §6.1.5).
"""

from __future__ import annotations

import numpy as np

from bnpcore.moves._base import (
    BatchRequest,
    LapContext,
    Move,
    accepts,
    replace_columns,
    sum_parts,
)

__all__ = ["DeleteMove"]


class _Proposal:
    def __init__(self, target, absorb, laps):
        self.target = int(target)
        self.absorb = [int(u) for u in absorb]
        self.laps_left = int(laps)
        self.attempts = 0
        self.parts: dict = {}
        self.N = self.S = self.e_log_pi = None

    @property
    def uids(self):
        return [self.target] + self.absorb


def _absorbing_weights(model, G, pos_t, pos_A):
    """E[ln π] of the candidate without the target, at the absorbing clusters."""
    cand = G.drop([pos_t])
    keep = np.setdiff1d(np.arange(G.K), [pos_t])
    where = {int(p): i for i, p in enumerate(keep)}
    elp = model.alloc.e_log_pi(cand)
    return np.ascontiguousarray(elp[[where[int(p)] for p in pos_A]])


class DeleteMove(Move):
    """Delete move with exact end-of-lap evaluation and lap-to-lap refinement."""

    kind = "delete"
    carried = ("pending", "failures", "co_target", "co_parts", "cooccur")

    def __init__(self, manager, start_lap, max_per_lap):
        super().__init__(manager, start_lap, max_per_lap)
        self.active: list = []
        self.pending: list = []
        self.failures: dict = {}  # uid -> (count, N at the last failure)
        self.co_target = None  # uid whose co-occurrence is collected this lap
        self.co_parts: dict = {}
        self.cooccur: dict = {}  # uid -> (uids, co-occurrence vector) from the previous lap

    def busy(self) -> bool:
        return bool(self.pending)

    def _eligible(self, uid, n) -> bool:
        if uid not in self.failures:
            return True
        count, n0, version = self.failures[uid]
        changed = abs(n - n0) > self.manager.options["delete_retry_change"] * max(n0, 1e-300)
        if changed or version != self.manager.structure_version:
            self.failures.pop(uid)
            return True
        return count < self.manager.options["delete_max_fail"]

    def _targets(self, ctx):
        G = ctx.G
        order = np.lexsort((G.uids, G.N))
        return [int(G.uids[i]) for i in order if G.N[i] > 0 and int(G.uids[i]) not in ctx.involved and self._eligible(int(G.uids[i]), float(G.N[i]))]

    def reserve(self, ctx: LapContext) -> None:
        keep = []
        for p in self.pending:
            if ctx.exact and ctx.alive(p.uids) and not (set(p.uids) & ctx.involved):
                ctx.involved.update(p.uids)
                ctx.targets.add(p.target)
                keep.append(p)
            else:  # displaced by a birth (or its clusters are gone): record its last evaluation
                self._fail(p, ctx)
        self.pending = keep

    def _fail(self, p, ctx):
        before, after, n_t = p.last
        self.manager.log(ctx, "delete", p.uids, before, after, False, attempts=p.attempts, lap=p.last_lap)
        count = self.failures.get(p.target, (0, 0.0, 0))[0]
        self.failures[p.target] = (count + 1, n_t, self.manager.structure_version)

    def plan(self, ctx: LapContext) -> None:
        self.active = list(self.pending)
        self.pending = []
        co, self.cooccur = self.cooccur, {}
        if not ctx.exact or ctx.lap < max(self.start_lap, 2) or ctx.G.K < 2:
            return
        opts = self.manager.options
        G, model = ctx.G, ctx.model
        max_absorb = int(opts["delete_max_absorb"])
        for uid in self._targets(ctx):
            if len(self.active) >= self.max_per_lap:
                break
            if uid in ctx.involved:
                continue
            others = [int(u) for u in G.uids if int(u) != uid and int(u) not in ctx.involved]
            if not others:
                continue
            if len(others) > max_absorb:
                if uid in co:
                    cu, cv = co[uid]
                    val = dict(zip(cu, cv))
                    score = np.array([val.get(u, 0.0) for u in others])
                else:
                    pt = int(ctx.pos([uid])[0])
                    po = ctx.pos(others)
                    core = model.obs.core
                    single = np.asarray(core.elbo_data_per_cluster(G.N, G.S))
                    merged = np.asarray(core.elbo_data_per_cluster(
                        np.ascontiguousarray(G.N[po] + G.N[pt]), np.ascontiguousarray(G.S[po] + G.S[pt])))
                    score = merged - single[po] - single[pt]
                pick = np.lexsort((np.arange(len(others)), -score))[:max_absorb]
                others = [others[i] for i in sorted(pick)]
            p = _Proposal(uid, others, opts["delete_laps"])
            self.active.append(p)
            ctx.involved.update(p.uids)
            ctx.targets.add(uid)
        # first-lap destination parameters: the absorbing clusters as they are
        for p in self.active:
            if p.N is None:
                pt = int(ctx.pos([p.target])[0])
                pa = ctx.pos(p.absorb)
                p.N = np.ascontiguousarray(G.N[pa])
                p.S = np.ascontiguousarray(G.S[pa])
                p.e_log_pi = _absorbing_weights(model, G, pt, pa)

    def plan_next(self, ctx: LapContext) -> None:
        self.co_target, self.co_parts = None, {}
        if ctx.lap + 1 < max(self.start_lap, 2) or self.max_per_lap < 1 or not ctx.exact:
            return
        if int(self.manager.options["delete_max_absorb"]) >= ctx.G.K - 1:
            return
        t = self._targets(ctx)
        t = [u for u in t if u not in ctx.targets]
        if t:
            self.co_target = t[0]

    def batch_request(self, ctx, b, visit):
        props = []
        for p in self.active:
            props.append({
                "src": [int(x) for x in ctx.pos(p.uids)],
                "fresh_N": p.N, "fresh_S": p.S, "fresh_e_log_pi": p.e_log_pi,
            })
        co = None if self.co_target is None else int(ctx.pos([self.co_target])[0])
        if not props and co is None:
            return None
        return BatchRequest(proposals=props, cooccur_col=co)

    def after_batch(self, ctx, b, visit, result):
        for p, part in zip(self.active, result["proposals"]):
            p.parts[b] = tuple(np.array(a, dtype=np.float64, copy=True) for a in part)
        if self.co_target is not None and result["cooccur"] is not None:
            self.co_parts[b] = np.array(result["cooccur"], dtype=np.float64, copy=True)

    @staticmethod
    def _adopt(p, model, G, cand, pt, pa, N, S):
        """Destination parameters := the candidate's own global step (A after absorbing)."""
        p.N, p.S = np.ascontiguousarray(N), np.ascontiguousarray(S)
        keep = np.setdiff1d(np.arange(G.K), [pt])
        where = {int(q): i for i, q in enumerate(keep)}
        elp = model.alloc.e_log_pi(cand)
        p.e_log_pi = np.ascontiguousarray(elp[[where[int(q)] for q in pa]])

    def evaluate(self, ctx: LapContext, elbo: float):
        mgr, model = self.manager, ctx.model
        B = ctx.n_batches
        # keep the co-occurrence of the planned target (uids at the time of collection)
        if self.co_target is not None and len(self.co_parts) == B:
            v = self.co_parts[0].copy()
            for b in range(1, B):
                v = v + self.co_parts[b]
            self.cooccur = {self.co_target: ([int(u) for u in ctx.G.uids], v)}
        accepted = 0
        refine = int(mgr.options["delete_refine_iters"]) if B == 1 and mgr.visit_inputs.get(0) else 1
        for p in self.active:
            p.attempts += 1
            if len(p.parts) != B or not ctx.alive(p.uids):  # pragma: no cover - defensive
                continue
            pt = int(ctx.pos([p.target])[0])
            pa = ctx.pos(p.absorb)
            for it in range(max(refine, 1)):
                parts = [p.parts[b] for b in range(B)]
                N, S, H = sum_parts(parts)
                cand = replace_columns(ctx.G, pa, N, S, H).drop([pt])
                after = model.elbo(cand)
                if accepts(elbo, after, mgr.accept_rtol) or it == refine - 1:
                    break
                # full-dataset refinement (spec 01 §6.3.3): global step for the candidate, then
                # the restricted step again on the same responsibilities (same data, same globals
                # as the batch visit, so the same r and the same memo)
                self._adopt(p, model, ctx.G, cand, pt, pa, N, S)
                X, G_visit = mgr.visit_inputs[0]
                prop = {"src": [int(x) for x in G_visit.positions(p.uids)], "fresh_N": p.N, "fresh_S": p.S, "fresh_e_log_pi": p.e_log_pi}
                out = model.local_step(X, G_visit, n_threads=ctx.n_threads, proposals=[prop])
                p.parts = {0: tuple(np.array(a, dtype=np.float64, copy=True) for a in out["proposals"][0])}
            if accepts(elbo, after, mgr.accept_rtol):

                def transform(s, part, pt=pt, pa=pa):
                    return replace_columns(s, pa, part[0], part[1], part[2]).drop([pt])

                new = mgr.apply(ctx, transform, parts, frozen_part=lambda s, pa=pa: (s.N[pa], s.S[pa], s.H[pa]))
                mgr.log(ctx, "delete", p.uids, elbo, new, True, attempts=p.attempts)
                elbo = new
                accepted += 1
                continue
            p.laps_left -= 1
            p.last, p.last_lap = (elbo, after, float(ctx.G.N[pt])), ctx.lap
            if p.laps_left > 0:
                # next lap: destinations at the candidate's own optimum (global step on its summaries)
                self._adopt(p, model, ctx.G, cand, pt, pa, N, S)
                p.parts = {}
                self.pending.append(p)
                continue
            self._fail(p, ctx)
        self.active = []
        return accepted, elbo


DeleteMove.state_classes = {"_Proposal": _Proposal}
