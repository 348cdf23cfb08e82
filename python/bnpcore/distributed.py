r"""Memoized variational inference on a Dask cluster (``backend="dask"``).

Memoized VI is a map-reduce (Hughes & Sudderth 2013, §3): the local step of a batch needs
only the global parameters, and the batch's summaries add up to the whole-dataset summaries.
With ``backend="dask"`` an estimator keeps that split across machines:

* **the data stay on the workers.** Each batch is a Dask future: a ``.npy`` file read by a
  worker (``np.load`` there, never on the driver), a row chunk of a ``dask.array.Array`` or of a
  ``dask.dataframe.DataFrame`` of numeric columns, or (for an in-memory array) a batch scattered
  once at the start of the fit;
* **only K-sized summaries travel.** Per lap the driver submits the model and the global
  summaries once (as tasks holding them, which workers fetch from each other) and every
  batch's local step runs on the worker that holds the batch (the Rust kernels release the GIL). With ``schedule="parallel"`` the batch
  memos stay on the workers (:class:`RemoteMemo`): they are summed there by the same fixed
  binary tree over the batch index as on one machine, and only G's root comes back, once per
  lap, with the small outputs the moves read (never the data statistics). With
  ``"sequential"`` each batch needs the G left by the previous one, so the memos come back;
* **moves** ask for their statistics through the same local step (merge pair entropies,
  birth and delete proposal summaries, the topic and HMM candidates' passes), so those too are
  computed where the data are; accepted moves transform the memos where they live. A birth
  copies only the rows it collects to the driver.

For the same batches, ``schedule`` and ``random_state`` the fit equals the local backend's fit
bit for bit: the same local steps run on the same inputs in the same order of reduction.

**Faults.** A worker lost mid-lap: the scheduler recomputes its batches elsewhere (a ``.npy``
file is read again, a dask-array chunk recomputed from its graph) and the lap's local steps are
re-run on the same inputs, so the fit ends in the same model. Batches scattered from an
in-memory array have no recipe to recompute them: to survive worker loss give files or a dask
array. A killed driver resumes from ``checkpoint_path`` exactly as on one machine.

**Timeouts.** Connecting to a scheduler address and waiting for a first worker are each bounded
by :data:`WORKER_TIMEOUT` seconds (environment variable ``BNPCORE_DASK_TIMEOUT``); a scheduler
that cannot be reached, a cluster without workers, workers that cannot import bnpcore, or files
a worker cannot read raise :class:`~bnpcore.exceptions.BackendError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import uuid
import warnings

import numpy as np

from bnpcore.algorithms._base import SUBTREE_LEAVES
from bnpcore.algorithms.executor import (
    KEEP_DOC_TOPIC,
    SELECT_ROWS,
    BatchResult,
    kernel_options,
    prepare,
    select_collected_rows,
    select_output_rows,
    take_sample,
)
from bnpcore.exceptions import BackendError, ParameterError, ShapeError

__all__ = ["BACKENDS", "WORKER_TIMEOUT", "DaskBatches", "DaskExecutor", "RemoteMemo", "dask_session", "row_batches_on_dask"]

#: accepted values of the estimators' ``backend``
BACKENDS = ("local", "dask")

#: seconds to wait for the first worker of a cluster (``BNPCORE_DASK_TIMEOUT`` overrides it)
WORKER_TIMEOUT = float(os.environ.get("BNPCORE_DASK_TIMEOUT", "60"))


def _require_dask():
    try:
        import distributed  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendError(
            "backend='dask' needs dask.distributed: pip install 'dask[distributed]'"
        ) from exc


# ----------------------------------------------------------------- tasks run on the workers
#: glibc ``mallopt`` parameters (``malloc.h``)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_malloc_tuned = False


def _tune_malloc() -> None:
    """Undo, in this worker process, the allocator setting a Dask nanny gives its workers.

    Nannies start workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (so that freed memory goes
    back to the OS at once). Setting any glibc threshold also freezes the mmap threshold at
    128 KiB, so every scratch buffer of a local step (about 1 MB per leaf of rows) is mapped
    fresh and page-faulted on every call: measured on the 100,000 × 16, K = 25 Gaussian batch,
    one local step takes 0.196 s in a worker against 0.127 s in the driver, the whole Dask
    overhead of ``benches/bench_dask.py``. Raising the trim threshold to 256 MiB and the mmap
    threshold to 32 MiB (glibc's maximum) restores 0.128 s; memory a fit frees is then kept
    for its next local step instead of being returned to the OS. Runs once per process, only
    with glibc; ``BNPCORE_DASK_MALLOC_TUNE=0`` turns it off.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return
    _malloc_tuned = True
    if os.environ.get("BNPCORE_DASK_MALLOC_TUNE", "1") == "0" or not os.environ.get("MALLOC_TRIM_THRESHOLD_"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TRIM_THRESHOLD, 256 * 1024 * 1024)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)
    except (OSError, AttributeError):  # not glibc: nothing to undo
        pass


