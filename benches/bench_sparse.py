"""L-sparse responsibilities on 8×8 zero-mean image patches: seconds per lap and held-out score.

Data: every 8×8 patch (stride 1) of the bundled ``china.jpg`` (265,860 rows, D = 64, patch means
removed) for training; the patches of ``flower.jpg`` are held out (``--heldout-rows`` of them,
spread evenly). Model: ``DPMixture(obs="zero_mean_gauss", algorithm="full", moves=())`` (or
``--algorithm memoized --n-batches 20``, the spec's E8–E10 setting) with K
clusters, initialised once per K by k-means++ on a subsample; every L then runs ``--laps`` laps
from that same initialisation (``warm_start``). Reported per (K, L): median seconds per lap
(laps 2..), the final ELBO per row and the held-out log-likelihood per patch (``score``: plug-in
mixture density, nats/patch); and, because wall-clock laps on a shared machine are noisy, the CPU
seconds of one local step on ``--step-rows`` training rows with one thread, with the globals of
the dense run (and, when the L-sparse step takes its candidates from the float32 GEMM, the
number of log weights per row it recomputes in float64). ``L = K`` is the dense step.

``--heldout-every N`` also scores the held-out patches every N laps (outside the timed laps) for
a held-out-against-time plot (``benches/plot_sparse.py``); ``--tol`` stops a run at convergence.
Several ``--seed`` values repeat everything from as many initialisations and summarise the paired
held-out difference L-sparse − dense over them. ``--dense-laps`` sets the estimator's
``dense_laps`` (default 1: the first lap of an L-sparse run is dense); with ``--dense-laps 0`` the
truncation of the first lap, while many rows' responsibilities are still diffuse, starts the fit
on a different path than dense, and which run ends higher then varies from seed to seed by more
than sparsity costs.

Optionally (``--sklearn``) scikit-learn's ``BayesianGaussianMixture`` (full covariances, DP
prior, same K, ``max_iter=--laps``, k-means++ init) is fitted on the same rows for comparison.

Usage::

    python benches/bench_sparse.py [--rows 265860] [--k 200 800] [--l 1 2 4 8] [--laps 3]

Writes ``bench_results/bench_sparse.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
import warnings
from pathlib import Path

import bnpcore
import numpy as np
from bnpcore import DPMixture
from bnpcore.datasets import load_image_patches


def load(rows, heldout_rows):
    X, img = load_image_patches(stride=1, return_image_index=True)
    train = np.ascontiguousarray(X[img == 0])
    test = X[img == 1]
    if rows < train.shape[0]:
        train = np.ascontiguousarray(train[np.linspace(0, train.shape[0] - 1, rows).astype(np.int64)])
    if heldout_rows < test.shape[0]:
        test = test[np.linspace(0, test.shape[0] - 1, heldout_rows).astype(np.int64)]
    return train, np.ascontiguousarray(test)


def run_bnpcore(X, T, K, Ls, laps, threads, seed, step_rows, algorithm="full", n_batches=1, tol=1e-6,
                heldout_every=0, dense_laps=1):
    base = DPMixture(
        obs="zero_mean_gauss",
        n_components=K,
        algorithm=algorithm,
        n_batches=n_batches,
        moves=(),
        max_laps=1,
        init="kmeans++",
        init_subsample=20_000,
        random_state=seed,
        n_threads=threads,
        warm_start=True,
        tol=tol,
    )
    # initialise only (no lap): build the initial state the estimator would start from
    source = base._make_source(X)
    base._validate_params()
    t0 = time.perf_counter()
    base._initialize(source)
    t_init = time.perf_counter() - t0
    out = []
    for L in Ls:
        m = copy.deepcopy(base)
        m.top_l = None if L >= K else L
        m.max_laps = laps
        trace = []
        if heldout_every:
            # held-out score every few laps (outside the timed lap: the history's seconds count
            # only the laps themselves)
            def cb(est, info, trace=trace, K=K, L=L):
                if info["lap"] % heldout_every == 0:
                    trace.append((int(info["lap"]), float(est.history_["seconds"][-1]), float(est.score(T))))
                    print(f"    K={K} L={'K' if L >= K else L} lap {trace[-1][0]:3d} {trace[-1][1]:8.1f} s  "
                          f"held-out {trace[-1][2]:.4f}", flush=True)

            m.callback = cb
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.dense_laps = dense_laps
            m._run(m._make_model(m.obs_model_), source, laps)
        secs = np.diff(np.concatenate([[0.0], m.history_["seconds"]]))
        per_lap = float(np.median(secs[1:])) if len(secs) > 1 else float(secs[0])
        res = {
            "K": K,
            "L": int(L),
            "seed": seed,
            "dense_laps": int(dense_laps) if L < K else 0,
            "dense": bool(L >= K),
            "seconds_per_lap": per_lap,
            "lap_seconds": secs.tolist(),
            "elbo_per_row": float(m.elbo_ / X.shape[0]),
            "heldout_score": float(m.score(T)),
            "n_components": int(m.n_components_),
            "laps_run": int(m.n_iter_),
            "converged": bool(m.converged_),
            "heldout_trace": trace,
        }
        out.append(res)
        print(
            f"K={K:4d} L={'K' if L >= K else L!s:>3s}  {per_lap:8.2f} s/lap  ELBO/row {res['elbo_per_row']:9.4f}  "
            f"held-out {res['heldout_score']:9.4f} nats/patch  ({res['laps_run']} laps, "
            f"{'converged' if res['converged'] else 'not converged'})",
            flush=True,
        )
    # the same local step, timed in CPU seconds on one thread (robust to other processes on a
    # shared machine): globals of the dense run, the first `step_rows` training rows
    if step_rows:
        Xs = np.ascontiguousarray(X[:step_rows])
        model = m._make_model(m.obs_model_)
        G = m.summaries_
        for r in out:
            L = None if r["dense"] else r["L"]
            best = float("inf")
            for _ in range(2):
                t0 = time.process_time()
                step = model.local_step(Xs, G, n_threads=1, top_l=L)
                best = min(best, time.process_time() - t0)
            r["step_cpu_seconds_1thread"] = best
            # float32 candidate path (zero-mean Gaussian, large K): f64 log weights per row
            if "n_candidates" in step:
                r["candidates_per_row"] = step["n_candidates"] / Xs.shape[0]
        d = next(r for r in out if r["dense"])["step_cpu_seconds_1thread"]
        for r in out:
            r["step_speedup_vs_dense"] = d / r["step_cpu_seconds_1thread"]
    dense = [r for r in out if r["dense"]]
    if dense:
        for r in out:
            r["speedup_vs_dense"] = dense[0]["seconds_per_lap"] / r["seconds_per_lap"]
            r["heldout_minus_dense"] = r["heldout_score"] - dense[0]["heldout_score"]
    return out, t_init


def run_sklearn(X, T, K, laps, seed):
    from sklearn.mixture import BayesianGaussianMixture

    m = BayesianGaussianMixture(
        n_components=K,
        covariance_type="full",
        weight_concentration_prior_type="dirichlet_process",
        max_iter=laps,
        init_params="k-means++",
        random_state=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        m.fit(X)
        t = time.perf_counter() - t0
    return {"K": K, "seconds_total": t, "iterations": int(m.n_iter_), "heldout_score": float(m.score(T))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=265_860, help="training rows (evenly subsampled)")
    ap.add_argument("--heldout-rows", type=int, default=50_000)
    ap.add_argument("--k", type=int, nargs="+", default=[200, 800])
    ap.add_argument("--l", type=int, nargs="+", default=[1, 2, 4, 8], help="sparsity levels (dense is always added)")
    ap.add_argument("--laps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, nargs="+", default=[0],
                    help="initialisation seeds; with several, the held-out difference to dense is also "
                    "summarised over seeds (mean and standard error)")
    ap.add_argument("--algorithm", choices=["full", "memoized"], default="full")
    ap.add_argument("--n-batches", type=int, default=20, help="batches of the memoized algorithm")
    ap.add_argument("--tol", type=float, default=1e-6, help="stop a run early when the relative ELBO change of a lap is below this")
    ap.add_argument("--skip-dense", action="store_true", help="do not add the dense run (L = K)")
    ap.add_argument("--dense-laps", type=int, default=1,
                    help="the estimator's dense_laps: first laps of each L-sparse run that are dense (0: none)")
    ap.add_argument("--heldout-every", type=int, default=0, help="also score the held-out rows every N laps (0: only at the end)")
    ap.add_argument(
        "--step-rows", type=int, default=20_000, help="rows for the 1-thread CPU-time local-step timing (0: skip)"
    )
    ap.add_argument("--sklearn", action="store_true", help="also fit sklearn BayesianGaussianMixture")
    ap.add_argument("--out", default="bench_results/bench_sparse.json")
    args = ap.parse_args()
    X, T = load(args.rows, args.heldout_rows)
    threads = args.threads or bnpcore._core.default_num_threads()
    print(f"train {X.shape}, held out {T.shape}, threads={threads}, laps={args.laps}", flush=True)
    results = {
        "rows": X.shape[0],
        "heldout_rows": T.shape[0],
        "threads": threads,
        "laps": args.laps,
        "algorithm": args.algorithm,
        "loadavg_start": os.getloadavg(),
        "runs": [],
    }
    for K in args.k:
        Ls = sorted(set(args.l)) + ([] if args.skip_dense else [K])
        for seed in args.seed:
            runs, t_init = run_bnpcore(X, T, K, Ls, args.laps, threads, seed, args.step_rows,
                                       args.algorithm, args.n_batches if args.algorithm == "memoized" else 1,
                                       args.tol, args.heldout_every, args.dense_laps)
            results["runs"] += runs
            results.setdefault("init_seconds", {})[f"{K}/{seed}"] = t_init
        if args.sklearn:
            sk = run_sklearn(X, T, K, args.laps, args.seed[0])
            results.setdefault("sklearn", []).append(sk)
            print(
                f"K={K:4d} sklearn BayesianGaussianMixture: {sk['seconds_total'] / sk['iterations']:8.2f} s/iteration "
                f"(incl. init), held-out {sk['heldout_score']:9.4f} nats/patch",
                flush=True,
            )
    print()
    print(
        f"{'K':>5s} {'seed':>4s} {'L':>5s} {'s/lap':>8s} {'speed-up':>9s} {'held-out':>10s} {'Δ dense':>9s} "
        f"{'step CPU s':>10s} {'speed-up':>9s} {'cand/row':>8s}"
    )
    for r in results["runs"]:
        print(
            f"{r['K']:5d} {r['seed']:4d} {('K' if r['dense'] else str(r['L'])):>5s} {r['seconds_per_lap']:8.2f} "
            f"{r.get('speedup_vs_dense', float('nan')):8.2f}× {r['heldout_score']:10.4f} "
            f"{r.get('heldout_minus_dense', float('nan')):+9.4f} {r.get('step_cpu_seconds_1thread', float('nan')):10.3f} "
            f"{r.get('step_speedup_vs_dense', float('nan')):8.2f}× {r.get('candidates_per_row', float('nan')):8.2f}"
        )
    if len(args.seed) > 1:
        # the optimisation path depends on the initialisation (and, through the first laps, on
        # the truncation itself), so one pair of runs can differ by more than the sparsity costs:
        # summarise the paired differences over seeds
        print()
        results["heldout_minus_dense_over_seeds"] = []
        for K in args.k:
            for L in sorted({r["L"] for r in results["runs"] if r["K"] == K and not r["dense"]}):
                d = np.array([r["heldout_minus_dense"] for r in results["runs"]
                              if r["K"] == K and r["L"] == L and "heldout_minus_dense" in r])
                if d.size < 2:
                    continue  # --skip-dense: nothing to pair with
                se = float(d.std(ddof=1) / np.sqrt(len(d)))
                results["heldout_minus_dense_over_seeds"].append(
                    {"K": K, "L": L, "n_seeds": len(d), "mean": float(d.mean()), "standard_error": se, "values": d.tolist()}
                )
                print(f"K={K:4d} L={L:3d}: held-out − dense over {len(d)} seeds: mean {d.mean():+.4f} ± {se:.4f} "
                      f"(s.e.), min {d.min():+.4f}, max {d.max():+.4f} nats/patch")
    results["loadavg_end"] = os.getloadavg()
    print(f"load average at start/end: {results['loadavg_start'][0]:.1f} / {results['loadavg_end'][0]:.1f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
