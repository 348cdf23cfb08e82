"""State shared by the learning algorithms, and the lap-end housekeeping (Hughes thesis §3.4.3)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from bnpcore.stats import SuffStats

__all__ = ["HISTORY_KEYS", "FitState", "add_memos", "is_remote", "materialize", "memo_map", "remove_empty_and_sort", "sum_memos", "tree_sum"]

HISTORY_KEYS = ("lap", "elbo", "n_components", "seconds")


def is_remote(memo) -> bool:
    """Whether ``memo`` is kept where its batch lives (a
    :class:`bnpcore.distributed.RemoteMemo`) rather than in this process."""
    return getattr(memo, "materialize_all", None) is not None


def materialize(memo):
    """The summaries of ``memo`` in this process: a remote memo is fetched; anything else is
    returned as it is."""
    return memo.materialize() if is_remote(memo) else memo


def add_memos(a, b):
    """``a + b`` for memos in this process or on a cluster's workers (a sum involving a remote
    memo is computed on the workers and stays there)."""
    if not is_remote(a) and is_remote(b):
        return b.radd(a)
    return a + b


def sum_memos(memos):
    """``memos[0] + memos[1] + …`` in batch order (the candidates of the topic and HMM moves
    are summed in this order), wherever the memos live."""
    total = memos[0]
    for m in memos[1:]:
        total = add_memos(total, m)
    return total


def memo_map(fn, memo, *args):
    """``fn(memo, *args)`` where the memo lives: in this process, or as a task on the worker
    that holds a remote memo (the result stays there). None stays None."""
    if memo is None:
        return None
    return memo.map(fn, *args) if is_remote(memo) else fn(memo, *args)


@dataclass
class FitState:
    """Everything a fit needs to continue: global summaries, batch memos, uids, RNG streams,
    traces. Saved whole by checkpoints (:mod:`bnpcore.io`).

    Attributes
    ----------
    stats : SuffStats
        Whole-dataset summaries G (memoized/full) or the effective summaries of the stochastic
        algorithm; the global parameters are always ``prior ⊕ stats``.
    memos : list of SuffStats or None
        One memo per revisitable batch of the data source (None until first visited).
    frozen : list of SuffStats
        Memos of batches whose data were not retained (``partial_fit``, one-shot iterators):
        they stay in G (so the ELBO remains exact) but are never revisited (Hughes & Sudderth 2013 §3; Hughes thesis §3.5.3).
    batch_seed : int or None
        Seed of the random assignment of in-memory rows to batches (None: contiguous batches).
    stochastic_step : int
        Number of stochastic steps t taken so far (ρ_t uses t + 1 next).
    last_top_l : int or None
        L of the local steps of the last lap (None: dense), to recognise a lap whose family of
        responsibilities is smaller than that of the memos it replaces.
    mixed_top_l : bool
        A lap whose L differed from ``last_top_l`` was interrupted (Ctrl-C, an error in a
        batch): the memos may come from both families, so the next lap is checked for
        monotonicity neither batch by batch nor against the last recorded ELBO, as a lap that
        shrinks the family.
    n_rows : int
        Rows (observations) summarised by the memos and frozen memos.
    sweep_declined : int
        Sub-atom clusters at the last sweep that did not raise the objective
        (:func:`~bnpcore.algorithms.memoized.sweep_sub_atom`; 0: none declined since the last
        accepted one): the next sweep waits until there are more than twice as many.
    moves_state : dict
        What the proposal moves carry from one lap to the next (pending proposals, birth
        reservoirs, failure memories, ``structure_version``; see
        :meth:`bnpcore.moves.MoveManager.get_state`), refreshed at the end of every lap so a
        warm start or a resumed checkpoint continues exactly.
    overrelax : dict
        The over-relaxation of the topic-word counts (:mod:`bnpcore.algorithms.overrelax`):
        the next lap's ``eta`` and the counts and uids at the start of the last lap (empty:
        the next lap is plain coordinate ascent).
    truncation_free : dict
        Counters of a truncation-free SVI fit (documents seen, steps, documents since the last
        pruning; :mod:`bnpcore.algorithms.truncation_free`); empty for the other algorithms.
    """

    stats: SuffStats
    memos: list
    next_uid: int
    rng_order: np.random.Generator
    rng_moves: np.random.Generator
    lap: int = 0
    history: dict = field(default_factory=lambda: {k: [] for k in HISTORY_KEYS})
    batch_elbo: list = field(default_factory=list)
    moves_log: list = field(default_factory=list)
    seconds: float = 0.0
    stochastic_step: int = 0
    frozen: list = field(default_factory=list)
    batch_seed: int | None = None
    last_top_l: int | None = None
    mixed_top_l: bool = False
    n_rows: int = 0
    sweep_declined: int = 0
    moves_state: dict = field(default_factory=dict)
    overrelax: dict = field(default_factory=dict)
    truncation_free: dict = field(default_factory=dict)

    def new_uids(self, n: int) -> np.ndarray:
        out = np.arange(self.next_uid, self.next_uid + n, dtype=np.int64)
        self.next_uid += n
        return out

    def record(self, elbo: float) -> None:
        """Append this lap's entry to ``history`` (lap, ELBO, components with N_k ≥ 1, seconds)."""
        h = self.history
        h["lap"].append(self.lap)
        h["elbo"].append(float(elbo))
        h["n_components"].append(int(np.sum(self.stats.N >= 1.0)))
        h["seconds"].append(float(self.seconds))

    def record_value(self, key: str, value: float) -> None:
        """Append ``value`` to the extra history entry ``key`` for the lap just recorded
        (laps before it without a value get NaN)."""
        h = self.history.setdefault(key, [])
        h.extend([float("nan")] * (len(self.history["lap"]) - 1 - len(h)))
        h.append(float(value))

    def apply_to_all(self, fn) -> None:
        """Apply the same column transformation to G and every batch memo (frozen ones too).

        All new values are computed first and assigned together, so an interruption cannot leave
        G and the memos referring to different columns."""
        stats = fn(self.stats)
        memos = [memo_map(fn, m) for m in self.memos]
        frozen = [fn(m) for m in self.frozen]
        self.stats, self.memos, self.frozen = stats, memos, frozen
        self._tree = {}

    def recompute_total(self) -> None:
        """G = Σ_b memo[b] by a fixed binary tree over the batch index (then the frozen memos in
        arrival order). No-op while no batch has been summarised.

        The tree makes G a deterministic function of the memos: independent of the visiting
        order and free of subtract/add drift, and bit-identical when a revisited batch returns
        the same summaries. This matters for ill-conditioned posteriors (e.g. zero-mean patches,
        whose scatter matrices are singular along the constant direction), where the
        ``G - old + new`` round-off is amplified into visible ELBO noise."""
        self._tree = {}
        self._refresh_total()

    def set_memo(self, b: int, new) -> None:
        """Replace the memo of batch ``b`` and update G along one root-to-leaf path
        (O(log B) additions of summaries)."""
        self.set_memos({b: new})

    def set_memos(self, new: dict, root=None) -> None:
        """Replace the memos ``{b: memo}`` together, then update G once (the tree nodes above
        the replaced leaves are recomputed). With memos kept on the workers of a cluster only
        G's root comes back, once per call. ``root``: the tree's sum of the memos after the
        replacement, already computed where they live (every memo replaced), or None."""
        if root is not None:
            for b, memo in new.items():
                self.memos[b] = memo
            self._tree = {}
            self._refresh_total(root)
            return
        tree = self.__dict__.setdefault("_tree", {})
        for b, memo in new.items():
            self.memos[b] = memo
            lo, hi = 0, len(self.memos)
            while True:
                tree.pop((lo, hi), None)
                if hi - lo == 1:
                    break
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if b < mid else (mid, hi)
        self._refresh_total()

    def localize_memos(self) -> None:
        """Bring memos kept on the workers of a cluster into this process (one gather), so the
        state can be saved, warm-started on any backend or inspected. G is unchanged (the
        tree's arithmetic is the same wherever it runs). No-op for local memos."""
        remote = [m for m in self.memos if is_remote(m)]
        if not remote:
            return
        values = iter(type(remote[0]).materialize_all(remote))
        self.memos = [next(values) if is_remote(m) else m for m in self.memos]
        self._tree = {}

    def _tree_sum(self, lo: int, hi: int):
        return tree_sum(self.memos, lo, hi, self.__dict__.setdefault("_tree", {}))

    def _refresh_total(self, root=None) -> None:
        if root is None:
            root = self._tree_sum(0, len(self.memos)) if self.memos else None
        # G shares the arrays of the tree's root (summaries are never written in place; a new
        # container, so that assigning a field of G leaves the cached node alone)
        total = None if root is None else materialize(root).shallow_copy()
        for m in self.frozen:
            total = m.copy() if total is None else total + m
        if total is not None:
            self.stats = total


