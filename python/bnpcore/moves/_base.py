"""The move machinery shared by every proposal move (Hughes thesis ch. 4).

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

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bnpcore.exceptions import ParameterError
from bnpcore.stats import SuffStats

__all__ = [
    "ACCEPT_RTOL", "ACCEPT_RTOL_RANGE", "FLAG", "FRACTION", "SWAP_KINDS", "BatchRequest", "LapContext", "Move", "MoveOptions", "OptionRange",
    "accepts", "check_move_options", "count", "decode_state", "encode_state", "number", "replace_columns", "sum_parts",
    "whole_dataset_passes",
]

#: the move kinds of the finite models (FiniteMixture, FiniteTopicModel, FiniteHMM): the fixed-K
#: swap, where the nested models have birth, merge and delete
SWAP_KINDS = ("swap",)

#: relative acceptance threshold ε_acc (Hughes thesis §4.1.3)
ACCEPT_RTOL = 1e-10


def accepts(elbo_before: float, elbo_after: float, rtol: float = ACCEPT_RTOL) -> bool:
    """The acceptance rule ``ΔL > ε_acc |L|`` (False for a non-finite candidate)."""
    return bool(np.isfinite(elbo_after) and elbo_after - elbo_before > rtol * abs(elbo_before))


def size_changed(n: float, n0: float, rel: float) -> bool:
    """Whether a cluster's size ``n`` differs from its size ``n0`` at a rejected delete by more
    than the fraction ``rel`` of ``n0`` (``delete_retry_change``): the rule by which the mixture
    and topic deletes try a rejected target again. False when ``n0`` is NaN (unknown)."""
    return bool(abs(n - n0) > rel * max(n0, 1e-300))


# ------------------------------------------------------------------------------ move options
@dataclass(frozen=True)
class OptionRange:
    """Kind and range of one move option (the ``move_options`` of the estimators).

    Every move manager declares one per key of its ``DEFAULT_OPTIONS`` in its ``OPTION_RANGES``
    table; :func:`check_move_options` refuses any other value before a fit does any work.

    Parameters
    ----------
    kind : {"int", "real", "bool"}
        Integers (not bools), real numbers (not bools, never NaN) or bools.
    low, high : float or None
        Bounds of the range (None: unbounded on that side).
    low_open, high_open : bool
        Whether ``low`` / ``high`` themselves are excluded.
    infinite : bool
        ``"real"``: whether ±inf are accepted (within the bounds), e.g. a loss threshold that
        infinity turns off.
    also : tuple
        Further accepted values, ``None`` or strings (e.g. ``"auto"``).
    """

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    infinite: bool = False
    also: tuple = ()

    def describe(self) -> str:
        """The accepted values, in words (as error messages give them)."""
        if self.kind == "bool":
            text = "True or False"
        else:
            bounded = self.low is not None and self.high is not None
            text = "an integer" if self.kind == "int" else "a finite number" if not (self.infinite or bounded) else "a number"
            if bounded:
                text += f" in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
            elif self.low is not None:
                text += f" {'>' if self.low_open else '>='} {self.low:g}"
            elif self.high is not None:
                text += f" {'<' if self.high_open else '<='} {self.high:g}"
            if self.kind == "real" and self.infinite:
                text += " (infinity included)" if self.low is not None or self.high is not None else " (±inf included, not NaN)"
        return " or ".join([text, *(repr(v) for v in self.also)])

    def allows(self, value) -> bool:
        """Whether ``value`` is of this kind and in this range."""
        if any(value is None if v is None else (isinstance(value, str) and value == v) for v in self.also):
            return True
        if self.kind == "bool":
            return isinstance(value, (bool, np.bool_))
        if isinstance(value, (bool, np.bool_)):
            return False
        if not isinstance(value, numbers.Integral if self.kind == "int" else numbers.Real):
            return False
        if self.kind == "real":
            try:
                x = float(value)
            except (OverflowError, TypeError, ValueError):
                return False
            if np.isnan(x) or (np.isinf(x) and not self.infinite):
                return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or not (value > self.high or (self.high_open and value == self.high))


def count(low: int) -> OptionRange:
    """Integers ``>= low``."""
    return OptionRange("int", low=low)


def number(low=None, high=None, *, low_open=False, high_open=False, infinite=False, also=()) -> OptionRange:
    """Real numbers in the given range (bounds included unless ``*_open``)."""
    return OptionRange("real", low=low, high=high, low_open=low_open, high_open=high_open, infinite=infinite, also=also)


#: a share (of rows, tokens, documents, a gain...): [0, 1]
FRACTION = number(0, 1)
#: a switch
FLAG = OptionRange("bool")
#: ``accept_rtol`` (ε_acc of :func:`accepts`): a negative value would accept moves that lower the
#: objective (by up to ε_acc |L|, e.g. a mixture merged into one cluster), and a relative
#: threshold of 1 or more would ask a move for more than the objective's own size; 0 accepts
#: every increase, however small
ACCEPT_RTOL_RANGE = number(0, 1, high_open=True)


def check_move_options(options, ranges: dict) -> dict:
    """Validate ``move_options`` against a manager's ``OPTION_RANGES`` table.

    Parameters
    ----------
    options : dict or None
        Overrides of the manager's defaults (None: none).
    ranges : dict of str to OptionRange
        The manager's table: the known keys and their ranges.

    Returns
    -------
    dict
        A copy of ``options`` (empty for None).

    Raises
    ------
    ParameterError
        If ``options`` is neither a dict nor None, has a key not in ``ranges``, or a value out
        of its key's range (the message names ``move_options['<key>']`` and the range).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ParameterError(f"`move_options` must be a dict or None, got {options!r}")
    unknown = [k for k in options if k not in ranges]
    if unknown:
        raise ParameterError(f"`move_options` has unknown keys {sorted(map(str, unknown))}; known: {sorted(ranges)}")
    for key, value in options.items():
        if not ranges[key].allows(value):
            raise ParameterError(f"`move_options[{key!r}]` must be {ranges[key].describe()}, got {value!r}")
    return dict(options)


