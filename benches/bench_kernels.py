"""Kernel throughput of the dense Gaussian local step against numpy's matrix multiply.

Measures, in one run and with the same thread count:

(a) the expected Gaussian log-likelihood kernel ``E_q[log N(x_n | 0, Λ_k)]`` for all rows and
    clusters (``ObsModel.e_log_lik``), nominal flops ``2·N·K·D²``;
(b) the fused dense local step + summaries (``_core.local_step``), nominal flops ``4·N·K·D²``;
(c) thread scaling 1 → 2 threads of (b).

The ceiling is numpy's matrix-multiply GFLOP/s on a ``(N×D)·(D×K·D)``-sized product (done in
row blocks so the output fits in memory), plus a square 2048³ product for information. Each
figure is the best of ``--repeat`` runs. Results are printed as a table and written as JSON to
``bench_results/bench_kernels.json``.

OpenBLAS note: on this machine ``OPENBLAS_CORETYPE`` may be set (older OpenBLAS builds
misbehave without it) and it slows numpy down. Run the script twice, as is and with the variable
unset for that command only (``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...``); the
table reports which kernel numpy used (threadpoolctl).

Usage::

    python benches/bench_kernels.py [--n 100000] [--d 64] [--k 100] [--obs zero_mean_gauss]
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


def blas_info():
    try:
        from threadpoolctl import threadpool_info

        return [
            {k: v for k, v in d.items() if k in ("internal_api", "version", "architecture", "num_threads", "user_api")}
            for d in threadpool_info()
            if d.get("user_api") == "blas"
        ]
    except ImportError:  # pragma: no cover
        return []


def numpy_gflops(n, d, kd, repeat, block=1024):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((block, d))
    B = rng.standard_normal((d, kd))
    out = np.empty((block, kd))
    n_blocks = max(1, n // block)

    def run():
        for _ in range(n_blocks):
            np.dot(A, B, out=out)

    t = best_time(run, repeat)
    rect = 2.0 * n_blocks * block * d * kd / t / 1e9
    S = rng.standard_normal((2048, 2048))
    t2 = best_time(lambda: S @ S, repeat)
    square = 2.0 * 2048**3 / t2 / 1e9
    return rect, square


def make_problem(obs_kind, n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if obs_kind == "zero_mean_gauss":
        prior = {"nu": d + 2.0, "B": np.eye(d) * (d + 2.0)}
        sd = d * d
        off = 0
    else:
        prior = {"nu": d + 2.0, "kappa": 1e-4, "m": np.zeros(d), "B": np.eye(d) * (d + 2.0)}
        sd = d + d * d
        off = d
    obs = _core.ObsModel(obs_kind, prior)
    N = rng.uniform(50, 500, size=k)
    S = np.zeros((k, sd))
    for j in range(k):
        M = rng.standard_normal((d, d)) * 0.3
        C = (np.eye(d) + M @ M.T) * N[j]
        S[j, off:] = C.ravel()
        if off:
            S[j, :d] = rng.standard_normal(d) * 0.1 * N[j]
    e_log_pi = np.log(np.full(k, 1.0 / k))
    return obs, X, N, S, e_log_pi


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--obs", default="zero_mean_gauss", choices=("zero_mean_gauss", "gauss"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="bnpcore threads (default: all cores)")
    ap.add_argument("--out", default="bench_results/bench_kernels.json")
    args = ap.parse_args()
    n, d, k = args.n, args.d, args.k
    threads = args.threads or _core.default_num_threads()

    np_rect, np_square = numpy_gflops(n, d, k * d, args.repeat)
    obs, X, N, S, elp = make_problem(args.obs, n, d, k)

    alloc = _core.Alloc.fixed(elp)  # the fixture's uniform log weights, as given
    t_ll = best_time(lambda: obs.e_log_lik(X, N, S, n_threads=threads), args.repeat)
    f_ll = 2.0 * n * k * d * d
    t_ls = best_time(lambda: _core.local_step(obs, alloc, X, N, S, n_threads=threads), args.repeat)
    f_ls = 4.0 * n * k * d * d
    t_ls1 = best_time(lambda: _core.local_step(obs, alloc, X, N, S, n_threads=1), args.repeat)
    t_ls2 = best_time(lambda: _core.local_step(obs, alloc, X, N, S, n_threads=2), args.repeat)

    g_ll = f_ll / t_ll / 1e9
    g_ls = f_ls / t_ls / 1e9
    res = {
        "n": n,
        "d": d,
        "k": k,
        "obs": args.obs,
        "threads": threads,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "blas": blas_info(),
        "numpy_matmul_gflops": np_rect,
        "numpy_square2048_gflops": np_square,
        "loglik_seconds": t_ll,
        "loglik_nominal_gflops": g_ll,
        "loglik_fraction_of_numpy": g_ll / np_rect,
        "local_step_seconds": t_ls,
        "local_step_nominal_gflops": g_ls,
        "local_step_fraction_of_numpy": g_ls / np_rect,
        "local_step_1thread_seconds": t_ls1,
        "local_step_2thread_seconds": t_ls2,
        "thread_scaling_1_to_2": t_ls1 / t_ls2,
        "machine": platform.processor() or platform.machine(),
        "loadavg": os.getloadavg(),
    }
    print(f"bnpcore kernels: N={n} D={d} K={k} obs={args.obs} threads={threads}")
    print(f"numpy BLAS: {res['blas']}  OPENBLAS_CORETYPE={res['openblas_coretype']}")
    rows = [
        ("numpy matmul (N×D)·(D×KD)", "", f"{np_rect:8.1f}", "100 %"),
        ("numpy square 2048³", "", f"{np_square:8.1f}", f"{100 * np_square / np_rect:.0f} %"),
        ("(a) E log-lik kernel", f"{t_ll:.3f}", f"{g_ll:8.1f}", f"{100 * g_ll / np_rect:.0f} %"),
        ("(b) local step + summary", f"{t_ls:.3f}", f"{g_ls:8.1f}", f"{100 * g_ls / np_rect:.0f} %"),
    ]
    print(f"{'kernel':32s} {'seconds':>8s} {'GFLOP/s':>8s} {'vs numpy':>9s}")
    for r in rows:
        print(f"{r[0]:32s} {r[1]:>8s} {r[2]:>8s} {r[3]:>9s}")
    print(f"load average: {os.getloadavg()[0]:.1f} (other processes on the machine distort every figure)")
    print(f"(c) thread scaling 1→2: {t_ls1:.3f} s → {t_ls2:.3f} s = {t_ls1 / t_ls2:.2f}×")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