class Timer:
    def __init__(self):
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


#: subtrees of at most this many memos held on a cluster's workers are summed in one task
SUBTREE_LEAVES = 32


def tree_sum(memos, lo: int = 0, hi: int | None = None, cache: dict | None = None):
    """Σ ``memos[lo:hi]`` by the fixed binary tree over the batch index that defines G (missing
    memos, None, are skipped; None if all are). ``cache`` keeps the node sums between calls
    (:class:`FitState` updates one root-to-leaf path per replaced memo). Candidates built from
    modified memos are summed by the same tree, so an adopted candidate's objective is
    reproduced exactly."""
    hi = len(memos) if hi is None else hi
    cache = {} if cache is None else cache
    key = (lo, hi)
    if key not in cache:
        remote = [m for m in memos[lo:hi] if is_remote(m)] if 1 < hi - lo <= SUBTREE_LEAVES else ()
        if remote:  # memos on a cluster's workers: a small subtree is one task there
            val = type(remote[0]).subtree(memos[lo:hi])
        elif hi - lo == 1:
            val = memos[lo]
        else:
            mid = (lo + hi) // 2
            a, b = tree_sum(memos, lo, mid, cache), tree_sum(memos, mid, hi, cache)
            val = a if b is None else (b if a is None else add_memos(a, b))
        cache[key] = val
    return cache[key]


def remove_empty_and_sort(model, state: FitState, elbo: float, *, empty_tol: float = 1e-10) -> float:
    """Drop clusters with (numerically) zero mass and sort by decreasing size, each applied
    only if the exact ELBO does not decrease (nested DP truncation; Hughes thesis §3.4.3).
    Returns the ELBO after the accepted changes. Finite mixtures are left untouched."""
    if not model.alloc.nested:
        return elbo
    G = state.stats
    empty = np.flatnonzero(empty_tol >= G.N)
    if 0 < empty.size < G.K:
        cand = G.drop(empty)
        new = model.elbo(cand)
        if new >= elbo:
            state.apply_to_all(lambda s: s.drop(empty))
            elbo = new
    G = state.stats
    order = np.lexsort((G.uids, -G.N))
    if not np.array_equal(order, np.arange(G.K)):
        new = model.elbo(G.take(order))
        if new >= elbo:
            state.apply_to_all(lambda s: s.take(order))
            elbo = new
    return elbo