def _validated(X, label: str, n_features=None) -> np.ndarray:
    from bnpcore._validation import check_array

    if getattr(X, "ndim", 2) != 2:
        raise ShapeError(f"{label} must be 2-D (n_samples, n_features), got shape {getattr(X, 'shape', None)}")
    out = check_array(X, name=label, n_features=n_features)
    if out.shape[0] < 1:
        raise ShapeError(f"{label} has no rows")
    return out


def _load_npy(path: str, b: int, n_features=None) -> np.ndarray:
    """Read and validate batch ``b`` from ``path`` (runs on a worker)."""
    try:
        X = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise BackendError(f"a Dask worker could not read batch {b} of `X` from {path!r}: {exc}") from None
    return _validated(X, f"X (batch {b}, {os.path.basename(str(path))})", n_features)


def _validate_block(X, b: int, n_features=None) -> np.ndarray:
    return _validated(np.asarray(X), f"X (batch {b})", n_features)


def _n_rows(X) -> int:
    return int(X.shape[0])


def _n_cols(X) -> int:
    return int(X.shape[1])


def _rows(X, idx) -> np.ndarray:
    return np.ascontiguousarray(X[np.asarray(idx, dtype=np.intp)])


def _probe() -> str:
    import bnpcore

    return bnpcore.__version__


def _local_step(model, X, glob, opts, n_threads, b, collect_threshold, memo_uids=None):
    """One batch's local step where the batch lives; only K-sized outputs (and the rows a
    birth collects) are returned. With ``memo_uids`` the batch's memo is built here too:
    ``(memo, out without "S", rows, n)``, of which only the last three travel (see
    :class:`RemoteMemo`)."""
    _tune_malloc()
    obs = getattr(model, "obs", None)  # the ObsModel's check (support and magnitude), else the kernel's
    check = getattr(obs, "check_data", None) or getattr(getattr(obs, "core", None), "check_data", None)
    if isinstance(X, np.ndarray) and check is not None:
        check(X, f"X (batch {b})")
    X = prepare(model, X)
    out = take_sample(model.local_step(X, glob, n_threads=n_threads, **kernel_options(opts)), X, opts)
    keep = out.get("doc_topic") if opts.get(KEEP_DOC_TOPIC) else None
    rows = None
    if collect_threshold is not None and out.get("cols") is not None:
        out, rows = select_collected_rows(out, X, collect_threshold)
    elif opts.get(SELECT_ROWS) is not None:
        # a move that reads per-row outputs with their rows (topic and HMM births): only the
        # rows it collects leave the worker
        out, rows = select_output_rows(out, X, opts[SELECT_ROWS])
    elif (opts.get("return_doc_topic") and keep is None) or opts.get("return_resp"):
        # per-row outputs asked for without a selection: the batch itself travels
        rows = X
    if keep is not None:  # every row's counts, without the rows (warm starts)
        out = dict(out)
        out["doc_topic_all"] = keep
    shape = getattr(getattr(X, "X", X), "shape", None)  # a SeqBatch counts its rows
    n = None if shape is None else int(shape[0])
    if memo_uids is None:
        return out, rows, n
    memo = model.stats_from_output(out, memo_uids)
    return memo, {k: v for k, v in out.items() if k != "S"}, rows, n


def _identity(value):
    return value


def _driver_part(step):
    return step[1:]


def _lap_reduce(order, *steps):
    """G (the fixed tree's sum of a whole lap's memos, by batch index) and every step's driver
    part (in item order), in one task."""
    leaves = [None] * len(steps)
    for b, st in zip(order, steps):
        leaves[b] = st
    return _subtree(*leaves), [_driver_part(st) for st in steps]


