r"""Delete move (Hughes thesis §4.3).

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

Rows re-spread. When the target's mass is at most ``delete_carry_ratio`` (0.05) times that of
the largest absorbing cluster, only the rows holding target mass are re-spread (the local step's
``anchor``/``carry``; dense rows whose target mass is at most ``PROPOSAL_MIN_MASS`` just add it
to the first absorbing cluster); every other row keeps its responsibilities on :math:`A`, and the
candidate's columns are the step's own summaries of :math:`A` plus the changes of the re-spread
rows. It is still a valid responsibility matrix, so the evaluation stays exact; what it gives up
is the rebalancing among :math:`A` of rows the target never touched, which the next lap's local
step does anyway once a delete is accepted. Why: the smallest cluster is the usual target, and at
large K its ten absorbing clusters hold a large share of the rows: on 100,000 image patches at
K ≈ 90 with ``top_l=4`` a delete proposal made each batch's local step 1.7× slower (0.08 →
0.14 s) for a target of 7–20 rows, lap after lap, and none was accepted (all lost 100–1,600
nats, also because re-spread rows far from the target could only lose); with the target's rows
only, the same laps cost what laps without a delete cost and three deletes of near-empty
clusters were accepted. Targets of a size comparable to their absorbing clusters (overlapping
clusters, e.g. 1-D N(0, 1) data from K = 5) keep the whole restricted step: there the
rebalancing is what makes the delete pay.

Refinement (Hughes thesis §4.3). With one batch (``algorithm="full"``) the candidate is refined
up to ``delete_refine_iters`` times at the end of the iteration: global step for the candidate,
then the restricted step again with the globals and data of the batch visit (which reproduces
the same responsibilities bit for bit, so the candidate stays consistent with the memo). Each
refinement is a pass over the whole data set, so it stops early once a pass raised the
candidate's objective by less than ``delete_min_progress`` times the gain still missing (a
delete of a real cluster never gets close; on overlapping clusters each pass closes about a
quarter of the gap and the refinement continues).

With several batches there are no extra passes over the data. Every evaluation is exact whatever
destination parameters :math:`\tilde\phi_A,\tilde\pi` the batch visits used (each batch's part is
the exact restricted optimum for the parameters it was computed with, so the parts sum to the
summaries of a valid whole-dataset responsibility matrix); the destinations only decide how good
the candidate is, and they are improved three ways:

* in its first lap the destinations are the absorbing clusters as they are (parameters of
  :math:`A`, weights without the target), or with several batches those refined by the screen's
  subsample steps (below); at the end of a rejected lap they become the candidate's own global
  step (:math:`A` after absorbing the target's mass);
* from its second lap on, the candidate is refined *incrementally*, as memoized inference refines
  the model (Hughes & Sudderth 2013, §3): after every batch visit the destinations are re-derived
  from this lap's parts of the visited batches and the previous lap's parts of the others, so
  the restricted coordinate ascent takes one step per batch instead of one per lap;
* at the end of a rejected lap, up to ``delete_sample_iters`` restricted steps are run on a
  fixed-stride subsample of this lap's rows (each row weighted to the whole data), at most
  ``delete_max_sample`` rows and ``delete_sample_budget`` of a lap's rows in total (skipped when
  that leaves fewer than ``delete_min_sample`` rows: small data sets get no subsample steps).
  They run after the candidate's first lap and then only while a lap closes at least
  ``delete_sample_min_step`` of the missing gain: near the candidate's fixed point the
  subsample's sampling noise would cost more than its steps gain (with two batches, subsample
  steps at every lap left one 1-D seed of ten stuck a few nats short).

Screening (several batches). A new candidate whose target has about ``SCREEN_MIN_ROWS`` (10)
or more rows in the subsample is first refined by the same subsample steps (at most
``SCREEN_STEPS`` = 3 of them), on the previous lap's subsample from the absorbing clusters as
they are, and each step gives an estimate of its gain (the ELBO of the subsample's summaries
with the candidate's columns minus that of the subsample's own summaries, both weighted to the
whole data; the same rows on both sides, so their noise largely cancels). The candidate is not
proposed when the last estimate loses more than ``delete_screen_loss`` nats per row of the
target (default 1) *and* the last step closed less than ``delete_sample_min_step`` of the gain
still missing: a delete that is far below zero and no
longer moving. Its target then counts as failed (retried after an accepted move or a change of
its size), and the lap carries no delete. Otherwise the candidate starts its first lap from the
subsample-refined destinations. The screen decides only what is tried: an accepted delete is
still judged by the exact whole-dataset ELBO. Why: on the 100,000 × 16, 25-cluster benchmark
every delete of a real cluster estimated −6,000 to −25,000 nats (−7 to −25 per target row,
its steps stalled) and, proposed, spent a lap's local steps on ten destination columns for
nothing (about a fifth of a lap), while on one standard Gaussian (the deletes that must succeed)
the third estimate was between −40 and +53 nats, its last step closing a third or more of the
gap. After the first step only the subsample rows with some responsibility on the candidate's
clusters are stepped again (``SAMPLE_MASS_FLOOR``).

A rejected candidate is carried to the next lap for at least ``delete_laps`` laps, then as long
as its gain still rises by at least ``delete_min_progress`` times its remaining deficit, up to
``delete_max_laps`` laps. Why: the restricted coordinate ascent converges slowly where clusters
overlap (the gain deficit shrinks by a factor of about 0.75 per step on 1-D N(0, 1) data), and
with one step per lap from the absorbing clusters as they are and three laps per candidate, no
delete was ever accepted on 25,000 points from N(0, 1) started at K = 5 with five batches, while
one batch (five refinement steps per lap) reached K = 1 in 11 laps. Deletes are what let a fit
escape where every pairwise merge lowers the ELBO (1-D N(0,1) data, Hughes thesis §4.4.1).
"""

