"""The move machinery shared by every proposal move (spec 01 §6.0, §6.4).

A *move* proposes a new responsibility matrix r' for the whole dataset, built from the current
one, and is judged by the exact whole-dataset ELBO of its summaries:

.. math:: \\text{accept} \\iff \\mathcal L(N', S', H') - \\mathcal L(N, S, H) > \\epsilon_{acc}\\,|\\mathcal L(N, S, H)|,

with :math:`\\epsilon_{acc}=10^{-10}`. r' is never materialised: during a lap every batch visit
computes, in the same Rust call as the batch's memo (hence from the same responsibilities), the
summaries the candidates need — merge pair entropies, restricted-step proposal columns, a
responsibility column for birth subsamples and a co-occurrence vector for delete targets. They
are kept per batch so that, on acceptance, every batch memo gets the same column
transformation as the whole-dataset summaries G, and G = Σ_b memo[b] stays true.

One lap (the memoized engine calls the hooks; ``algorithm="full"`` is the one-batch case):

* :meth:`MoveManager.start_lap` — pending proposals reserve their clusters, then every move
  plans (birth: create fresh clusters from the subsample collected in the previous lap;
  delete: target and absorbing set; merge: candidate pairs by m-score), then the moves choose
  what to collect for the next lap (birth subsample target, delete co-occurrence). Each
  cluster (uid) takes part in at most one move per lap.
* :meth:`MoveManager.batch_options` / :meth:`MoveManager.after_batch` — the local-step keyword
  arguments of a batch, and the routing of its outputs back to the moves.
* :meth:`MoveManager.end_lap` — births, then merges, then deletes are evaluated exactly and
  applied to G and every memo when accepted.

No proposal is made while some batch has no memo (memoized lap 1): the whole-dataset
summaries are incomplete. Collection of birth subsamples already runs in lap 1.

New models (HDP topic model, HDP-HMM) plug in by subclassing :class:`Move` and supplying their
own proposal construction; the manager only knows the hooks and the request/record format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bnpcore.stats import SuffStats

__all__ = ["ACCEPT_RTOL", "BatchRequest", "LapContext", "Move", "MoveManager", "accepts"]

#: relative acceptance threshold ε_acc (spec 01 §6.0)
ACCEPT_RTOL = 1e-10


def accepts(elbo_before: float, elbo_after: float, rtol: float = ACCEPT_RTOL) -> bool:
    """The acceptance rule ``ΔL > ε_acc |L|`` (False for a non-finite candidate)."""
    return bool(np.isfinite(elbo_after) and elbo_after - elbo_before > rtol * abs(elbo_before))


@dataclass
class BatchRequest:
    """What one move needs from a batch's local step (positions, not uids)."""

    merge_pairs: list = field(default_factory=list)
    proposals: list = field(default_factory=list)
    collect_col: int | None = None
    cooccur_col: int | None = None


@dataclass
class LapContext:
    """Per-lap information handed to the moves."""

    model: object
    state: object
    lap: int  # the lap being run, 1-based
    exact: bool  # every batch has a memo: G summarises the whole dataset
    n_batches: int
    n_threads: int | None
    involved: set = field(default_factory=set)  # uids taking part in a move this lap
    targets: set = field(default_factory=set)  # uids removed if their move is accepted (birth/delete targets)

    @property
    def G(self) -> SuffStats:
        return self.state.stats

    def pos(self, uids) -> np.ndarray:
        return self.state.stats.positions(uids)

    def alive(self, uids) -> bool:
        have = {int(u) for u in self.state.stats.uids}
        return all(int(u) in have for u in uids)


class Move:
    """Base class of a proposal move. Subclasses override the hooks they need.

    Attributes
    ----------
    kind : str
        ``"birth"``, ``"merge"`` or ``"delete"`` (the ``kind`` of its ``moves_log_`` records).
    start_lap : int
        First lap in which proposals of this kind are evaluated.
    max_per_lap : int
        Cap on proposals of this kind per lap.
    """

    kind = "move"
    #: plan (and reserve) before the other moves' carried-over proposals
    plans_early = False

    def __init__(self, manager: MoveManager, start_lap: int, max_per_lap: int):
        self.manager = manager
        self.start_lap = int(start_lap)
        self.max_per_lap = int(max_per_lap)

    # lap start ------------------------------------------------------------------------------
    def reserve(self, ctx: LapContext) -> None:
        """Add the uids of proposals carried over from the previous lap to ``ctx.involved``."""

    def plan(self, ctx: LapContext) -> None:
        """Choose this lap's proposals (add their uids to ``ctx.involved``)."""

    def plan_next(self, ctx: LapContext) -> None:
        """Choose what to collect during this lap for the next lap's proposals."""

    # batches --------------------------------------------------------------------------------
    def batch_request(self, ctx: LapContext, b: int, visit: int) -> BatchRequest | None:
        """Local-step requests of batch ``b`` (its ``visit``-th visit of the lap, 0-based)."""
        return None

    def after_batch(self, ctx: LapContext, b: int, visit: int, result: dict) -> None:
        """``result`` holds this move's slice of the outputs: ``pair_H``, ``proposals``,
        ``col`` and ``cooccur`` (the last two only if this move asked for them)."""

    # lap end --------------------------------------------------------------------------------
    def evaluate(self, ctx: LapContext, elbo: float) -> tuple[int, float]:
        """Evaluate this lap's proposals, apply the accepted ones; returns (accepted, elbo)."""
        return 0, elbo


