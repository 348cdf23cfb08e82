"""Where the local steps of a lap run: in this process (:class:`LocalExecutor`) or on the
workers of a distributed engine (:class:`bnpcore.distributed.DaskExecutor`).

The memoized lap (:func:`bnpcore.algorithms.memoized.run_memoized_lap`) hands an executor a
list of *items* ``(b, options)`` — batch ``b`` and the extra options of its local step (the
statistics the moves ask for) — and the global summaries to use; the executor returns, in the
same order, what each local step produced. The lap never touches the data itself, so the same
lap runs whether the batches live in this process or on other machines.

With the ``"sequential"`` schedule the lap calls :meth:`run` with one item at a time (each batch
sees the globals updated by the previous one); with ``"parallel"`` it calls it once with every
batch of the lap against the lap's starting globals.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SAMPLE_STRIDE", "SCHEDULES", "BatchResult", "LocalExecutor", "prepare", "select_collected_rows", "shared_options", "take_sample"]

#: visiting orders of a memoized lap
SCHEDULES = ("sequential", "parallel")


class BatchResult:
    """What the lap needs from one local step: the output dict of ``model.local_step``, the
    batch's rows for the moves (``X``: the whole batch locally; on a cluster only the rows a
    birth collects, see :func:`select_collected_rows`) and, when asked for (``memo_uids``),
    the batch's memo (``memo``: its summaries, or on a cluster a handle to them on the
    worker; ``out`` then lacks the data statistics ``"S"``)."""

    __slots__ = ("X", "_n_rows", "b", "memo", "out")

    def __init__(self, b: int, out: dict, X, n_rows: int | None = None, memo=None):
        self.b = int(b)
        self.out = out
        self.X = X
        self._n_rows = n_rows
        self.memo = memo

    @property
    def n_rows(self) -> int:
        """Rows of the batch (the stochastic step scales its summaries by N / n_rows)."""
        if self._n_rows is not None:
            return int(self._n_rows)
        X = getattr(self.X, "X", self.X)  # a SeqBatch counts its rows (time steps)
        return int(X.shape[0])


def select_collected_rows(out: dict, X, threshold: float):
    """Keep only the rows a birth collects from a batch (responsibility of some collected
    cluster above ``threshold``): returns ``(out', rows)`` where ``out'["cols"]`` holds those
    rows' responsibilities only, in row order, and ``rows`` the rows themselves.

    Birth (:mod:`bnpcore.moves.birth`) selects ``flatnonzero(cols[:, i] > threshold)`` for each
    collected cluster ``i`` and copies those rows of ``X``; on the reduced pair it selects the
    same rows with the same weights in the same order, while only the rows some cluster collects
    leave the worker."""
    cols = out.get("cols")
    if cols is None:
        return out, None
    cols = np.asarray(cols)
    rows = np.flatnonzero((cols > threshold).any(axis=1))
    out = dict(out)
    out["cols"] = np.ascontiguousarray(cols[rows])
    picked = X[rows]
    return out, picked if hasattr(picked, "nnz") else np.ascontiguousarray(picked)  # scipy.sparse rows stay sparse


#: local-step option of a move that reads per-row outputs with their rows (topic and HMM
#: births): ``(key, column, threshold)`` — only the rows whose ``out[key][:, column]`` exceeds
#: ``threshold`` are wanted (``column`` may be a list of columns: the rows where any of them
#: does). Not a kernel option: executors strip it; a cluster's executor
#: applies it where the batch lives (:func:`select_output_rows`), so only those rows travel.
SELECT_ROWS = "select_rows"


def select_output_rows(out: dict, X, select):
    """Keep the rows ``flatnonzero(out[key][:, column] > threshold)`` (any of the columns, for a
    list of them) of the batch ``X`` (its ``.X`` for a sequence batch) and of the per-row output
    ``out[key]``, in row order. A move
    that applies the same rule to the reduced pair selects every row again, so it sees the same
    rows with the same outputs in the same order."""
    key, col, thr = select
    vals = np.asarray(out[key])
    cols = [int(c) for c in col] if isinstance(col, (list, tuple)) else [int(col)]
    rows = np.flatnonzero((vals[:, cols] > float(thr)).any(axis=1))
    out = dict(out)
    out[key] = np.ascontiguousarray(vals[rows])
    Xr = getattr(X, "X", X)
    return out, Xr[rows]


#: local-step option of a move that keeps every row's document-topic counts for the lap's
#: candidates (the topic moves' warm starts): with ``return_doc_topic`` the counts of all rows
#: come back as ``out["doc_topic_all"]`` even when :data:`SELECT_ROWS` reduces
#: ``out["doc_topic"]``, and a cluster's executor sends no rows back for them. Not a kernel
#: option.
KEEP_DOC_TOPIC = "keep_doc_topic"

#: local-step option of the mixture delete's screen (:class:`bnpcore.moves.delete.DeleteMove`):
#: every ``stride``-th row of a dense batch, in the model's coordinates, comes back as
#: ``out["sample"]`` (:func:`take_sample`), taken where the batch lives — so a cluster's
#: executor returns the same rows as the local one. Not a kernel option.
SAMPLE_STRIDE = "sample_stride"

_EXECUTOR_KEYS = (SELECT_ROWS, KEEP_DOC_TOPIC, SAMPLE_STRIDE)


def take_sample(out: dict, X, opts: dict) -> dict:
    """``out`` with ``out["sample"] = X[::stride]`` (float64, C order) when ``opts`` asks for a
    :data:`SAMPLE_STRIDE` and ``X`` is a dense array (sparse batches give no sample)."""
    stride = opts.get(SAMPLE_STRIDE)
    if stride is None or not isinstance(X, np.ndarray):
        return out
    out = dict(out)
    out["sample"] = np.ascontiguousarray(X[:: max(1, int(stride))], dtype=np.float64)
    return out


def kernel_options(opts: dict) -> dict:
    """``opts`` without the executor-level entries (:data:`SELECT_ROWS`, :data:`KEEP_DOC_TOPIC`)."""
    return opts if not any(k in opts for k in _EXECUTOR_KEYS) else {k: v for k, v in opts.items() if k not in _EXECUTOR_KEYS}


def shared_options(model, glob, n_steps: int, *, n_threads=None) -> dict:
    """Local-step options that depend on the globals only, computed once for ``n_steps`` local
    steps against the same ``glob`` (``model.step_globals``: the topic model's topic-word
    table); empty for a single step or a model without them."""
    fn = getattr(model, "step_globals", None)
    return {} if fn is None or n_steps < 2 else fn(glob, n_threads=n_threads)


def prepare(model, X):
    """``model.prepare(X)`` (the batch in the model's coordinates) for models that have it."""
    fn = getattr(model, "prepare", None)
    return X if fn is None else fn(X)


class LocalExecutor:
    """Local steps in this process (the Rust kernels use ``n_threads`` threads).

    Parameters
    ----------
    source : batch source
        ``source.get(b)`` gives batch ``b``.
    """

    backend = "local"

    def __init__(self, source):
        self.source = source

    def run(self, model, glob, items, *, n_threads=None, memo_uids=None, want_total=False) -> list[BatchResult]:
        """Local steps of ``items`` (list of ``(b, options)``) against the globals ``glob``, in
        order; with ``memo_uids`` each result's ``memo`` is the batch's summaries with those
        uids. (``want_total``: a cluster's executor may return G with the results; here G is
        summed by the lap itself.)"""
        results = []
        shared = shared_options(model, glob, len(items), n_threads=n_threads)
        for b, opts in items:
            Xb = prepare(model, self.source.get(int(b)))
            out = take_sample(model.local_step(Xb, glob, n_threads=n_threads, **shared, **kernel_options(opts)), Xb, opts)
            memo = None if memo_uids is None else model.stats_from_output(out, memo_uids)
            results.append(BatchResult(b, out, Xb, memo=memo))
        return results

    def close(self) -> None:
        """Nothing to release."""
