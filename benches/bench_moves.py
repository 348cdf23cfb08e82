"""Birth/merge/delete moves from one cluster against scikit-learn and against a fixed K.

1. The 100,000 × 16, 25-cluster mixture (``make_gaussian_mixture`` defaults, 10 % held out):
   bnpcore memoized with all moves from ``n_components=1`` (run to its own convergence; also
   ``DPMixture()`` with every argument but ``random_state`` at its default) vs
   scikit-learn ``BayesianGaussianMixture`` (Dirichlet-process prior, 50 components, full
   covariance) in the same run, fitted twice: (a) as a user would, with its defaults
   (``tol=1e-3``, ``max_iter=100``; whether it converged is reported) — time to a fit; and
   (b) with exactly as many iterations as bnpcore ran laps (``tol=0``) — time per pass over the
   data, moves included on bnpcore's side. Reported: seconds, held-out log-likelihood (plug-in
   mixture density of each system's ``weights_``/``means_``/``covariances_`` through one
   function, ``_common.plugin_loglik``), clusters found (expected count ≥ 1) and adjusted Rand
   index on the training rows. ``--no-sklearn-defaults`` skips (a); ``--sklearn-to-convergence``
   adds a fit with ``max_iter=1000`` (the default tolerance is then met).
2. Digits (``load_digits``, PCA to ``--pca`` dimensions, 10 % held out): bnpcore memoized from
   K = 1 with moves vs K = 100 without moves (same laps cap).

``--repeat R`` fits every timed configuration of the 25-cluster data R times (the same fit each
time) and reports the median seconds, every fit's seconds in the output file; one fit varies by
±15 % on a 2-core machine, which decides whether a ratio near a target lands above or below it.

Usage: ``python benches/bench_moves.py [--n-samples 100000] [--pca 30] [--quick] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import gaussian_heldout_split, plugin_loglik, save, table

REPEAT = 1  # fits per timed configuration (``--repeat``); the median time is reported


def _timed(fit):
    """``fit()`` ``REPEAT`` times: the last model, the median seconds and every run's seconds
    (the same fit each time; on a 2-core machine one run varies by ±15 %)."""
    times = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = fit()
        times.append(time.perf_counter() - t)
    return m, float(np.median(times)), times


def _bnp(X, **kw):
    from bnpcore import DPMixture

    return _timed(lambda: DPMixture(**kw).fit(X))


def _sklearn_row(label, Xtr, ytr, Xte, **kw):
    from sklearn.metrics import adjusted_rand_score
    from sklearn.mixture import BayesianGaussianMixture

    sk, t, times = _timed(lambda: BayesianGaussianMixture(
        n_components=50, covariance_type="full", weight_concentration_prior_type="dirichlet_process", random_state=0, **kw
    ).fit(Xtr))
    return {
        "system": label,
        "seconds": t,
        "times": times,
        "laps": int(sk.n_iter_),
        "converged": bool(sk.converged_),
        "heldout": float(plugin_loglik(sk.weights_, sk.means_, sk.covariances_, Xte).mean()),
        "clusters": int(np.sum(sk.weights_ * Xtr.shape[0] >= 1.0)),
        "ari": float(adjusted_rand_score(ytr, sk.predict(Xtr))),
    }


def gaussian(n_samples, max_laps, n_batches, sklearn_defaults=True, sklearn_converge=False):
    from sklearn.metrics import adjusted_rand_score

    X, y, test = gaussian_heldout_split(n_samples)
    Xtr, ytr, Xte = X[~test], y[~test], X[test]
    m, t_bnp, times_bnp = _bnp(Xtr, n_components=1, algorithm="memoized", n_batches=n_batches, max_laps=max_laps, random_state=0)
    rows = [{
        "system": "bnpcore memoized+moves K=1",
        "seconds": t_bnp,
        "times": times_bnp,
        "laps": int(m.n_iter_),
        "converged": bool(m.converged_),
        "heldout": float(plugin_loglik(m.weights_, m.means_, m.covariances_, Xte).mean()),
        "clusters": int(m.n_components_),
        "ari": float(adjusted_rand_score(ytr, m.predict(Xtr))),
        "accepted_moves": {k: sum(1 for r in m.moves_log_ if r["kind"] == k and r["accepted"]) for k in ("birth", "merge", "delete")},
    }]
    md, t_def, times_def = _bnp(Xtr, random_state=0)  # every other argument at its default (issue 13 item 0)
    rows.append({
        "system": "bnpcore DPMixture() defaults",
        "seconds": t_def,
        "times": times_def,
        "laps": int(md.n_iter_),
        "converged": bool(md.converged_),
        "heldout": float(plugin_loglik(md.weights_, md.means_, md.covariances_, Xte).mean()),
        "clusters": int(md.n_components_),
        "ari": float(adjusted_rand_score(ytr, md.predict(Xtr))),
        "accepted_moves": {k: sum(1 for r in md.moves_log_ if r["kind"] == k and r["accepted"]) for k in ("birth", "merge", "delete")},
    })
    rows.append(_sklearn_row("sklearn BGM DP K=50, same iterations", Xtr, ytr, Xte, max_iter=int(m.n_iter_), tol=0.0))
    if sklearn_defaults:
        rows.append(_sklearn_row("sklearn BGM DP K=50, defaults", Xtr, ytr, Xte))
    if sklearn_converge:
        rows.append(_sklearn_row("sklearn BGM DP K=50, max_iter=1000", Xtr, ytr, Xte, max_iter=1000))
    out = {"n_samples": n_samples, "n_features": X.shape[1], "true_clusters": int(y.max() + 1), "rows": rows,
           "speedup_same_iterations": rows[2]["seconds"] / t_bnp}
    for r in rows[3:]:
        key = "speedup_defaults" if r["system"].endswith("defaults") else "speedup_converged"
        out[key] = r["seconds"] / t_bnp
    return out


def digits(n_pca, max_laps, n_batches):
    from bnpcore.datasets import load_digits
    from sklearn.decomposition import PCA

    X, _ = load_digits()
    rng = np.random.default_rng(0)
    test = np.zeros(X.shape[0], dtype=bool)
    test[rng.choice(X.shape[0], X.shape[0] // 10, replace=False)] = True
    pca = PCA(n_components=n_pca, random_state=0).fit(X[~test])
    Xtr, Xte = pca.transform(X[~test]), pca.transform(X[test])
    rows = []
    for label, kw in (
        ("K=1 + moves", {"n_components": 1, "moves": ("birth", "merge", "delete")}),
        ("K=100, no moves", {"n_components": 100, "moves": ()}),
    ):
        m, t, _ = _bnp(Xtr, algorithm="memoized", n_batches=n_batches, max_laps=max_laps, random_state=0, **kw)
        rows.append({
            "system": label, "seconds": t, "laps": int(m.n_iter_), "elbo": float(m.elbo_),
            "heldout": float(plugin_loglik(m.weights_, m.means_, m.covariances_, Xte).mean()),
            "clusters": int(m.n_components_),
        })
    return {"n_pca": n_pca, "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-samples", type=int, default=100_000)
    ap.add_argument("--max-laps", type=int, default=100)
    ap.add_argument("--n-batches", type=int, default=10)
    ap.add_argument("--pca", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="20,000 rows, 5 batches")
    ap.add_argument("--repeat", type=int, default=1, help="fits per timed configuration of the 25-cluster data; medians reported")
    ap.add_argument("--no-sklearn-defaults", action="store_true", help="skip the scikit-learn fit with its default settings")
    ap.add_argument("--sklearn-to-convergence", action="store_true",
                    help="also fit scikit-learn with max_iter=1000 (its default tol): minutes")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_samples, args.n_batches = 20_000, 5
    global REPEAT
    REPEAT = max(1, args.repeat)
    g = gaussian(args.n_samples, args.max_laps, args.n_batches, not args.no_sklearn_defaults, args.sklearn_to_convergence)
    print(f"\n{g['n_samples']} x {g['n_features']}, {g['true_clusters']} true clusters (10 % held out)")
    print(table([[r["system"], f"{r['seconds']:.1f}", r["laps"], {True: "yes", False: "no"}.get(r.get("converged", True)),
                  f"{r['heldout']:.4f}", r["clusters"], f"{r['ari']:.3f}"] for r in g["rows"]],
                ["system", "seconds", "laps/iterations", "converged", "heldout/row", "clusters", "ARI"]))
    if REPEAT > 1:
        print(f"seconds: medians of {REPEAT} fits each; every fit: " + "; ".join(f"{r['system']}: " + ", ".join(f"{t:.2f}" for t in r["times"]) for r in g["rows"]))
    print(f"speed-up, sklearn with as many iterations as bnpcore laps: {g['speedup_same_iterations']:.1f}x")
    if "speedup_defaults" in g:
        print(f"speed-up, sklearn with its defaults (tol=1e-3, max_iter=100): {g['speedup_defaults']:.1f}x")
    if "speedup_converged" in g:
        print(f"speed-up, sklearn with max_iter=1000: {g['speedup_converged']:.1f}x")
    d = digits(args.pca, args.max_laps, 5)
    print(f"\ndigits, PCA {args.pca} dims (10 % held out)")
    print(table([[r["system"], f"{r['seconds']:.1f}", r["laps"], f"{r['elbo']:.1f}", f"{r['heldout']:.4f}", r["clusters"]] for r in d["rows"]],
                ["system", "seconds", "laps", "ELBO", "heldout/row", "clusters"]))
    path = save("bench_moves", {"args": vars(args), "gaussian": g, "digits": d})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
