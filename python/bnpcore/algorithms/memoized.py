"""Memoized variational inference (Hughes & Sudderth 2013 §3; Hughes thesis §3.5.3), of which full-dataset coordinate ascent
(Hughes thesis Alg. 3.1) is the one-batch case.

Each batch visit: local step with the current global parameters → the batch's new summaries
replace its memo in the whole-dataset aggregate G (subtract old, add new) → exact global step
(implicit: the global parameters *are* G). From the end of lap 1 on, G summarises one valid
responsibility matrix for the whole dataset, so the ELBO computed from G is exact and can never
decrease; with ``n_batches=1`` the algorithm is full-dataset coordinate ascent.
"""

from __future__ import annotations

import warnings

import numpy as np

from bnpcore.algorithms._base import FitState, Timer, remove_empty_and_sort
from bnpcore.exceptions import ELBODecreaseWarning

__all__ = ["MONOTONE_RTOL", "elbo_roundoff", "is_decrease", "run_memoized_lap", "stream_batch"]

#: relative round-off tolerance of the monotonicity checks
MONOTONE_RTOL = 1e-9


def elbo_roundoff(model, stats) -> float:
    """The observation model's estimate of the objective's round-off at ``stats``
    (:meth:`bnpcore.obs.ObsModel.elbo_roundoff`; 0 for models without one)."""
    estimate = getattr(getattr(model, "obs", None), "elbo_roundoff", None)
    return 0.0 if estimate is None else float(estimate(stats.N, stats.S))


def is_decrease(prev: float | None, new: float, model=None, stats=None) -> bool:
    """Whether ``new`` is below ``prev`` by more than round-off: :data:`MONOTONE_RTOL`
    relative, or — for objectives whose terms are ill conditioned at ``stats`` (Gaussian data
    in an affine subspace, see :meth:`bnpcore.obs.ObsModel.elbo_roundoff`) — the model's own
    estimate of its round-off there (computed only when the first test fails)."""
    if prev is None or new >= prev - MONOTONE_RTOL * abs(prev):
        return False
    return model is None or new < prev - elbo_roundoff(model, stats)


def _check_monotone(prev: float | None, new: float, where: str, model=None, stats=None) -> None:
    if is_decrease(prev, new, model, stats):
        warnings.warn(
            f"ELBO decreased {where}: {prev!r} -> {new!r} (change {new - prev:.3e})",
            ELBODecreaseWarning,
            stacklevel=3,
        )