class MoveOptions:
    """The options of a move manager: its ``DEFAULT_OPTIONS`` and, for every key, the
    :class:`OptionRange` of its values in ``OPTION_RANGES`` (one table per manager)."""

    DEFAULT_OPTIONS: ClassVar[dict] = {}
    OPTION_RANGES: ClassVar[dict] = {}

    @classmethod
    def check_options(cls, options) -> dict:
        """``options`` (``move_options``: a dict or None) validated against ``OPTION_RANGES``
        (:func:`check_move_options`); the estimators call it before a fit does any work."""
        return check_move_options(options, cls.OPTION_RANGES)

    def _set_options(self, options) -> None:
        """``self.options``: the defaults overridden by the validated ``options``."""
        self.options = {**self.DEFAULT_OPTIONS, **self.check_options(options)}

    def _configure(self, config, allowed, refusal: str) -> None:
        """The part of a manager's construction every family shares: ``config.kinds`` checked
        against ``allowed`` (a :class:`~bnpcore.exceptions.ParameterError` with ``refusal``
        formatted with ``bad`` and ``allowed`` otherwise), then ``config``, ``kinds``,
        ``options`` and ``n_threads`` set."""
        from bnpcore.exceptions import ParameterError

        bad = [k for k in config.kinds if k not in allowed]
        if bad:
            raise ParameterError(refusal.format(bad=bad, allowed=allowed))
        self.config = config
        self.kinds = tuple(config.kinds)
        self._set_options(config.options)
        self.n_threads = config.n_threads


@dataclass
class BatchRequest:
    """What one move needs from a batch's local step (positions, not uids)."""

    merge_pairs: list = field(default_factory=list)
    proposals: list = field(default_factory=list)
    collect_cols: list = field(default_factory=list)
    cooccur_col: int | None = None
    #: the pairs of clusters some L-sparse row holds together (``co_pairs``)
    cooccur_pairs: bool = False
    #: every ``sample_stride``-th row of the batch (``out["sample"]``, dense batches only;
    #: :data:`bnpcore.algorithms.executor.SAMPLE_STRIDE`)
    sample_stride: int | None = None


@dataclass
class LapContext:
    """Per-lap information handed to the moves."""

    model: object
    state: object
    lap: int  # the lap being run, 1-based
    exact: bool  # every batch has a memo: G summarises the whole dataset
    n_batches: int
    n_threads: int | None
    settled: bool = False  # the previous lap met the convergence test while a move was busy
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

    def __init__(self, manager, start_lap: int, max_per_lap: int):
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

    # state carried between laps ---------------------------------------------------------------
    #: attributes carried from one lap to the next (everything else is rebuilt within a lap)
    carried: tuple = ()
    #: classes of the objects (proposals, reservoirs) found in the carried attributes
    state_classes: ClassVar[dict] = {}

    def get_state(self) -> dict:
        """The state this move carries between laps (arrays and JSON scalars, uids not
        positions), as taken at the end of a lap."""
        return {name: encode_state(_plain(getattr(self, name))) for name in self.carried}

    def set_state(self, state: dict) -> None:
        """Restore :meth:`get_state` (a resumed fit then continues bit-identically)."""
        for name in self.carried:
            if name in state:
                setattr(self, name, _restore(decode_state(state[name]), self))


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