class LapResults(list):
    """The results of a call of :meth:`DaskExecutor.run`, with ``total`` (G or None)."""

    total = None


def _value(memo):
    """A remote memo's value: a local step's result ``(memo, out, rows, n)`` holds it first
    (the memo stays in the step's result on the worker; no task of its own)."""
    return memo[0] if isinstance(memo, tuple) else memo


def _add(a, b):
    return _value(a) + _value(b)


def _apply(fn, memo, *args):
    return fn(_value(memo), *args)


def _subtree(*leaves):
    """The fixed tree's sum of consecutive memos, in one task (the same additions, in the same
    order, as :func:`~bnpcore.algorithms._base.tree_sum` over them)."""
    from bnpcore.algorithms._base import tree_sum

    return tree_sum([None if m is None else _value(m) for m in leaves])


#: attempts of a call whose workers are lost while it runs
LOST_ATTEMPTS = 4


def _retry_lost(call):
    """``call()``, started again (up to :data:`LOST_ATTEMPTS` times, with a growing pause) when
    a worker is lost while it runs: its connection closes, the scheduler declares it killed,
    or data it held disappear. The calls retried are pure functions of their inputs (the
    scheduler recomputes lost results from their recipe), so the outcome is the same."""
    import asyncio
    import time

    from distributed import KilledWorker

    lost = (OSError, KilledWorker, asyncio.CancelledError, concurrent.futures.CancelledError)
    for attempt in range(LOST_ATTEMPTS):
        try:
            return call()
        except lost:
            if attempt == LOST_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


class RemoteMemo:
    """A batch memo kept on the Dask worker that built it (``schedule="parallel"``): the
    driver holds a future. Sums of memos (the fixed tree that defines G, a move's candidate)
    and a move's changes to them (:func:`~bnpcore.algorithms._base.memo_map`) run as tasks on
    the workers and stay there; only what the driver needs — G's root, a candidate's total —
    is fetched (:meth:`materialize`). The arithmetic is the one the local backend runs, so the
    results are bit-identical.

    ``keep`` holds the model and globals the memo was computed from: a worker lost
    later makes the scheduler recompute its memos from their recipe (batch + globals), which
    needs those inputs alive."""

    __slots__ = ("client", "future", "in_step", "keep")

    def __init__(self, client, future, keep=(), in_step: bool = False):
        self.client = client
        self.future = future
        self.keep = tuple({f.key: f for f in keep}.values())
        self.in_step = bool(in_step)  # the future is a local step's result (memo, out, rows, n)

    def _new(self, future, *others):
        keep = self.keep + tuple(f for o in others for f in o.keep)
        return RemoteMemo(self.client, future, keep)

    def _remote(self, other):
        if isinstance(other, RemoteMemo):
            return other
        return RemoteMemo(self.client, self.client.scatter(other, hash=False))

    def __add__(self, other):
        other = self._remote(other)
        return self._new(self.client.submit(_add, self.future, other.future, pure=False), other)

    def radd(self, other):
        """``other + self`` for a memo ``other`` held in this process."""
        other = self._remote(other)
        return self._new(self.client.submit(_add, other.future, self.future, pure=False), other)

    def map(self, fn, *args):
        """``fn(memo, *args)`` as a task on the workers; the result stays there."""
        return self._new(self.client.submit(_apply, fn, self.future, *args, pure=False))

    def copy(self):
        """Memos are never modified in place: the copy is the same remote value."""
        return self

    @staticmethod
    def subtree(memos):
        """The fixed tree's sum of the consecutive memos ``memos`` (some remote, None skipped)
        as one task on the workers: small subtrees cost one scheduler round trip instead of
        one per addition."""
        first = next(m for m in memos if isinstance(m, RemoteMemo))
        remote = [m if m is None or isinstance(m, RemoteMemo) else first._remote(m) for m in memos]
        real = [m for m in remote if m is not None]
        fut = first.client.submit(_subtree, *[None if m is None else m.future for m in remote], pure=False)
        return first._new(fut, *real)

    def materialize(self):
        """The memo's value in this process."""
        return self.materialize_all([self])[0]

    @staticmethod
    def materialize_all(memos):
        """The values of several remote memos, in one gather (retried while workers are
        lost: their memos are recomputed from their recipe)."""
        client = memos[0].client
        # a memo still inside its local step's result is extracted there (only it travels)
        futures = [client.submit(_value, m.future, pure=False) if m.in_step else m.future for m in memos]
        return _retry_lost(lambda: list(_gather(client, futures)))


