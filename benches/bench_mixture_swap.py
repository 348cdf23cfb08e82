"""The finite mixture's swap move: ``FiniteMixture`` with every default (the swap on) against
``moves=()`` from the same start, and scikit-learn's ``BayesianGaussianMixture`` with a finite
Dirichlet prior, in the same process.

Data: the 16-D 25-cluster benchmark (``make_gaussian_mixture``, ``--rows`` rows, seed 0) at the
true K = 25; fit seeds ``--seeds``. Per fit: seconds, laps (iterations), converged, swaps accepted
/ evaluated, objective (bnpcore) and the ARI of the predicted labels against the true ones.

Usage::

    python benches/bench_mixture_swap.py
    python benches/bench_mixture_swap.py --rows 90000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import save, table


def main() -> None:
    import bnpcore
    from bnpcore.datasets import make_gaussian_mixture

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from sklearn.metrics import adjusted_rand_score
    from sklearn.mixture import BayesianGaussianMixture

    X, y = make_gaussian_mixture(n_samples=args.rows, random_state=0)
    K = len(set(y.tolist()))
    rows, out = [], []
    for seed in args.seeds:
        fits = [
            ("bnpcore FiniteMixture (default: swap)", bnpcore.FiniteMixture(n_components=K, random_state=seed)),
            ("bnpcore FiniteMixture, moves=()", bnpcore.FiniteMixture(n_components=K, moves=(), random_state=seed)),
            ("sklearn BayesianGaussianMixture (Dirichlet)", BayesianGaussianMixture(
                n_components=K, weight_concentration_prior_type="dirichlet_distribution", random_state=seed)),
        ]
        for label, m in fits:
            t = time.perf_counter()
            m.fit(X)
            sec = time.perf_counter() - t
            ari = adjusted_rand_score(y, m.predict(X))
            log = getattr(m, "moves_log_", [])
            rec = {"fit": label, "seed": seed, "seconds": sec, "laps": int(m.n_iter_), "converged": bool(m.converged_),
                   "swaps_accepted": int(sum(r["accepted"] for r in log)), "swaps_evaluated": len(log),
                   "elbo": float(getattr(m, "elbo_", float("nan"))), "ari": float(ari)}
            out.append(rec)
            rows.append([label, seed, f"{sec:.2f}", rec["laps"], rec["converged"], f"{rec['swaps_accepted']}/{rec['swaps_evaluated']}",
                         f"{rec['elbo']:.1f}", f"{ari:.3f}"])
            print(rows[-1], flush=True)
    print()
    print(table(rows, ["fit", "seed", "s", "laps", "converged", "swaps", "objective", "ARI"]))
    save("bench_mixture_swap", {"rows": args.rows, "results": out})


if __name__ == "__main__":
    main()
