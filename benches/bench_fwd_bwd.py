"""Forward-backward throughput with statistics, in cell updates ``(t, j, k)`` per second.

One call of ``_core.forward_backward`` does three ``O(T K^2)`` passes (forward messages, backward
messages, pairwise counts + entropy table); the figure reported is ``T_total * K^2 / seconds``
(the design goal, spec 03 §8.4: >= 3e8 per core for K >= 32, and >= 1.8x from 1 to 2 threads).
The machine's limit is estimated by numpy's single-thread matrix multiply: a ``(K x K) @ (K x B)``
product does ``K^2 B`` multiply-adds, i.e. one "cell" each, with no transcendental functions and no
dependence between steps, so it is an upper bound for any of the three passes.

Each figure is the best of ``--repeat`` runs. Results are printed and written as JSON to
``bench_results/bench_fwd_bwd.json`` (with the machine, load average and thread counts).

Usage::

    python benches/bench_fwd_bwd.py [--steps 200000] [--seqs 16] [--k 32 64 128] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from bnpcore import _core


def best_time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_cells_per_second(k, repeat):
    """Single-thread multiply-adds per second of numpy's GEMM at the kernel's shape."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - bench extra not installed
        threadpool_limits = None
    rng = np.random.default_rng(0)
    a = rng.random((k, k))
    b = rng.random((k, 4096))
    if threadpool_limits is None:
        t = best_time(lambda: a @ b, repeat)
    else:
        with threadpool_limits(1):
            t = best_time(lambda: a @ b, repeat)
    return k * k * 4096 / t


def problem(steps, seqs, k, seed=0):
    rng = np.random.default_rng(seed)
    t_seq = steps // seqs
    seq_range = (np.arange(seqs + 1) * t_seq).astype(np.int64)
    log_lik = rng.normal(0.0, 2.0, size=(int(seq_range[-1]), k))
    trans = rng.dirichlet(np.full(k, 0.5), size=k) * 0.99
    trans = 0.9 * trans + 0.09 * np.eye(k)
    return log_lik, seq_range, np.log(np.full(k, 0.99 / k)), np.log(trans)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--seqs", type=int, default=16)
    ap.add_argument("--k", type=int, nargs="+", default=[32, 64, 128])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    rows = []
    print(f"{'K':>5} {'threads':>7} {'cells/s':>10} {'per core':>10} {'gemm 1-thr':>11} {'frac':>6} {'speed-up':>8}")
    for k in args.k:
        c, sr, p0, p = problem(args.steps, args.seqs, k)
        limit = gemm_cells_per_second(k, args.repeat)
        base = None
        for threads in (1, 2):
            _core.forward_backward(c, sr, p0, p, n_threads=threads)
            t = best_time(lambda c=c, sr=sr, p0=p0, p=p, n=threads: _core.forward_backward(c, sr, p0, p, n_threads=n), args.repeat)
            rate = c.shape[0] * k * k / t
            base = rate if base is None else base
            row = {"K": k, "threads": threads, "steps": int(c.shape[0]), "seqs": args.seqs, "seconds": t, "cells_per_s": rate}
            row.update(per_core=rate / threads, gemm_cells_per_s_1thread=limit, speedup=rate / base)
            rows.append(row)
            print(f"{k:>5} {threads:>7} {rate:>10.3g} {rate / threads:>10.3g} {limit:>11.3g} {rate / threads / limit:>6.2f} {rate / base:>8.2f}")
    meta = {"machine": platform.platform(), "cpu_count": os.cpu_count(), "loadavg": os.getloadavg(), "python": platform.python_version()}
    out = Path("bench_results")
    out.mkdir(exist_ok=True)
    (out / "bench_fwd_bwd.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"load average {meta['loadavg']} on {meta['cpu_count']} cores")


if __name__ == "__main__":
    main()
