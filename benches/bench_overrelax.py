"""Over-relaxed laps of the topic models (``overrelax``, default 2) against plain coordinate
ascent (``overrelax=1``): laps to convergence, seconds and the final objective, seed by seed.

Every other option is the default (moves included) unless the row says ``moves=()``. Rows:
the toy bars (2,000 documents) with ``HDPTopicModel`` and ``FiniteTopicModel(10)``, 600 bars
documents with ``FiniteTopicModel(10, moves=())`` (the case that fixed where over-relaxation
starts, ``bnpcore.algorithms.overrelax.START_RTOL``), and gensim's Lee corpus (when gensim is
installed) with ``HDPTopicModel`` and ``FiniteTopicModel(20)``.

Usage: ``python benches/bench_overrelax.py [--seeds 3] [--rows bars-hdp bars-lda ...] [--overrelax 2]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

ROWS = ("bars-hdp", "bars-lda", "bars600-lda-nomoves", "lee-hdp", "lee-lda")


def corpus(name):
    from bnpcore.datasets import load_lee_corpus, make_bars

    if name == "bars":
        return make_bars(n_docs=2000, random_state=0)[0]
    if name == "bars600":
        return make_bars(n_docs=600, random_state=0)[0]
    return load_lee_corpus()[0]


def estimator(row, seed, overrelax):
    from bnpcore import FiniteTopicModel, HDPTopicModel

    data, kind = row.split("-")[:2]
    kw = dict(random_state=seed, overrelax=overrelax)
    if row.endswith("nomoves"):
        kw["moves"] = ()
    if kind == "hdp":
        return HDPTopicModel(**kw)
    return FiniteTopicModel(20 if data == "lee" else 10, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=ROWS)
    ap.add_argument("--overrelax", type=float, default=2.0, help="the factor compared with plain laps (default: the estimators' default)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print("| corpus, estimator | seeds | laps, plain → over-relaxed | seconds, plain → over-relaxed | objective gain per seed (nats) |")
    print("|---|---|---|---|---|")
    for row in args.rows:
        try:
            X = corpus(row.split("-")[0])
        except ImportError as e:
            print(f"| {row} | skipped: {e} | | | |")
            continue
        o2 = float(args.overrelax)
        laps, secs, gains = {1.0: [], o2: []}, {1.0: 0.0, o2: 0.0}, []
        for seed in range(args.seeds):
            elbo = {}
            for o in (1.0, o2):
                est = estimator(row, seed, o)
                t = time.perf_counter()
                est.fit(X)
                secs[o] += time.perf_counter() - t
                laps[o].append(int(est.n_iter_))
                elbo[o] = float(est.elbo_)
            gains.append(elbo[o2] - elbo[1.0])
        lp = ", ".join(f"{a} → {b}" for a, b in zip(laps[1.0], laps[o2]))
        print(f"| {row} | {args.seeds} | {lp} (mean {np.mean(laps[1.0]):.1f} → {np.mean(laps[o2]):.1f}) | "
              f"{secs[1.0]:.1f} → {secs[o2]:.1f} | {', '.join(f'{g:+.0f}' for g in gains)} |", flush=True)


if __name__ == "__main__":
    main()