def run_memoized_lap(
    model,
    source,
    state: FitState,
    *,
    n_threads=None,
    moves=None,
    on_batch=None,
    check_monotone=True,
    schedule: str = "sequential",
    executor=None,
    overrelax: float = 1.0,
) -> dict:
    """One lap: visit every batch once in a fresh seeded random order, then the end-of-lap
    moves, empty-cluster removal and sorting. Returns ``{"elbo", "accepted"}``.

    ``check_monotone=False`` skips the per-batch ELBO check for a lap whose local steps use a
    smaller family of responsibilities than the memos they replace (the first L-sparse lap
    after dense ones): such a visit can lower the ELBO by up to the mass the top L drop.

    ``schedule="sequential"`` visits the batches one after the other, each with the global
    parameters left by the previous visit (Hughes & Sudderth 2013, Alg. 1).
    ``schedule="parallel"`` runs the local steps of every batch against the lap's starting
    global parameters, then replaces the memos in the same visiting order: what a cluster of
    machines runs. It is coordinate ascent too — given the global parameters the local
    factors of different batches are independent, so updating them together is one block
    update, followed by the exact global step — so the ELBO still never decreases from lap to
    lap (it may between two batch replacements, which are not checked).

    ``executor`` runs the local steps (:class:`~bnpcore.algorithms.executor.LocalExecutor` over
    ``source`` by default); a distributed executor runs them where the data are.

    ``overrelax`` > 1 lets the local steps of models that define ``overrelaxed`` (topic
    models) use topic-word counts extrapolated along the last lap's change
    (:mod:`bnpcore.algorithms.overrelax`); a visit that would lower the objective is redone
    with the plain globals."""
    from bnpcore.algorithms.executor import LocalExecutor
    from bnpcore.algorithms.overrelax import Overrelax

    timer = Timer()
    B = len(source)
    order = state.rng_order.permutation(B) if B > 1 else np.zeros(1, dtype=np.int64)
    exact = all(m is not None for m in state.memos)
    if executor is None:
        executor = LocalExecutor(source)
    if moves is not None:
        moves.start_lap(model, state)
    prev_batch = model.elbo(state.stats) if exact else None
    accel = Overrelax(model, state, overrelax, exact=exact)
    # moves that keep a batch's replacement only if it does not lower the objective (topic
    # models: the document step is not an exact maximisation)
    guard = moves is not None and exact and bool(getattr(moves, "guards_batches", False))

    def memo_of(res):
        return res.memo if res.memo is not None else model.stats_from_output(res.out, state.stats.uids)

    def absorb(res, relaxed=False) -> bool:
        """Replace batch ``res.b``'s memo; False (memo kept) when the visit was over-relaxed
        and would lower the objective (the caller redoes it with the plain globals)."""
        nonlocal prev_batch
        b = res.b
        old = state.memos[b]
        state.set_memo(b, memo_of(res))  # G = tree sum of the memos (exact global step follows)
        if exact:
            cur = model.elbo(state.stats)
            if relaxed and cur < prev_batch:
                state.set_memo(b, old)
                accel.reject()
                return False
            if guard and cur < prev_batch:
                state.set_memo(b, old)
                moves.batch_rejected(b)
                cur = model.elbo(state.stats)
        if moves is not None:
            moves.after_batch(model, state, b, res.out, X=res.X)
        if exact:
            if check_monotone:
                _check_monotone(prev_batch, cur, f"after visiting batch {b} in lap {state.lap + 1}", model, state.stats)
            state.batch_elbo.append(cur)
            prev_batch = cur
        if on_batch is not None:
            on_batch(b)
        return True

    if schedule == "parallel":
        # one block update: every local step against the lap's starting globals, then every
        # memo replaced at once (on a cluster the memos stay on the workers and only G's root
        # comes back). If a guarded block lowers the objective, the replacements are redone
        # one by one in visiting order, each kept only if it does not lower it.
        glob = state.stats
        items = [(int(b), moves.batch_options(model, state, int(b)) if moves is not None else {}) for b in order]
        results = executor.run(model, accel.globals(glob), items, n_threads=n_threads, memo_uids=glob.uids, want_total=True)
        old = {res.b: state.memos[res.b] for res in results}
        state.set_memos({res.b: memo_of(res) for res in results}, root=getattr(results, "total", None))
        if accel.active and model.elbo(state.stats) < prev_batch:
            # the over-relaxed block would lower the objective: the plain block instead
            state.set_memos(old)
            accel.reject()
            results = executor.run(model, glob, items, n_threads=n_threads, memo_uids=glob.uids, want_total=True)
            state.set_memos({res.b: memo_of(res) for res in results}, root=getattr(results, "total", None))
        if guard and model.elbo(state.stats) < prev_batch:
            state.set_memos(old)
            for res in results:
                absorb(res)
        else:
            for res in results:
                if moves is not None:
                    moves.after_batch(model, state, res.b, res.out, X=res.X)
                if on_batch is not None:
                    on_batch(res.b)
            if exact:
                state.batch_elbo.append(model.elbo(state.stats))
    else:
        for b in order:
            b = int(b)
            opts = moves.batch_options(model, state, b) if moves is not None else {}
            relaxed = accel.active
            (res,) = executor.run(model, accel.globals(state.stats), [(b, opts)], n_threads=n_threads)
            if not absorb(res, relaxed):
                (res,) = executor.run(model, state.stats, [(b, opts)], n_threads=n_threads)
                absorb(res)
    # G is already the fixed-tree sum of the memos (set_memo), so no end-of-lap re-summation
    elbo = model.elbo(state.stats)
    accepted = 0
    if moves is not None:
        accepted, elbo = moves.end_lap(model, state, elbo)
    elbo = remove_empty_and_sort(model, state, elbo)
    if moves is not None and exact:
        swept, elbo = sweep_sub_atom(model, source, state, elbo, executor=executor, n_threads=n_threads)
        accepted += swept
    accel.end_lap()
    state.lap += 1
    state.seconds += timer.elapsed()
    relaxed = accel.direction is not None
    return {"elbo": elbo, "accepted": accepted, "overrelaxed": relaxed, "relax_rejected": accel.rejected,
            "overrelax": (accel.eta if relaxed and not accel.rejected else 1.0) if accel.wanted else None}