class MoveManager:
    """Schedules birth, merge and delete moves for a memoized or full-dataset fit.

    Parameters
    ----------
    estimator : DPMixture
        Provides the options ``birth_start_lap``, ``merge_start_lap``, ``delete_start_lap``,
        ``max_births_per_lap``, ``max_merges_per_lap``, ``max_deletes_per_lap``, ``n_threads``
        and, optionally, ``move_options`` (dict of advanced settings, see
        :data:`DEFAULT_OPTIONS`).
    moves : tuple of str
        Subset of ``("birth", "merge", "delete")``.

    Notes
    -----
    Evaluation order at the end of a lap: births, merges, deletes (spec 01 §6.4). Every
    proposal is recorded in ``state.moves_log`` as a dict with ``lap``, ``kind``, ``uids`` (the
    clusters involved), ``elbo_before``, ``elbo_after``, ``elbo_gain`` and ``accepted`` (births
    also list ``new_uids`` when accepted).
    """

    #: advanced settings (override through the estimator's ``move_options`` dict)
    DEFAULT_OPTIONS: ClassVar[dict] = {
        "accept_rtol": ACCEPT_RTOL,
        # birth (spec 01 §6.2)
        "birth_n_fresh": 3,
        "birth_n_seeds": 3,
        "birth_min_size": 10.0,
        "birth_collect_threshold": 0.1,
        "birth_max_subsample": 10_000,
        "birth_create_iters": 10,
        "birth_scale_weights": True,
        "birth_refine_iters": 20,
        "birth_retry_change": 0.1,
        "birth_max_fail": 2,
        "birth_laps": 1,
        # merge (spec 01 §6.1)
        "merge_allpairs_max_K": 300,
        "merge_retry_change": 0.1,
        # delete (spec 01 §6.3)
        "delete_max_absorb": 10,
        "delete_max_fail": 1,
        "delete_retry_change": 0.1,
        "delete_laps": 3,
        "delete_refine_iters": 5,
        "delete_max_subsample": 5_000,
        "delete_subsample_iters": 25,
    }

    def __init__(self, estimator, moves):
        from bnpcore.moves.birth import BirthMove
        from bnpcore.moves.delete import DeleteMove
        from bnpcore.moves.merge import MergeMove

        user = getattr(estimator, "move_options", None) or {}
        unknown = set(user) - set(self.DEFAULT_OPTIONS)
        if unknown:
            from bnpcore.exceptions import ParameterError

            raise ParameterError(f"`move_options` has unknown keys {sorted(unknown)}; known: {sorted(self.DEFAULT_OPTIONS)}")
        self.options = {**self.DEFAULT_OPTIONS, **user}
        self.n_threads = getattr(estimator, "n_threads", None)
        self.kinds = tuple(moves)
        built = {
            "birth": lambda: BirthMove(self, estimator.birth_start_lap, estimator.max_births_per_lap),
            "delete": lambda: DeleteMove(self, estimator.delete_start_lap, estimator.max_deletes_per_lap),
            "merge": lambda: MergeMove(self, estimator.merge_start_lap, estimator.max_merges_per_lap),
        }
        # planning order: birth (its target), merge (pairs), delete (target + absorbing set)
        self.moves = [built[k]() for k in ("birth", "merge", "delete") if k in self.kinds]
        #: incremented whenever a move is accepted (failure memories are reset by it)
        self.structure_version = 0
        self._ctx: LapContext | None = None
        self._visit = 0
        self._routes: dict = {}
        self._batch_X = None
        #: with one batch: {0: (X, globals used for the visit)} of the current lap
        self.visit_inputs: dict = {}

    @property
    def accept_rtol(self) -> float:
        return float(self.options["accept_rtol"])

    def _move(self, kind):
        for m in self.moves:
            if m.kind == kind:
                return m
        return None

    # ------------------------------------------------------------------------------ hooks
    def start_lap(self, model, state) -> None:
        exact = all(m is not None for m in state.memos)
        ctx = LapContext(model, state, state.lap + 1, exact, len(state.memos), self.n_threads)
        # clusters with mass in frozen memos (partial_fit batches whose data are gone) have no
        # proposal summaries there: they take part in no move (spec 01 §5.3)
        for fm in getattr(state, "frozen", []) or []:
            ctx.involved.update(int(u) for u, n in zip(fm.uids, fm.N) if n != 0.0)
        self._ctx = ctx
        self._visit = 0
        self.visit_inputs = {}
        # births first (a birth's proposal was prepared during the previous lap), then the
        # proposals carried over from the previous lap, then new merges and deletes
        early = [m for m in self.moves if m.plans_early]
        late = [m for m in self.moves if not m.plans_early]
        for m in early:
            m.reserve(ctx)
            m.plan(ctx)
        for m in late:
            m.reserve(ctx)
        for m in late:
            m.plan(ctx)
        for m in self.moves:
            m.plan_next(ctx)

    def batch_options(self, model, state, b) -> dict:
        ctx = self._ctx
        if ctx.n_batches == 1:
            self._visit_glob = state.stats  # SuffStats are replaced, never mutated, by the engine
        pairs, props = [], []
        collect = cooccur = None
        routes = []
        for m in self.moves:
            req = m.batch_request(ctx, b, self._visit)
            if req is None:
                routes.append((m, 0, 0, 0, 0, False, False))
                continue
            p0, q0 = len(pairs), len(props)
            pairs.extend((int(a), int(c)) for a, c in req.merge_pairs)
            props.extend(req.proposals)
            own_col = own_co = False
            if req.collect_col is not None and collect is None:
                collect, own_col = int(req.collect_col), True
            if req.cooccur_col is not None and cooccur is None:
                cooccur, own_co = int(req.cooccur_col), True
            routes.append((m, p0, len(pairs), q0, len(props), own_col, own_co))
        self._routes[b] = routes
        opts = {}
        if pairs:
            opts["merge_pairs"] = pairs
        if props:
            opts["proposals"] = props
        if collect is not None:
            opts["collect_col"] = collect
        if cooccur is not None:
            opts["cooccur_col"] = cooccur
        return opts

    def after_batch(self, model, state, b, out, X=None) -> None:
        """Route batch ``b``'s local-step outputs to the moves; ``X`` is the batch's data (rows
        of a birth subsample are copied from it)."""
        ctx = self._ctx
        self._batch_X = X
        if ctx.n_batches == 1 and X is not None:
            self.visit_inputs = {0: (X, self._visit_glob)}
        routes = self._routes.pop(b, [])
        for m, p0, p1, q0, q1, own_col, own_co in routes:
            res = {
                "pair_H": np.asarray(out.get("pair_H", np.zeros(0)))[p0:p1],
                "proposals": list(out.get("proposals", []))[q0:q1],
                "col": out.get("col") if own_col else None,
                "cooccur": out.get("cooccur") if own_co else None,
            }
            m.after_batch(ctx, b, self._visit, res)
        self._batch_X = None
        self._visit += 1

    def end_lap(self, model, state, elbo) -> tuple[int, float]:
        ctx = self._ctx
        total = 0
        for kind in ("birth", "merge", "delete"):
            m = self._move(kind)
            if m is None:
                continue
            n, elbo = m.evaluate(ctx, elbo)
            total += n
        if total:
            self.structure_version += 1
        self._ctx = None
        self.visit_inputs = {}
        return total, elbo

    def busy(self) -> bool:
        """True while a proposal is prepared for the next lap (a fit should not stop yet)."""
        return any(getattr(m, "busy", lambda: False)() for m in self.moves)

    # -------------------------------------------------------------------------- helpers
    def log(self, ctx: LapContext, kind: str, uids, before: float, after: float, accepted: bool, lap=None, **extra) -> dict:
        rec = {
            "lap": int(ctx.lap if lap is None else lap),
            "kind": kind,
            "uids": [int(u) for u in uids],
            "elbo_before": float(before),
            "elbo_after": float(after),
            "elbo_gain": float(after - before),
            "accepted": bool(accepted),
        }
        rec.update(extra)
        ctx.state.moves_log.append(rec)
        return rec

    @staticmethod
    def apply(ctx: LapContext, transform, per_batch, frozen_part=None) -> float:
        """Apply an accepted move: ``transform(stats, part)`` to every batch memo with its own
        part ``per_batch[b]`` (and to every frozen memo with ``frozen_part(memo)``: the move's
        clusters have no mass there), then G = Σ memos. Returns the new ELBO."""
        st = ctx.state
        st.memos = [transform(m, per_batch[b]) for b, m in enumerate(st.memos)]
        if getattr(st, "frozen", None):
            st.frozen = [transform(m, frozen_part(m)) for m in st.frozen]
        st.recompute_total()
        return ctx.model.elbo(st.stats)


def sum_parts(parts):
    """Ordered sum (batch-index order) of per-batch (N, S, H) triples."""
    N = parts[0][0].copy()
    S = parts[0][1].copy()
    H = parts[0][2].copy()
    for p in parts[1:]:
        N = N + p[0]
        S = S + p[1]
        H = H + p[2]
    return N, S, H


def replace_columns(stats: SuffStats, positions, N, S, H) -> SuffStats:
    """Copy of ``stats`` with the given columns' N, S, H replaced."""
    out = stats.copy()
    out.N[positions] = N
    out.S[positions] = S
    out.H[positions] = H
    return out