# ------------------------------------------------------------------------ the driver side
def _cluster_lost(exc, client) -> bool:
    """Whether ``exc``, raised during a fit, means the cluster is gone: the client was closed
    under the fit, a connection closed for good, tasks were cancelled by a lost scheduler or
    killed workers; or any ``OSError`` once the client is no longer running."""
    from distributed import KilledWorker
    from distributed.client import ClosedClientError
    from distributed.comm import CommClosedError

    lost = (ClosedClientError, CommClosedError, KilledWorker, asyncio.CancelledError, concurrent.futures.CancelledError)
    if isinstance(exc, lost):
        return True
    return isinstance(exc, OSError) and getattr(client, "status", "running") != "running"


def _check_address(address: str) -> None:
    """Refuse a ``client`` string that is not a scheduler address, before a ``Client`` is built
    from it (a client left half-built by a bad address blocks the interpreter's exit)."""
    from distributed.comm import get_address_host_port, parse_address

    try:
        if parse_address(address)[0] != "inproc":  # an in-process address has no host and port
            get_address_host_port(address)
    except ValueError as exc:  # no port, an unknown scheme...
        raise ParameterError(f"`client` {address!r} is not a Dask scheduler address ({exc}); e.g. 'tcp://host:8786'") from None


@contextlib.contextmanager
def dask_session(client=None, *, verbose: bool = False):
    """The client of a fit: ``client`` itself (left open), or a ``LocalCluster`` started here
    and closed when the fit ends (one worker process per core, one thread each).

    Raises
    ------
    ParameterError
        ``client`` is a string that is not a scheduler address.
    BackendError
        The scheduler at the address ``client`` cannot be reached within
        :data:`WORKER_TIMEOUT` seconds (the message names the address), no worker joined within
        :data:`WORKER_TIMEOUT` seconds, a worker cannot import bnpcore, ``client`` is closed, or
        the cluster is lost while the fit runs (the client closes, the scheduler goes away,
        tasks are cancelled or workers killed).
    """
    _require_dask()
    from distributed import Client, LocalCluster

    own = client is None
    cluster = None
    if own:
        n = max(1, min(os.cpu_count() or 1, 4))
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0")
        client = Client(cluster)
    elif isinstance(client, str):
        address = client
        _check_address(address)
        try:
            client, own = Client(address, timeout=WORKER_TIMEOUT), True
        except (TimeoutError, OSError) as exc:
            raise BackendError(
                f"cannot connect to the Dask scheduler at {address!r} within {WORKER_TIMEOUT:g} s ({exc}); "
                "check the address (set BNPCORE_DASK_TIMEOUT to wait longer)"
            ) from exc
    try:
        if getattr(client, "status", "running") in ("closing", "closed"):
            raise BackendError(
                f"the Dask `client` is closed ({client!r}); pass an open Client, a scheduler address, or None to start "
                "a LocalCluster for the fit"
            )
        try:
            client.wait_for_workers(1, timeout=WORKER_TIMEOUT)
        except (TimeoutError, OSError) as exc:
            raise BackendError(
                f"no Dask worker joined within {WORKER_TIMEOUT:g} s (set BNPCORE_DASK_TIMEOUT to wait longer)"
            ) from exc
        try:
            client.run(_probe)
        except (ImportError, AttributeError) as exc:
            raise BackendError(
                f"a Dask worker cannot import bnpcore ({exc}); install bnpcore in the workers' environment"
            ) from exc
        if verbose:
            link = getattr(client, "dashboard_link", None)
            print(f"bnpcore: Dask client {client!r}" + (f", dashboard {link}" if link else ""))
        yield client
    except BackendError:
        raise
    except (Exception, asyncio.CancelledError) as exc:
        if not _cluster_lost(exc, client):
            raise
        if getattr(client, "status", None) == "running":  # workers lost, results that cannot be recomputed
            what = (
                f"Dask workers were lost during the fit and the results they held could not be recomputed "
                f"({type(exc).__name__}: {exc}); batches scattered from in-memory data are lost with their worker "
                "(give a dask array or a list of .npy paths to survive worker loss)"
            )
        else:
            what = f"the Dask cluster was lost during the fit ({type(exc).__name__}: {exc})"
        raise BackendError(
            f"{what}; the estimator keeps the laps it completed (not converged): continue with warm_start=True and a "
            "working client, or from checkpoint_path"
        ) from exc
    finally:
        if own:
            client.close()
            if cluster is not None:
                cluster.close()


