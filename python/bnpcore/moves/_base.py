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

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bnpcore.stats import SuffStats

__all__ = [
    "ACCEPT_RTOL", "BatchRequest", "LapContext", "Move", "accepts", "decode_state", "encode_state", "replace_columns",
    "sum_parts", "whole_dataset_passes",
]

#: relative acceptance threshold ε_acc (Hughes thesis §4.1.3)
ACCEPT_RTOL = 1e-10


def accepts(elbo_before: float, elbo_after: float, rtol: float = ACCEPT_RTOL) -> bool:
    """The acceptance rule ``ΔL > ε_acc |L|`` (False for a non-finite candidate)."""
    return bool(np.isfinite(elbo_after) and elbo_after - elbo_before > rtol * abs(elbo_before))


@dataclass
class BatchRequest:
    """What one move needs from a batch's local step (positions, not uids)."""

    merge_pairs: list = field(default_factory=list)
    proposals: list = field(default_factory=list)
    collect_cols: list = field(default_factory=list)
    cooccur_col: int | None = None
    #: the pairs of clusters some L-sparse row holds together (``co_pairs``)
    cooccur_pairs: bool = False


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