from __future__ import annotations

import numpy as np

from bnpcore.moves._base import (
    BatchRequest,
    LapContext,
    Move,
    accepts,
    replace_columns,
    size_changed,
    sum_parts,
)

__all__ = ["DeleteMove"]

#: responsibility mass on a delete candidate's clusters below which a subsample row is left out
#: of the candidate's later subsample steps (it could move at most this fraction of its weight)
SAMPLE_MASS_FLOOR = 1e-8
#: subsample steps of a new candidate's screen (each costs a local step on the subsample)
SCREEN_STEPS = 3
#: a candidate is screened only if the subsample holds about this many of its target's rows
#: (fewer would make the estimate noise: at K ~ 400 the smallest clusters have a row or two there,
#: while the screen's first step costs a full local step of the subsample over every cluster)
SCREEN_MIN_ROWS = 10


class _Proposal:
    def __init__(self, target, absorb, laps):
        self.target = int(target)
        self.absorb = [int(u) for u in absorb]
        self.laps_left = int(laps)
        self.attempts = 0
        self.parts: dict = {}
        self.prev_parts: dict = {}  # the previous lap's parts (multi-batch incremental refinement)
        self.gains: list = []  # ELBO gain of the candidate at each evaluation
        self.N = self.S = self.e_log_pi = None

    @property
    def uids(self):
        return [self.target] + self.absorb