class DaskBatches:
    """A :class:`~bnpcore.data.BatchSource` of row batches held by Dask workers.

    ``futures[b]`` is the validated batch ``b`` on some worker; the driver knows only the batch
    sizes. Build it with :func:`row_batches_on_dask`.
    """

    segment = "row"
    shuffles = False

    def __init__(self, client, futures, sizes, n_features: int, init_sampler=None):
        self.client = client
        self.futures = list(futures)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self._n_features = int(n_features)
        self._init_sampler = init_sampler
        self._check = None

    @property
    def n_rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_segments(self) -> int:
        return self.n_rows

    @property
    def n_features(self) -> int:
        return self._n_features

    def __len__(self) -> int:
        return len(self.futures)

    def batch_size(self, b: int) -> int:
        return int(self.sizes[b])

    def get(self, b: int) -> np.ndarray:
        """Batch ``b`` copied to the driver (the fit itself never calls this)."""
        return self.client.gather(self.futures[b])

    def sample_for_init(self, max_rows: int, rng) -> np.ndarray:
        """A uniform subsample of at most ``max_rows`` rows across all batches, drawn exactly as
        :meth:`bnpcore.data.sources.ListBatches.sample_for_init` draws it; only those rows are
        copied to the driver."""
        if self._init_sampler is not None:
            return self._init_sampler(max_rows, rng)
        n = self.n_rows
        idx = np.arange(n) if n <= max_rows else np.sort(rng.choice(n, size=max_rows, replace=False))
        which = np.searchsorted(self.offsets, idx, side="right") - 1
        futs = []
        for b in np.unique(which):
            local = idx[which == b] - self.offsets[b]
            futs.append(self.client.submit(_rows, self.futures[int(b)], local, pure=False))
        return np.concatenate(_gather(self.client, futs), axis=0)


def _gather(client, futures):
    try:
        return client.gather(futures)
    except BackendError:
        raise
    except (ImportError, AttributeError) as exc:
        if "bnpcore" in str(exc):
            raise BackendError(f"a Dask worker cannot import bnpcore ({exc})") from exc
        raise


def _is_dask_collection(X, kind: str) -> bool:
    mod = type(X).__module__
    return mod.startswith("dask.") and hasattr(X, "__dask_graph__") and (kind in mod)


def row_batches_on_dask(client, X, *, local_source=None, n_features=None) -> DaskBatches:
    """Row batches of ``X`` on the workers of ``client``.

    Parameters
    ----------
    client : distributed.Client
    X : list of ``.npy`` paths, dask.array.Array, dask.dataframe.DataFrame, or None
        Paths are read by the workers (one batch per file); a dask array's row chunks are the
        batches (columns are put in one chunk); a DataFrame of numeric columns is converted to
        a dask array with known chunk sizes. None: use ``local_source``.
    local_source : batch source or None
        An in-memory source of any family (rows, documents, sequences; e.g.
        :class:`~bnpcore.data.sources.ArrayBatches`) whose batches are scattered to the
        workers once; its ``sample_for_init`` is used unchanged.
    n_features : int or None
        Expected number of columns (warm start).
    """
    tag = uuid.uuid4().hex[:8]
    if local_source is not None:
        futures = [client.scatter(local_source.get(b), hash=False) for b in range(len(local_source))]
        sizes = [local_source.batch_size(b) for b in range(len(local_source))]
        out = DaskBatches(client, futures, sizes, local_source.n_features, init_sampler=local_source.sample_for_init)
        out.segment = getattr(local_source, "segment", "row")
        return out
    if isinstance(X, (list, tuple)):
        futures = [
            client.submit(_load_npy, os.fspath(p), b, n_features, pure=False, key=f"bnpcore-batch-{tag}-{b}")
            for b, p in enumerate(X)
        ]
    else:
        if _is_dask_collection(X, "dataframe"):
            X = X.to_dask_array(lengths=True)
        if not _is_dask_collection(X, "array"):
            raise ParameterError(
                "backend='dask' takes a list of .npy paths, a dask.array.Array, a dask.dataframe.DataFrame "
                f"or an in-memory array; got {type(X).__name__}"
            )
        if X.ndim != 2:
            raise ShapeError(f"`X` must be 2-D (n_samples, n_features), got shape {X.shape}")
        X = X.rechunk({1: -1})
        blocks = [X.blocks[i] for i in range(X.numblocks[0])]
        raw = client.compute(blocks)
        futures = [
            client.submit(_validate_block, f, b, n_features, pure=False, key=f"bnpcore-batch-{tag}-{b}")
            for b, f in enumerate(raw)
        ]
    if len(futures) < 2:
        raise ParameterError(f"backend='dask' needs at least 2 batches, got {len(futures)}; use backend='local'")
    sizes = _gather(client, [client.submit(_n_rows, f, pure=False) for f in futures])
    d = n_features
    if d is None:
        d = int(_gather(client, client.submit(_n_cols, futures[0], pure=False)))
    return DaskBatches(client, futures, sizes, d)


