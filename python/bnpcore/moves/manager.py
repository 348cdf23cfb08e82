"""The scheduler of proposal moves inside memoized (or full-dataset) learning (Hughes thesis ch. 4).

:class:`MoveManager` is configured by a frozen :class:`MoveConfig` (never by an estimator) and
driven by the memoized lap through its hooks (``start_lap``, ``batch_options``, ``after_batch``,
``end_lap``); the moves themselves live in :mod:`~bnpcore.moves.birth`,
:mod:`~bnpcore.moves.merge` and :mod:`~bnpcore.moves.delete` and import only
:mod:`~bnpcore.moves._base`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bnpcore.algorithms._base import memo_map
from bnpcore.algorithms.executor import SAMPLE_STRIDE
from bnpcore.moves._base import ACCEPT_RTOL, ACCEPT_RTOL_RANGE, FLAG, FRACTION, LapContext, MoveOptions, OptionRange, count, number
from bnpcore.moves.birth import BirthMove
from bnpcore.moves.delete import DeleteMove
from bnpcore.moves.merge import MergeMove

__all__ = ["DEFAULT_MAX_PER_LAP", "MOVE_KINDS", "MoveConfig", "MoveManager"]

#: move kinds in planning and evaluation order (birth, merge, delete; Hughes thesis ch. 4)
MOVE_KINDS = {"birth": BirthMove, "merge": MergeMove, "delete": DeleteMove}

#: default caps on proposals per lap
DEFAULT_MAX_PER_LAP = {"birth": 3, "merge": 25, "delete": 1}


@dataclass(frozen=True)
class MoveConfig:
    """Options of the proposal moves.

    Parameters
    ----------
    kinds : tuple of str
        Subset of ``("birth", "merge", "delete")``.
    start_lap : dict of str to int
        First lap at which each kind is evaluated (default 2).
    max_per_lap : dict of str to int
        Cap on proposals of each kind per lap (births evaluated, merge candidate pairs
        tracked, deletes); defaults in :data:`DEFAULT_MAX_PER_LAP`.
    options : dict
        Overrides of :data:`MoveManager.DEFAULT_OPTIONS`.
    n_threads : int or None
        Threads of the Rust kernels the moves call.
    """

    kinds: tuple = tuple(MOVE_KINDS)
    start_lap: dict = field(default_factory=dict)
    max_per_lap: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    n_threads: int | None = None


class MoveManager(MoveOptions):
    """Schedules birth, merge and delete moves for a memoized or full-dataset fit.

    Parameters
    ----------
    config : MoveConfig
        Which moves, from which lap, how many per lap, advanced options (keys of
        :data:`DEFAULT_OPTIONS`, values in the ranges of :data:`OPTION_RANGES`) and the thread
        count.

    Raises
    ------
    ParameterError
        For an unknown move kind, or options that are not a dict, have an unknown key or a
        value out of its range.

    Notes
    -----
    Evaluation order at the end of a lap: births, merges, deletes (Hughes thesis ch. 4). Every
    proposal is recorded in ``state.moves_log`` as a dict with ``lap``, ``kind``, ``uids`` (the
    clusters involved), ``elbo_before``, ``elbo_after``, ``elbo_gain`` and ``accepted`` (births
    also list ``new_uids`` when accepted).
    """

    #: advanced settings (override through ``MoveConfig.options``, the estimators' ``move_options``)
    DEFAULT_OPTIONS: ClassVar[dict] = {
        "accept_rtol": ACCEPT_RTOL,
        # birth (Hughes thesis §4.2)
        "birth_n_fresh": 3,
        "birth_n_seeds": 3,
        "birth_min_size": 10.0,
        "birth_collect_threshold": 0.1,
        "birth_max_subsample": 10_000,
        "birth_subsample_sizes": 2.0,
        "birth_create_iters": 10,
        "birth_scale_weights": True,
        "birth_refine_iters": 20,
        "birth_abandon_loss": 0.5,
        "birth_abandon_after": 2,
        "birth_retry_change": 0.1,
        "birth_min_gain": 0.0,
        "birth_fits_per_lap": 2,
        "birth_retry_loss": 0.05,
        "birth_max_fail": 3,
        "birth_laps": 1,
        "birth_seed_rows": "auto",
        "birth_peel_seeds": "auto",
        # merge (Hughes thesis §4.1)
        "merge_allpairs_max_K": 300,
        "merge_max_scored_pairs": 5000,
        "merge_neighbours": 16,
        "merge_retry_change": 0.1,
        # delete (Hughes thesis §4.3)
        "delete_max_absorb": 10,
        "delete_max_fail": 1,
        "delete_retry_change": 0.1,
        "delete_laps": 3,
        "delete_max_laps": 12,
        "delete_min_progress": 0.1,
        "delete_max_sample": 2_000,
        "delete_sample_iters": 5,
        "delete_sample_min_step": 0.25,
        "delete_sample_budget": 0.5,
        "delete_min_sample": 500,
        "delete_screen_loss": 1.0,
        "delete_refine_iters": 5,
        "delete_carry_ratio": 0.05,
    }

    #: kind and range of every option (:class:`~bnpcore.moves._base.OptionRange`; the module
    #: docstrings of :mod:`~bnpcore.moves.birth`, :mod:`~bnpcore.moves.merge` and
    #: :mod:`~bnpcore.moves.delete` say what each one does)
    OPTION_RANGES: ClassVar[dict] = {
        "accept_rtol": ACCEPT_RTOL_RANGE,
        # birth: a birth replaces its target by at least two fresh clusters, fitted to at least
        # four rows; a row is collected when its responsibility exceeds the threshold (so 1
        # would collect none)
        "birth_n_fresh": count(2),
        "birth_n_seeds": count(2),
        "birth_min_size": number(0),
        "birth_collect_threshold": number(0, 1, high_open=True),
        "birth_max_subsample": count(4),
        "birth_subsample_sizes": number(0, low_open=True, also=(None,)),
        "birth_create_iters": count(0),
        "birth_scale_weights": FLAG,
        "birth_refine_iters": count(0),
        "birth_abandon_loss": number(0, infinite=True, also=(None,)),  # inf or None: never abandon
        "birth_abandon_after": count(0),
        "birth_retry_change": number(0),
        "birth_min_gain": number(infinite=True),  # -inf: no screen
        "birth_fits_per_lap": count(1),
        "birth_retry_loss": number(0, infinite=True),
        "birth_max_fail": count(1),
        "birth_laps": count(1),
        "birth_seed_rows": OptionRange("int", low=1, also=("auto",)),
        "birth_peel_seeds": OptionRange("int", low=0, also=("auto",)),
        # merge: a pair needs two clusters
        "merge_allpairs_max_K": count(2),
        "merge_max_scored_pairs": count(0),
        "merge_neighbours": count(1),
        "merge_retry_change": number(0),
        # delete
        "delete_max_absorb": count(1),
        "delete_max_fail": count(1),
        "delete_retry_change": number(0),
        "delete_laps": count(1),
        "delete_max_laps": count(1),
        "delete_min_progress": number(0),
        "delete_max_sample": count(1),
        "delete_sample_iters": count(0),
        "delete_sample_min_step": FRACTION,
        "delete_sample_budget": FRACTION,
        "delete_min_sample": count(1),
        "delete_screen_loss": number(0, infinite=True),  # inf: no screen
        "delete_refine_iters": count(1),  # evaluations of a one-batch candidate, the first included
        "delete_carry_ratio": number(0, also=(None,)),  # None: every row of the absorbing set re-spread
    }

    def __init__(self, config: MoveConfig):
        self._configure(config, list(MOVE_KINDS), "unknown move kinds {bad}; known: {allowed}")
        # planning order: birth (its target), merge (pairs), delete (target + absorbing set)
        self.moves = [
            MOVE_KINDS[k](self, config.start_lap.get(k, 2), config.max_per_lap.get(k, DEFAULT_MAX_PER_LAP[k]))
            for k in MOVE_KINDS
            if k in self.kinds
        ]
        #: incremented whenever a move is accepted (failure memories are reset by it)
        self.structure_version = 0
        #: set by the lap loop after a lap that met the convergence test while :meth:`busy`:
        #: the next lap's moves prepare every attempt they still have at once
        #: (:meth:`~bnpcore.moves.birth.BirthMove.plan_next`) instead of a few per lap
        self.settled = False
        self._ctx: LapContext | None = None
        self._visit = 0
        self._planned = 0
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
        ctx = LapContext(model, state, state.lap + 1, exact, len(state.memos), self.n_threads, settled=bool(self.settled))
        # clusters with mass in frozen memos (partial_fit batches whose data are gone) have no
        # proposal summaries there: they take part in no move (Hughes & Sudderth 2013 §3; Hughes thesis §3.5.3)
        for fm in getattr(state, "frozen", []) or []:
            ctx.involved.update(int(u) for u, n in zip(fm.uids, fm.N) if n != 0.0)
        self._ctx = ctx
        self._visit = 0
        self._planned = 0
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
        """Extra options of batch ``b``'s local step (the statistics the moves need). Called in
        visiting order, either just before each visit (sequential schedule) or for every batch
        of the lap before any visit (parallel schedule): the requests depend only on what was
        planned at the start of the lap."""
        ctx = self._ctx
        if ctx.n_batches == 1:
            self._visit_glob = state.stats  # SuffStats are replaced, never mutated, by the engine
        pairs, props = [], []
        collect = cooccur = sample = None
        co_pairs = False
        routes = []
        visit = self._planned
        self._planned += 1
        for m in self.moves:
            req = m.batch_request(ctx, b, visit)
            if req is None:
                routes.append((m, 0, 0, 0, 0, False, False, False))
                continue
            p0, q0 = len(pairs), len(props)
            pairs.extend((int(a), int(c)) for a, c in req.merge_pairs)
            props.extend(req.proposals)
            own_col = own_co = own_sample = False
            if req.collect_cols and collect is None:
                collect, own_col = [int(c) for c in req.collect_cols], True
            if req.cooccur_col is not None and cooccur is None:
                cooccur, own_co = int(req.cooccur_col), True
            if req.sample_stride is not None and sample is None:
                sample, own_sample = int(req.sample_stride), True
            co_pairs = co_pairs or req.cooccur_pairs
            routes.append((m, p0, len(pairs), q0, len(props), own_col, own_co, own_sample))
        self._routes[b] = (visit, routes)
        opts = {}
        if pairs:
            opts["merge_pairs"] = pairs
        if props:
            opts["proposals"] = props
        if collect is not None:
            opts["collect_cols"] = collect
        if cooccur is not None:
            opts["cooccur_col"] = cooccur
        if co_pairs:
            opts["cooccur_pairs"] = True
        if sample is not None:
            opts[SAMPLE_STRIDE] = sample
        return opts

    def after_batch(self, model, state, b, out, X=None) -> None:
        """Route batch ``b``'s local-step outputs to the moves; ``X`` is the batch's data (rows
        of a birth subsample are copied from it)."""
        ctx = self._ctx
        self._batch_X = X
        if ctx.n_batches == 1 and X is not None:
            self.visit_inputs = {0: (X, self._visit_glob)}
        visit, routes = self._routes.pop(b, (self._visit, []))
        for m, p0, p1, q0, q1, own_col, own_co, own_sample in routes:
            res = {
                "pair_H": np.asarray(out.get("pair_H", np.zeros(0)))[p0:p1],
                "proposals": list(out.get("proposals", []))[q0:q1],
                "cols": out.get("cols") if own_col else None,
                "cooccur": out.get("cooccur") if own_co else None,
                "co_pairs": out.get("co_pairs"),
                "sample": out.get("sample") if own_sample else None,
            }
            m.after_batch(ctx, b, visit, res)
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

    def get_state(self) -> dict:
        """Everything the moves carry from one lap to the next (taken at the end of a lap):
        ``structure_version``, ``settled`` and each move's :meth:`~bnpcore.moves._base.Move.get_state`."""
        return {
            "structure_version": int(self.structure_version),
            "settled": bool(self.settled),
            "moves": {m.kind: m.get_state() for m in self.moves},
        }

    def set_state(self, state: dict | None) -> None:
        """Restore :meth:`get_state` (empty or None: a fresh manager)."""
        if not state:
            return
        self.structure_version = int(state.get("structure_version", 0))
        self.settled = bool(state.get("settled", False))
        for m in self.moves:
            if m.kind in state.get("moves", {}):
                m.set_state(state["moves"][m.kind])

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
        st.memos = [memo_map(transform, m, per_batch[b]) for b, m in enumerate(st.memos)]
        if getattr(st, "frozen", None):
            st.frozen = [transform(m, frozen_part(m)) for m in st.frozen]
        st.recompute_total()
        return ctx.model.elbo(st.stats)