def adopt_memos(model, state, memos, n_new_uids: int = 0) -> float:
    """An accepted candidate's per-batch memos become the fit's (their total recomputed, the
    uids of its ``n_new_uids`` new components taken from the state's counter); returns the
    objective of the new summaries."""
    if n_new_uids:
        state.new_uids(n_new_uids)
    state.memos = memos
    state.recompute_total()
    return float(model.elbo(state.stats))


def whole_dataset_passes(model, source, executor, glob, n_passes: int, *, n_threads=None, inits=None):
    """``n_passes`` local-step passes over every batch of ``source`` from the candidate globals
    ``glob``, each pass's summed memos being the next pass's globals (the topic and HMM moves
    judge a candidate by the exact objective of the last pass). Returns the last pass's memos
    and their (batch-order) sum. With a cluster ``executor`` the steps run where the batches
    are and only summaries come back; without one (None) they run here, one batch at a time.
    ``inits``: per batch, None or keyword options of the first pass's local step (the topic
    model's warm start ``init_doc_topic``)."""
    from bnpcore.algorithms._base import materialize, sum_memos
    from bnpcore.algorithms.executor import prepare, shared_options

    memos, total = None, glob
    for i in range(int(n_passes)):
        # per batch, the options of this pass's local step (the warm starts: first pass only)
        extra = [(inits[b] or {}) if (inits is not None and i == 0) else {} for b in range(len(source))]
        if executor is not None:
            memos = [r.memo for r in executor.run(model, total, list(enumerate(extra)), n_threads=n_threads, memo_uids=total.uids)]
        else:
            memos = []
            shared = shared_options(model, total, len(source), n_threads=n_threads)
            for b in range(len(source)):
                out = model.local_step(prepare(model, source.get(b)), total, n_threads=n_threads, **shared, **extra[b])
                memos.append(model.stats_from_output(out, total.uids))
        total = materialize(sum_memos(memos))  # memos kept on a cluster's workers are summed there
    return memos, total


def replace_columns(stats: SuffStats, positions, N, S, H, drop=None) -> SuffStats:
    """Copy of ``stats`` with the given columns' N, S, H replaced, and without the columns at
    positions ``drop`` (none of ``positions``) if given: ``replace_columns(…).drop(drop)`` in
    one copy."""
    if drop is None:
        out = stats.copy()
    else:
        drop = np.asarray(drop, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        out = stats.drop(drop)  # fresh arrays
        positions = positions - np.searchsorted(np.sort(drop), positions)
    out.N[positions] = N
    out.S[positions] = S
    out.H[positions] = H
    return out


# ------------------------------------------------------------------ state carried between laps
def encode_state(obj):
    """Encode move state as nested lists/dicts of arrays and JSON scalars (dict keys of any
    hashable type and tuples are tagged so that :func:`decode_state` restores them exactly)."""
    if isinstance(obj, np.ndarray):
        return np.array(obj, copy=True)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {"__items__": [[encode_state(k), encode_state(v)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [encode_state(v) for v in obj]}
    if isinstance(obj, list):
        return [encode_state(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot encode move state of type {type(obj).__name__}")


def decode_state(obj):
    """Inverse of :func:`encode_state`."""
    if isinstance(obj, np.ndarray):
        return np.array(obj, copy=True)
    if isinstance(obj, dict):
        if "__items__" in obj:
            return {_key(decode_state(k)): decode_state(v) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(decode_state(v) for v in obj["__tuple__"])
        return {k: decode_state(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_state(v) for v in obj]
    return obj


def _key(k):
    return tuple(_key(v) for v in k) if isinstance(k, (tuple, list)) else k


def _plain(obj):
    """Proposal and reservoir objects as tagged dicts of their attributes."""
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return {"__object__": type(obj).__name__, **{k: _plain(v) for k, v in vars(obj).items()}}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_plain(v) for v in obj)
    return obj


def _restore(obj, move):
    if isinstance(obj, dict):
        if "__object__" in obj:
            cls = move.state_classes[obj["__object__"]]
            out = cls.__new__(cls)
            for k, v in obj.items():
                if k != "__object__":
                    setattr(out, k, _restore(v, move))
            return out
        return {k: _restore(v, move) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_restore(v, move) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_restore(v, move) for v in obj)
    return obj