class DaskExecutor:
    """Runs the lap's local steps on the workers that hold the batches (see the module
    docstring). ``collect_threshold`` is the birth move's collection threshold (set by the
    estimator when births are on)."""

    backend = "dask"

    def __init__(self, client, source: DaskBatches, collect_threshold=None, keep_memos: bool = False):
        self.client = client
        self.source = source
        self.collect_threshold = collect_threshold
        self.keep_memos = bool(keep_memos)

    def run(self, model, glob, items, *, n_threads=None, memo_uids=None, want_total=False) -> list[BatchResult]:
        """Local steps of ``items`` on the workers, against ``glob``; outputs in item order.
        With ``memo_uids`` each result carries the batch's memo (``.memo``): a
        :class:`RemoteMemo` left on the worker when the executor keeps memos there
        (``keep_memos``), else built in this process. With ``want_total`` and every batch in
        ``items``, the returned list's ``total`` may hold G — the fixed tree's sum of the new
        memos — computed on the workers in the same task that extracts the outputs (else
        None).

        A worker lost during the call (its connection closes, the scheduler declares it
        killed, or data it held disappear) makes the call start
        again on the remaining workers: the local steps are pure functions of their inputs, so
        the outputs are the same."""
        return _retry_lost(lambda: self._run_once(model, glob, items, n_threads, memo_uids, want_total))

    def _run_once(self, model, glob, items, n_threads, memo_uids, want_total) -> list[BatchResult]:
        client = self.client
        # the model and the globals are tasks holding their value (not scattered data): the
        # scheduler keeps the recipe, so memos computed from them can be recomputed after any
        # worker loss (Dask's memory manager drops extra replicas of scattered data, which
        # then have no recipe), and workers fetch them from each other
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sending large graph")
            model_f, glob_f = (client.submit(_identity, v, pure=False) for v in (model, glob))
        remote = self.keep_memos and memo_uids is not None
        uids = None if memo_uids is None else np.asarray(memo_uids, dtype=np.int64)
        order = [int(b) for b, _ in items]
        # a whole lap of at most SUBTREE_LEAVES batches: one task sums the memos by the fixed
        # tree and extracts every step's driver part (one round trip for the lap)
        whole = remote and want_total and sorted(order) == list(range(len(self.source))) and len(order) <= SUBTREE_LEAVES
        steps, memos = [], []
        for b, opts in items:
            thr = self.collect_threshold if "collect_cols" in opts else None
            step = client.submit(
                _local_step, model_f, self.source.futures[int(b)], glob_f, opts, n_threads, int(b), thr,
                uids if remote else None, pure=False,
            )
            if remote:  # the memo stays in the step's result on the worker
                memos.append(RemoteMemo(client, step, (model_f, glob_f), in_step=True))
            steps.append(step)
        total = None
        if whole:
            total, outs = _gather(client, client.submit(_lap_reduce, order, *steps, pure=False))
        elif remote:
            outs = _gather(client, [client.submit(_driver_part, st, pure=False) for st in steps])
        else:
            outs = _gather(client, steps)
        results = LapResults(BatchResult(b, out, rows, n) for (b, _), (out, rows, n) in zip(items, outs))
        for i, res in enumerate(results):
            res.memo = memos[i] if remote else (None if uids is None else model.stats_from_output(res.out, uids))
        results.total = total
        return results

    def close(self) -> None:
        self.source.futures = []