#: clusters of less than this mass are "sub-atom" (:func:`sweep_sub_atom`)
SUB_ATOM_MASS = 1.0

#: a sweep is tried when at least this fraction of the clusters are sub-atom
SUB_ATOM_FRACTION = 0.1


def sweep_sub_atom(model, source, state: FitState, elbo: float, *, executor=None, n_threads=None) -> tuple[int, float]:
    r"""Remove every cluster of less than one atom of mass at once, when they are at least a tenth
    of the clusters, if that raises the exact objective.

    Clusters whose mass lies between the empty threshold of :func:`remove_empty_and_sort`
    (:math:`10^{-10}`) and one row's worth are removed by nothing else unless a move happens to
    push their mass lower, and each costs a full column of every dense local step: on 100,000
    image patches from K = 800 with the default moves, one fit kept 418 of them beside 355 real
    clusters for good, and its laps took twice as long. The candidate is the lap's model without
    them, stepped over every batch once (a whole-dataset pass of the local step: valid
    responsibilities, so its objective is exact); it replaces the memos when its objective is at
    least the lap's. Returns ``(1 if replaced else 0, objective)``. Only for nested allocations
    (the DP), with every memo revisitable. A declined sweep is not tried again until there are
    more than twice as many sub-atom clusters (``FitState.sweep_declined``): each try costs a
    pass over the data."""
    from bnpcore.moves._base import whole_dataset_passes

    G = state.stats
    if not model.alloc.nested or state.frozen or G.K < 2:
        return 0, elbo
    tiny = np.flatnonzero(G.N < SUB_ATOM_MASS)
    if tiny.size < max(2, int(np.ceil(SUB_ATOM_FRACTION * G.K))) or tiny.size >= G.K:
        return 0, elbo
    if tiny.size <= 2 * state.sweep_declined:  # declined before with half as many: not every lap
        return 0, elbo
    memos, _ = whole_dataset_passes(model, source, executor, G.drop(tiny), 1, n_threads=n_threads)
    old = state.memos
    state.memos = list(memos)
    state.recompute_total()
    new = model.elbo(state.stats)
    if new >= elbo:
        state.sweep_declined = 0
        return 1, new
    state.sweep_declined = int(tiny.size)
    state.memos = old
    state.recompute_total()  # the same tree sum of the same memos: G as it was, bit for bit
    return 0, elbo


def stream_batch(model, state: FitState, X, *, n_threads=None) -> float:
    """The streaming memoized update of one batch whose data are not retained (Hughes & Sudderth 2013 §3; Hughes thesis §3.5.3):
    local step with the current globals, its summaries added to ``state.frozen`` (one running
    sum), G
    re-summed, then empty-cluster removal and sorting. Returns the exact ELBO of everything
    seen so far. Does not count a lap."""
    from bnpcore.algorithms.executor import prepare

    out = model.local_step(prepare(model, X), state.stats, n_threads=n_threads)
    new = model.stats_from_output(out, state.stats.uids)
    # the frozen memos are never revisited and every operation on them is linear (a column
    # transformation, a move's part): their running sum stands for them all, so memory, model
    # files and the cost of a call stay those of one memo however many batches were streamed
    folded = new
    if state.frozen:  # (several only in a model file of an earlier version)
        folded = state.frozen[0]
        for m in [*state.frozen[1:], new]:
            folded = folded + m
    state.frozen = [folded]
    state.recompute_total()  # G = tree sum of the revisitable memos + the frozen ones
    n_rows = getattr(X, "n_rows", None)  # a SeqBatch counts its time steps
    state.n_rows += int(X.shape[0] if n_rows is None else n_rows)
    return remove_empty_and_sort(model, state, model.elbo(state.stats))