def _request(p, positions, G, ratio) -> dict:
    """The local step's proposal of candidate ``p`` (``positions`` of its target, then of its
    absorbing set, in ``G``): destinations = its current parameters. When the target's mass is
    at most ``ratio`` (``delete_carry_ratio``) times the largest absorbing cluster's, only the
    target's rows are re-spread (``anchor``/``carry``): the rows without target mass keep their
    responsibilities, so the delete costs the target's rows instead of the absorbing set's."""
    src = [int(x) for x in positions]
    out = {"src": src, "fresh_N": p.N, "fresh_S": p.S, "fresh_e_log_pi": p.e_log_pi}
    N = np.asarray(G.N, dtype=np.float64)
    if ratio is not None and N[src[0]] <= float(ratio) * float(N[src[1:]].max()):
        out.update(anchor=src[:1], carry=src[1:])
    return out


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
    carried = ("pending", "failures", "co_target", "co_parts", "cooccur", "sample")

    def __init__(self, manager, start_lap, max_per_lap):
        super().__init__(manager, start_lap, max_per_lap)
        self.active: list = []
        self.pending: list = []
        self.failures: dict = {}  # uid -> (count, N at the last failure)
        self.co_target = None  # uid whose co-occurrence is collected this lap
        self.co_parts: dict = {}
        self.cooccur: dict = {}  # uid -> (uids, co-occurrence vector) from the previous lap
        self.sample: dict = {}  # batch -> fixed-stride rows of the last visit (rebuilt every lap, screens the next lap's candidate)

    def busy(self) -> bool:
        return bool(self.pending)

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        for p in self.pending:  # proposals saved before incremental refinement existed
            p.__dict__.setdefault("prev_parts", {})
            p.__dict__.setdefault("gains", [])

    def _eligible(self, uid, n) -> bool:
        if uid not in self.failures:
            return True
        count, n0, version = self.failures[uid]
        if size_changed(n, n0, self.manager.options["delete_retry_change"]) or version != self.manager.structure_version:
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
        self._count_failure(p.target, n_t)

    def _count_failure(self, uid, n_t):
        """One more failure of target ``uid`` at size ``n_t`` (under the current structure)."""
        count = self.failures.get(uid, (0, 0.0, 0))[0]
        self.failures[uid] = (count + 1, n_t, self.manager.structure_version)

    def plan(self, ctx: LapContext) -> None:
        self.active = list(self.pending)
        self.pending = []
        co, self.cooccur = self.cooccur, {}
        if not ctx.exact or ctx.lap < max(self.start_lap, 2) or ctx.G.K < 2:
            return
        opts = self.manager.options
        G, model = ctx.G, ctx.model
        max_absorb = int(opts["delete_max_absorb"])
        screens = 0
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
            pt = int(ctx.pos([uid])[0])
            pa = ctx.pos(p.absorb)
            self._start(p, model, G, pt, pa)
            if self._sample_ready(ctx) and self._sample_rows_of(float(G.N[pt]), G) >= SCREEN_MIN_ROWS:
                screens += 1
                if self._screened_out(p, self._refine_on_sample(p, ctx, pt, pa, SCREEN_STEPS), float(G.N[pt])):
                    self._count_failure(uid, float(G.N[pt]))
                    if screens >= self.max_per_lap:
                        break
                    continue
            self.active.append(p)
            ctx.involved.update(p.uids)
            ctx.targets.add(uid)
        # (defensive) a carried candidate without destinations starts from the absorbing clusters
        for p in self.active:
            if p.N is None:
                self._start(p, model, G, int(ctx.pos([p.target])[0]), ctx.pos(p.absorb))

    @staticmethod
    def _start(p, model, G, pt, pa):
        """First-lap destination parameters: the absorbing clusters as they are."""
        p.N = np.ascontiguousarray(G.N[pa])
        p.S = np.ascontiguousarray(G.S[pa])
        p.e_log_pi = _absorbing_weights(model, G, pt, pa)

    def _sample_ready(self, ctx) -> bool:
        """A subsample of every batch (from the previous lap's visits) to screen with."""
        return ctx.n_batches > 1 and int(self.manager.options["delete_sample_iters"]) >= 1 and len(self.sample) == ctx.n_batches

    def _sample_rows_of(self, n_target, G) -> float:
        """Expected number of the target's rows in the subsample."""
        return n_target * sum(len(x) for x in self.sample.values()) / max(float(np.sum(G.N)), 1.0)

    def _screened_out(self, p, estimates, n_target) -> bool:
        """Not worth a lap (module docstring): the last subsample estimate loses more than
        ``delete_screen_loss`` nats per target row and the last step stalled."""
        if not estimates:
            return False
        opts = self.manager.options
        last = estimates[-1]
        if not last < -float(opts["delete_screen_loss"]) * n_target:
            return False
        if len(estimates) < 2:
            return True
        missing = -estimates[-2]
        return missing > 0.0 and last - estimates[-2] < float(opts["delete_sample_min_step"]) * missing

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

    def _sample_stride(self, ctx) -> int | None:
        """The stride of the screen's fixed-stride subsample (module docstring), or None for no
        subsample: at most ``delete_max_sample`` rows and ``delete_sample_budget`` of a lap's
        rows over ``delete_sample_iters`` steps, none below ``delete_min_sample`` rows. A
        function of the fit's row count only (``FitState.n_rows``; the summaries' mass when it is
        unknown), so every batch of every lap, first lap included, is sampled alike, and the
        stride is known before the batch is visited: the rows are taken where the batch lives
        (:data:`~bnpcore.algorithms.executor.SAMPLE_STRIDE`), on a cluster as in this process.
        (The rows were read from the driver's copy of the batch, which on a cluster holds only
        the rows births collect: the Dask screen saw other rows than the local one.)"""
        if self.max_per_lap < 1 or ctx.n_batches < 2:
            return None
        opts = self.manager.options
        n_total = float(ctx.state.n_rows or np.sum(ctx.G.N))
        iters = max(int(opts["delete_sample_iters"]), 1)
        size = min(float(opts["delete_max_sample"]), float(opts["delete_sample_budget"]) * n_total / iters)
        if size < float(opts["delete_min_sample"]):
            return None
        return max(1, int(np.ceil(n_total / size)))

    def batch_request(self, ctx, b, visit):
        props = []
        for p in self.active:
            props.append(_request(p, ctx.pos(p.uids), ctx.G, self.manager.options["delete_carry_ratio"]))
        co = None if self.co_target is None else int(ctx.pos([self.co_target])[0])
        stride = self._sample_stride(ctx)
        if not props and co is None and stride is None:
            return None
        return BatchRequest(proposals=props, cooccur_col=co, sample_stride=stride)

    def after_batch(self, ctx, b, visit, result):
        if visit == 0:
            self.sample = {}
        if result.get("sample") is not None:  # (no subsample of sparse batches)
            self.sample[b] = result["sample"]
        for p, part in zip(self.active, result["proposals"]):
            p.parts[b] = tuple(np.array(a, dtype=np.float64, copy=True) for a in part)
            if ctx.n_batches > 1 and len(p.parts) < ctx.n_batches:
                self._refine_incrementally(p, ctx)
        if self.co_target is not None and result["cooccur"] is not None:
            self.co_parts[b] = np.array(result["cooccur"], dtype=np.float64, copy=True)

    @staticmethod
    def _refine_incrementally(p, ctx):
        """Destination parameters from the candidate's current per-batch summaries (module
        docstring): this lap's part of every visited batch, the previous lap's part of the
        others. Affects only the parameters the later batches of this lap are visited with; a
        candidate in its first lap (no previous parts) keeps its starting destinations."""
        if len(p.prev_parts) != ctx.n_batches:
            return
        N = S = None
        for b in range(ctx.n_batches):
            part = p.parts[b] if b in p.parts else p.prev_parts[b]
            N = part[0].copy() if N is None else N + part[0]
            S = part[1].copy() if S is None else S + part[1]
        G = ctx.G
        pt = int(ctx.pos([p.target])[0])
        pa = ctx.pos(p.absorb)
        cand = replace_columns(G, pa, N, S, G.H[pa], drop=[pt])
        DeleteMove._adopt(p, ctx.model, G, cand, pt, pa, N, S)

    def _refine_on_sample(self, p, ctx, pt, pa, max_iters=None) -> list:
        """Up to ``delete_sample_iters`` (and ``max_iters``) restricted steps of the candidate
        on the subsample of the last lap's visits (each row weighted to the whole data), from its
        current destinations. Returns the estimated gain of each step (module docstring: the
        candidate's subsample ELBO minus the subsample's own, both from the step's summaries)."""
        iters = int(self.manager.options["delete_sample_iters"])
        if max_iters is not None:
            iters = min(iters, int(max_iters))
        if iters < 1 or not self._sample_ready(ctx):
            return []
        Xs = np.concatenate([self.sample[b] for b in range(ctx.n_batches)])
        model, G = ctx.model, ctx.G
        w = np.full(Xs.shape[0], float(np.sum(G.N)) / Xs.shape[0])
        src = [int(x) for x in ctx.pos(p.uids)]
        prop = _request(p, src, ctx.G, self.manager.options["delete_carry_ratio"])
        estimates = []
        Gs = None
        prepared = model.prepare_local(G)  # G is the same for every step
        for _ in range(iters):
            prop.update(fresh_N=p.N, fresh_S=p.S, fresh_e_log_pi=p.e_log_pi)
            first = Gs is None
            out = model.local_step(Xs, G, n_threads=ctx.n_threads, proposals=[prop], weights=w, collect_cols=src if first else None,
                                   prepared=prepared)
            if first:
                # G is fixed during these steps, so are the subsample's own summaries and each
                # row's mass a_n on the candidate's clusters: the later steps need only the rows
                # holding some of it (a row below SAMPLE_MASS_FLOOR would move at most that much)
                Gs = model.stats_from_output(out, G.uids)
                mass = np.asarray(out["cols"]).sum(axis=1)
                keep = np.flatnonzero(mass > SAMPLE_MASS_FLOOR)
                Xs, w = np.ascontiguousarray(Xs[keep]), np.ascontiguousarray(w[keep])
                own = model.elbo(Gs)  # the subsample's own objective, the same for every step
            N, S, H = out["proposals"][0]
            estimates.append(float(model.elbo(replace_columns(Gs, pa, N, S, H, drop=[pt])) - own))
            self._adopt(p, model, G, replace_columns(G, pa, N, S, H, drop=[pt]), pt, pa, N, S)
            if Xs.shape[0] == 0:
                break
        return estimates

    def _sample_helps(self, p) -> bool:
        """Subsample steps after this lap? After the candidate's first lap, and then while the
        last lap closed at least ``delete_sample_min_step`` of the gain that was missing:
        near its fixed point a subsample's sampling noise costs more than its steps gain, and
        full-data steps alone remove that noise."""
        if len(p.gains) < 2:
            return True
        missing = -p.gains[-2]
        return missing > 0.0 and p.gains[-1] - p.gains[-2] >= float(self.manager.options["delete_sample_min_step"]) * missing

    def _keep(self, p) -> bool:
        """Carry a rejected multi-batch candidate to the next lap? Always for its first
        ``delete_laps`` laps; after that while its last lap raised its gain by at least
        ``delete_min_progress`` times the gain still missing, up to ``delete_max_laps`` laps."""
        opts = self.manager.options
        n = len(p.gains)
        if n < int(opts["delete_laps"]):
            return True
        if n >= int(opts["delete_max_laps"]):
            return False
        step = p.gains[-1] - p.gains[-2]
        return step > 0.0 and step >= float(opts["delete_min_progress"]) * -p.gains[-1]

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
            prev_after = None
            prepared = None  # the visit's globals, prepared once for the refinement passes
            for it in range(max(refine, 1)):
                parts = [p.parts[b] for b in range(B)]
                N, S, H = sum_parts(parts)
                cand = replace_columns(ctx.G, pa, N, S, H, drop=[pt])
                after = model.elbo(cand)
                if accepts(elbo, after, mgr.accept_rtol) or it == refine - 1:
                    break
                if prev_after is not None and after - prev_after < float(mgr.options["delete_min_progress"]) * (elbo - after):
                    break  # the last full pass closed too little of the missing gain: stop paying for passes
                prev_after = after
                # full-dataset refinement (Hughes thesis §4.3): global step for the candidate, then
                # the restricted step again on the same responsibilities (same data, same globals
                # as the batch visit, so the same r and the same memo)
                self._adopt(p, model, ctx.G, cand, pt, pa, N, S)
                X, G_visit = mgr.visit_inputs[0]
                prop = _request(p, G_visit.positions(p.uids), G_visit, mgr.options["delete_carry_ratio"])
                prepared = model.prepare_local(G_visit) if prepared is None else prepared
                out = model.local_step(X, G_visit, n_threads=ctx.n_threads, proposals=[prop], prepared=prepared)
                p.parts = {0: tuple(np.array(a, dtype=np.float64, copy=True) for a in out["proposals"][0])}
            if accepts(elbo, after, mgr.accept_rtol):

                def transform(s, part, pt=pt, pa=pa):
                    return replace_columns(s, pa, part[0], part[1], part[2], drop=[pt])

                new = mgr.apply(ctx, transform, parts, frozen_part=lambda s, pa=pa: (s.N[pa], s.S[pa], s.H[pa]))
                mgr.log(ctx, "delete", p.uids, elbo, new, True, attempts=p.attempts)
                elbo = new
                accepted += 1
                continue
            p.laps_left -= 1
            p.gains.append(float(after - elbo))
            p.last, p.last_lap = (elbo, after, float(ctx.G.N[pt])), ctx.lap
            if (p.laps_left > 0) if B == 1 else self._keep(p):
                # next lap: destinations at the candidate's own optimum (global step on its summaries)
                self._adopt(p, model, ctx.G, cand, pt, pa, N, S)
                if B > 1 and self._sample_helps(p):
                    self._refine_on_sample(p, ctx, pt, pa)
                p.prev_parts, p.parts = (p.parts if B > 1 else {}), {}
                self.pending.append(p)
                continue
            self._fail(p, ctx)
        self.active = []
        return accepted, elbo


DeleteMove.state_classes = {"_Proposal": _Proposal}
