"""Memoized VI on Dask against the local backend, and the scale-out arithmetic (issue 17).

The data: ``--n-samples`` × 16 rows of the 25-cluster Gaussian mixture
(``bnpcore.datasets.make_gaussian_mixture``) written to ``--n-files`` ``.npy`` files (one batch
each) in a temporary directory. The same fit (``DPMixture(obs="gauss", n_components=25,
algorithm="memoized", schedule="parallel", moves=(), tol=0)``, ``--laps`` laps) runs

* with ``backend="local"`` on the list of paths (rayon threads in this process), and
* with ``backend="dask"`` on a ``LocalCluster`` of ``--workers`` worker processes (one thread
  each, ``n_threads=1`` per local step) that read the files themselves,

and the two fits are checked to be bit-identical. Reported: seconds per lap (after the first,
which includes reading the files), the Dask overhead, bytes through the driver per lap (pickled
size of the model and globals, sent once, the local-step outputs returned — the
memos stay on the workers — and G's root), the driver's peak
resident memory, and the predicted time per lap on 8, 32 and 128 workers for a 1-billion-row
mixture and a 10-million-document corpus from the measured per-batch compute time and bytes.

Usage: ``python benches/bench_dask.py [--n-samples 2000000] [--n-files 20] [--laps 4] [--quick]``
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save, table

_TMP: list = []


def _rss_peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=2_000_000)
    ap.add_argument("--n-files", type=int, default=20)
    ap.add_argument("--laps", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="200,000 rows, 3 laps")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_samples, args.laps = 200_000, 3

    import bnpcore
    import distributed
    from bnpcore.datasets import make_gaussian_mixture
    from bnpcore.distributed import DaskExecutor, RemoteMemo

    tmp = Path(tempfile.mkdtemp(prefix="bnpcore-dask-"))
    _TMP.append(tmp)
    X, _ = make_gaussian_mixture(n_samples=args.n_samples, random_state=0)[:2]
    paths = []
    for b, part in enumerate(np.array_split(X, args.n_files)):
        p = tmp / f"part{b:03d}.npy"
        np.save(p, part)
        paths.append(str(p))
    n, d = X.shape
    del X, part
    driver_mb_before = _rss_peak_mb()

    kw = dict(obs="gauss", n_components=25, algorithm="memoized", schedule="parallel", moves=(), tol=0,
              max_laps=args.laps, random_state=0)

    def fit(**extra):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            m = bnpcore.DPMixture(**kw, **extra).fit(paths)
            return m, time.perf_counter() - t

    # local: one process, the rayon pool runs one local step at a time with all cores
    local, t_local = fit(n_threads=None)
    local_lap = np.diff(local.history_["seconds"])[1:].mean() if args.laps > 2 else local.history_["seconds"][-1] / args.laps

    moved = {"out": 0, "in": 0, "root": 0, "laps": 0}
    orig_run = DaskExecutor._run_once
    orig_fetch = RemoteMemo.materialize_all

    def counting(self, model, glob, items, n_threads, memo_uids, want_total):
        res = orig_run(self, model, glob, items, n_threads, memo_uids, want_total)
        moved["out"] += len(pickle.dumps((model, glob), protocol=5))  # sent once, in two tasks
        moved["in"] += sum(len(pickle.dumps((r.out, r.X), protocol=5)) for r in res)
        if getattr(res, "total", None) is not None:  # G's root, returned with the lap's outputs
            moved["root"] += len(pickle.dumps(res.total, protocol=5))
        moved["laps"] += 1
        return res

    def fetching(memos):
        vals = orig_fetch(memos)
        if len(memos) == 1:  # G's root, once per lap (the final gather of every memo is not a lap's)
            moved["root"] += len(pickle.dumps(vals, protocol=5))
        return vals

    DaskExecutor._run_once = counting
    RemoteMemo.materialize_all = staticmethod(fetching)
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        remote, t_remote = fit(backend="dask", client=client, n_threads=1)
        # per-batch compute time on a worker, for the scale-out arithmetic
        batch_seconds = (remote.history_["seconds"][-1] - remote.history_["seconds"][-2]) * args.workers / args.n_files
    DaskExecutor._run_once = orig_run
    RemoteMemo.materialize_all = staticmethod(orig_fetch)
    remote_lap = np.diff(remote.history_["seconds"])[1:].mean() if args.laps > 2 else remote.history_["seconds"][-1] / args.laps
    identical = bool(np.array_equal(local.history_["elbo"], remote.history_["elbo"]))
    laps_run = max(moved["laps"], 1)
    per_lap_bytes = (moved["out"] + moved["in"] + moved["root"]) / laps_run
    K = remote.summaries_.K

    rows = [
        ["local (1 process, rayon)", f"{local_lap:.3f}", "", f"{t_local:.1f}"],
        [f"dask ({args.workers} workers)", f"{remote_lap:.3f}", f"{100 * (remote_lap / local_lap - 1):+.0f} %", f"{t_remote:.1f}"],
    ]
    print(f"{n:,} × {d} in {args.n_files} files, K = {K}, {args.laps} laps; results identical: {identical}")
    print(table(rows, ["backend", "s / lap (laps 2+)", "overhead", "total s"]))
    g_bytes = len(pickle.dumps(remote.summaries_, protocol=5))
    print(f"bytes through the driver per lap: {per_lap_bytes / 1e6:.3f} MB "
          f"(globals sent {moved['out'] / laps_run / 1e6:.3f} MB, local-step outputs without S "
          f"{moved['in'] / laps_run / 1e6:.3f} MB, G's root {moved['root'] / laps_run / 1e6:.3f} MB); "
          f"the memos stay on the workers: O(batches × K × D²) = {args.n_files} × {K} × {d * d} × 8 B = "
          f"{args.n_files * K * d * d * 8 / 1e6:.2f} MB is summed there, not sent to the driver")
    print(f"driver peak RSS: {_rss_peak_mb():.0f} MB (before the fits: {driver_mb_before:.0f} MB, data {n * d * 8 / 1e6:.0f} MB on disk)")

    # scale-out on paper: per-row compute from the measured per-batch time. Per lap the driver
    # sends the globals (|G| bytes) once, in a task, and receives one small output per batch and
    # G; the workers fetch the globals from each other (at best doubling the holders per round:
    # ⌈log2 w⌉ transfers on the critical path) and sum the B memos (|memo| ≈ |G| bytes each) by
    # the fixed tree: ⌈log2 B⌉ levels, each a worker-to-worker transfer and an addition.
    rows_per_batch = n / args.n_files
    sec_per_row = batch_seconds / rows_per_batch
    small = moved["in"] / laps_run / args.n_files  # one batch's driver part
    net = 1e9 / 8 * 10  # 10 Gbit/s links, bytes/s
    add_rate = 2e9  # bytes/s one worker sums (memory bandwidth bound)
    pred = []
    for label, total_rows, batch_rows in (("1e9-row mixture", 1e9, 5e6), ("1e7-document corpus (K=100, V=1e4)", 1e7, 5e4)):
        B = total_rows / batch_rows
        gb = g_bytes if "mixture" in label else 100 * 1e4 * 8  # the topic-word table
        for w in (8, 32, 128):
            compute = sec_per_row * total_rows / w
            driver = (2 * gb + B * small) / net
            tree = np.ceil(np.log2(w)) * gb / net + np.ceil(np.log2(B)) * (gb / net + gb / add_rate)
            pred.append([label, w, f"{compute:.1f}", f"{driver:.3f}", f"{tree:.3f}", f"{compute + driver + tree:.1f}"])
    print(table(pred, ["job", "workers", "compute s", "driver s", "among workers s", "s / lap"]))
    save("bench_dask", {
        "machine": machine(), "n": n, "d": d, "files": args.n_files, "laps": args.laps, "K": int(K),
        "local_lap_s": float(local_lap), "dask_lap_s": float(remote_lap), "identical": identical,
        "bytes_per_lap": float(per_lap_bytes), "driver_peak_mb": _rss_peak_mb(), "prediction": pred,
    })


if __name__ == "__main__":
    import shutil

    try:
        main()
    finally:
        if _TMP:  # the .npy files of this run
            shutil.rmtree(_TMP[0], ignore_errors=True)
