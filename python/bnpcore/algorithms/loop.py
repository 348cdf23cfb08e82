"""The lap loop shared by every model family: algorithm dispatch, the dense→sparse schedule,
monotonicity and convergence checks (Hughes thesis §3.4–3.5).

:func:`run_laps` runs laps of full-dataset, memoized or stochastic variational inference on a
:class:`~bnpcore.model.Model`, a batch source and a :class:`~bnpcore.algorithms._base.FitState`,
configured by a frozen :class:`FitConfig`. It knows no estimator and no model family: the model
supplies the four verbs (``local_step``, ``stats_from_output``, ``elbo``, ``alloc.nested``), the
caller receives every finished lap through ``on_lap`` (history, fitted attributes, callbacks,
checkpoints are its business).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field

import numpy as np

from bnpcore.algorithms._base import FitState
from bnpcore.algorithms.executor import SCHEDULES
from bnpcore.algorithms.memoized import is_decrease, run_memoized_lap
from bnpcore.algorithms.stochastic import StochasticConfig, run_stochastic_lap
from bnpcore.exceptions import ConvergenceWarning, ELBODecreaseWarning

__all__ = ["ALGORITHMS", "FitConfig", "LapInfo", "lap_top_l", "run_laps", "warn_not_converged"]

ALGORITHMS = ("full", "memoized", "stochastic")


@dataclass(frozen=True)
class FitConfig:
    """Options of the lap loop.

    Parameters
    ----------
    algorithm : {"full", "memoized", "stochastic"}
        ``"full"`` is memoized learning with one batch.
    max_laps : int
        Laps to run at most.
    min_laps : int
        Convergence is not tested before the fit has this many laps.
    tol : float
        Converged when the relative ELBO change of a lap is at most ``tol`` and no move was
        accepted (or is being prepared) in it.
    top_l : int or None
        L of the L-sparse local steps (None: dense).
    dense_laps : int
        With ``top_l``, the first ``dense_laps`` laps since initialisation are dense.
    n_threads : int or None
        Threads of the Rust kernels.
    stochastic : StochasticConfig
        Learning rate and evaluation schedule of ``algorithm="stochastic"``.
    name : str
        Name used in warnings (the estimator's class name).
    schedule : {"sequential", "parallel"}
        Visiting order of a memoized lap (see
        :func:`~bnpcore.algorithms.memoized.run_memoized_lap`).
    overrelax : float
        Largest over-relaxation factor of full and memoized laps
        (:mod:`bnpcore.algorithms.overrelax`; 1: plain coordinate ascent). Used by models that
        define ``overrelaxed``.
    """

    algorithm: str = "full"
    max_laps: int = 100
    min_laps: int = 2
    tol: float = 1e-6
    top_l: int | None = None
    dense_laps: int = 1
    n_threads: int | None = None
    stochastic: StochasticConfig = field(default_factory=StochasticConfig)
    name: str = "model"
    schedule: str = "sequential"
    overrelax: float = 1.0

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"`algorithm` must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"`schedule` must be one of {SCHEDULES}, got {self.schedule!r}")


@dataclass(frozen=True)
class LapInfo:
    """What :func:`run_laps` reports after each lap."""

    lap: int
    elbo: float
    accepted: int


def lap_top_l(config: FitConfig, state: FitState | None):
    """The dense→sparse schedule: the L of the next lap's local steps is None (dense) while
    fewer than ``dense_laps`` laps have run since initialisation, ``top_l`` afterwards."""
    if config.top_l is None or (state is not None and state.lap < config.dense_laps):
        return None
    return config.top_l


def run_laps(
    model, source, state: FitState, config: FitConfig, *, moves=None, on_lap=None, progress=None, executor=None
) -> bool:
    """Run at most ``config.max_laps`` laps; returns True if converged.

    Parameters
    ----------
    model : Model
        Its ``top_l`` is set before every lap by the dense→sparse schedule.
    source : batch source
        ``len(source)`` batches, ``source.get(b)``, ``source.n_rows``.
    state : FitState
        Updated in place; ``state.history`` gets one entry per lap.
    config : FitConfig
    moves : MoveManager or None
        Proposal moves (memoized and full learning only).
    on_lap : callable(LapInfo) or None
        Called after each lap (after the history entry is recorded); returning ``True`` stops
        the loop after that lap (the fit is then not converged).
    progress : object with ``update(n)`` and ``set_postfix(refresh=False, **kw)`` (a tqdm bar), or None
        The postfix is set without drawing; ``update`` draws it, at the bar's own rate.
    executor : executor or None
        Where the local steps run (:mod:`bnpcore.algorithms.executor`); None: in this process.

    Warns
    -----
    ELBODecreaseWarning
        When the ELBO of a full or memoized lap drops by more than round-off. (A fit that
        does not converge is reported by :func:`warn_not_converged`.)

    Notes
    -----
    On any exception (Ctrl-C, bad data in a later batch), G is made the sum of the batch memos
    again (a memo is replaced only after its batch's local step succeeded), so the state is
    that of the last completed batch, then the exception propagates.
    """
    stochastic = config.algorithm == "stochastic"
    converged = False
    prev = state.history["elbo"][-1] if state.history["elbo"] else None
    if not stochastic and any(m is None for m in state.memos):
        prev = None  # batches never summarised yet: the previous ELBO covered other data
    lap_l = state.last_top_l
    try:
        for _ in range(config.max_laps):
            # L-sparse steps start after `dense_laps` dense laps. When the family of
            # responsibilities shrinks (dense -> top L, or a smaller L on warm start), the
            # first lap of the new family replaces memos the new family cannot represent, so
            # the ELBO is monotone again from the end of that lap on (as after lap 1). So it is
            # after an interrupted lap that changed the family (its memos mix two families).
            lap_l = lap_top_l(config, state)
            shrinks = state.lap > 0 and lap_l is not None and (state.last_top_l is None or lap_l < state.last_top_l)
            shrinks = shrinks or state.mixed_top_l
            model.top_l = lap_l
            if stochastic:
                res = run_stochastic_lap(
                    model, source, state, config.stochastic, n_threads=config.n_threads, executor=executor
                )
            else:
                res = run_memoized_lap(
                    model,
                    source,
                    state,
                    n_threads=config.n_threads,
                    moves=moves,
                    check_monotone=not shrinks,
                    schedule=config.schedule,
                    executor=executor,
                    overrelax=config.overrelax,
                )
            state.last_top_l, state.mixed_top_l = lap_l, False
            elbo = res["elbo"]
            if shrinks:
                prev = None
            # the convergence test on the objective; while a move is busy it does not stop the
            # fit, but tells the moves to prepare every attempt they have left at once
            quiet = (
                prev is not None
                and state.lap >= config.min_laps
                and res["accepted"] == 0
                and np.isfinite(elbo)
                and abs(elbo - prev) <= config.tol * abs(elbo)
            )
            if quiet and state.overrelax:
                # an over-relaxed lap may gain little where a plain one would gain more: the
                # convergence test is passed by plain laps only, so the lap after one that
                # meets it is plain (and so is a settled lap the moves ask for)
                state.overrelax["eta"] = 1.0
                quiet = not res.get("overrelaxed")
            busy = quiet and moves is not None and moves.busy()
            if moves is not None:
                moves.settled = busy
                state.moves_state = moves.get_state()
            if not stochastic and is_decrease(prev, elbo, model, state.stats):
                warnings.warn(f"ELBO decreased at lap {state.lap}: {prev!r} -> {elbo!r}", ELBODecreaseWarning, stacklevel=4)
            state.record(elbo)
            if res.get("overrelax") is not None:
                state.record_value("overrelax", res["overrelax"])
            stop = on_lap(LapInfo(state.lap, elbo, int(res["accepted"]))) if on_lap is not None else None
            if progress is not None:
                progress.set_postfix(elbo=f"{elbo:.6g}", K=int(state.history["n_components"][-1]), refresh=False)
                progress.update(1)
            if stop is True:  # the caller asked to stop after this lap (not converged)
                break
            if quiet and not busy:
                converged = True
                break
            prev = elbo
    except BaseException:
        if lap_l != state.last_top_l:  # interrupted in a lap that changed the family
            state.mixed_top_l = True
        if not stochastic:
            with contextlib.suppress(Exception):  # (memos on a cluster that is gone: G stays)
                state.recompute_total()
        raise
    return converged


def warn_not_converged(config: FitConfig, *, stacklevel: int = 4) -> None:
    """The ``ConvergenceWarning`` of a fit that ran ``max_laps`` laps without converging (the
    caller issues it after recording the fit's outcome, since tests turn warnings into errors)."""
    warnings.warn(
        f"{config.name} did not converge in {config.max_laps} laps (relative ELBO change above tol={config.tol}); "
        "increase `max_laps` or `tol`",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )
