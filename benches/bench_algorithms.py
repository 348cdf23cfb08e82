"""Full vs memoized vs stochastic variational inference: held-out log-likelihood against time.

Data: ``bnpcore.datasets.make_gaussian_mixture`` (default 100,000 × 16, 25 clusters, seed 0)
for training and 20,000 held-out rows of the same mixture (seed 1 with the same parameters).
Every algorithm starts from the same initialisation (same ``random_state``), fixed K (no
moves), ``tol=0``. After every lap a callback records the plug-in held-out log-likelihood per
row (``score``); the x-axis is the cumulative fitting time of ``history_["seconds"]`` (which
excludes the callback and, for the stochastic algorithm, its ELBO evaluation pass).

Usage::

    python benches/bench_algorithms.py
    python benches/bench_algorithms.py --rows 30000 --laps 10
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent.parent / "bench_results"


def heldout(params, n, seed):
    w, mu, cov = params["weights"], params["means"], params["covariances"]
    rng = np.random.default_rng(seed)
    z = rng.choice(len(w), size=n, p=w)
    return mu[z] + np.einsum("nij,nj->ni", np.linalg.cholesky(cov)[z], rng.standard_normal((n, mu.shape[1])))


def main() -> None:
    import bnpcore
    from bnpcore import DPMixture
    from bnpcore.datasets import make_gaussian_mixture

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--components", type=int, default=25)
    ap.add_argument("--init-components", type=int, default=25)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--laps", type=int, default=20)
    args = ap.parse_args()

    X, _, params = make_gaussian_mixture(n_samples=args.rows, n_features=args.features,
                                         n_components=args.components, random_state=0, return_params=True)
    Xt = heldout(params, 20_000, seed=1)
    common = dict(n_components=args.init_components, random_state=0, max_laps=args.laps, tol=0)
    configs = {
        "full": dict(algorithm="full"),
        f"memoized B={args.batches}": dict(algorithm="memoized", n_batches=args.batches, moves=()),
        f"stochastic B={args.batches} k=0.6 d=1": dict(algorithm="stochastic", n_batches=args.batches),
        f"stochastic B={args.batches} k=0.9 d=10": dict(algorithm="stochastic", n_batches=args.batches,
                                                       learning_rate_decay=0.9, learning_rate_delay=10.0),
    }
    results = {}
    for name, kw in configs.items():
        trace = []
        est = DPMixture(callback=lambda m, info, trace=trace: trace.append(m.score(Xt)), **common, **kw)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
            est.fit(X)
        wall = time.perf_counter() - t0
        results[name] = {
            "seconds": est.history_["seconds"].tolist(),
            "heldout": trace,
            "elbo": est.history_["elbo"].tolist(),
            "n_components": est.history_["n_components"].tolist(),
            "wall_seconds": wall,
        }
    truth = float(np.mean(_true_loglik(params, Xt)))  # oracle: the true mixture density
    print(f"{args.rows} x {args.features}, {args.components} true clusters, K={args.init_components}, "
          f"{args.laps} laps; held-out log-lik of the true mixture: {truth:.4f} nats/row\n")
    checkpoints = sorted({1, 2, 5, 10, args.laps} & set(range(1, args.laps + 1)))
    hdr = ["algorithm"] + [f"lap {c}: s / heldout" for c in checkpoints] + ["s/lap"]
    rows = []
    for name, r in results.items():
        cells = [f"{r['seconds'][c - 1]:.2f} / {r['heldout'][c - 1]:.4f}" for c in checkpoints]
        rows.append([name] + cells + [f"{r['seconds'][-1] / len(r['seconds']):.3f}"])
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(hdr)]
    print("  ".join(h.rjust(w) for h, w in zip(hdr, widths)))
    for x in rows:
        print("  ".join(v.rjust(w) for v, w in zip(x, widths)))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "bench_algorithms.json"
    out.write_text(json.dumps({"benchmark": "bench_algorithms", "args": vars(args), "true_heldout": truth,
                               "results": results, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                               "cpu_count": os.cpu_count()}, indent=2))
    print(f"\nwrote {out}")


def _true_loglik(params, X):
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal

    comp = np.column_stack([np.log(w) + multivariate_normal(m, c).logpdf(X)
                            for w, m, c in zip(params["weights"], params["means"], params["covariances"])])
    return logsumexp(comp, axis=1)


if __name__ == "__main__":
    main()
