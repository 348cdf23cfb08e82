"""The toy-bars experiment of issue 11 (Hughes thesis §5.6.1, spec 02 §9.4): does the HDP topic
model find exactly the ten bars, from many topics with merge + delete and from one topic with
birth + merge + delete, and how far is each found topic from its bar?

Data: ``make_bars`` (1,000 training documents of 200 tokens, 10 bars on a 30 × 30 grid, 5 %
off-bar noise; ``--docs`` changes the number) and 100 held-out documents (seed 1). Fits
(seeds ``--seeds``):

* ``K=50 merge+delete``: ``HDPTopicModel(50, moves=("merge", "delete"), n_batches=5)``, the
  issue's first fit (memoized over 5 batches as in the thesis);
* ``every default``: ``HDPTopicModel()`` (memoized over the corpus's default batches, grows from
  one topic with birth, merge and delete);
* ``K=50 default``: ``HDPTopicModel(50)``, every other argument at its default;
* ``K=50 merge+delete, no small-allocation delete``: the first fit with
  ``move_options={"delete_small": False}`` (how it ended before that move existed);
* ``K=50 no moves``: ``HDPTopicModel(50, moves=(), n_batches=5)``, which keeps fragments;
* ``LDA K=10``, ``LDA K=10 kmeans++`` and ``LDA K=10 no moves``: ``FiniteTopicModel(10)`` at
  the true number of topics with every default (its swap move), with ``init="kmeans++"``, and
  with ``moves=()`` (how often fixed-K variational LDA ends in a local optimum that merges or
  splits bars, and whether the swaps move it out);
* ``true topics``: the fixed point reached by iterating from the ten true bars (no moves), the
  noise floor of the distances.

Reported per fit: topics, laps, seconds, objective, held-out document-completion score (nats per
token) and the Hellinger distances of the topics matched one to one to the bars
(``linear_sum_assignment``; the worst of the ten is what "each within 0.1" is about) and how
many of the ten are farther than 0.1. With
``--plot`` the topics of the first seed's ``K=50 merge+delete`` fit are drawn as images
(``bench_results/bars_topics.png``).

Usage: ``python benches/bench_bars.py [--docs 1000] [--seeds 0 1 2] [--plot]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, save, table


def hellinger(P, Q):
    return np.sqrt(0.5 * ((np.sqrt(P)[:, None, :] - np.sqrt(Q)[None, :, :]) ** 2).sum(axis=2))


def matched(topics, truth):
    """Hellinger distance of each true bar to the found topic matched to it (one to one)."""
    from scipy.optimize import linear_sum_assignment

    H = hellinger(topics, truth)
    rows, cols = linear_sum_assignment(H)
    return H[rows, cols]


def from_true_topics(X, truth, seed):
    """Iterate full-dataset coordinate ascent (no moves) from the true bars to convergence:
    the first local step sees the bars as topics (topic-word counts of the corpus' tokens
    shared equally), the summaries of a one-lap K = 10 fit giving the other statistics.
    Returns the laps, objective and the fixed point's topics."""
    import bnpcore

    m = bnpcore.HDPTopicModel(truth.shape[0], moves=(), n_batches=1, max_laps=1, random_state=seed).fit(X)
    model, g = m._make_model(m.obs_model_), m.summaries_.copy()
    g.S = truth * (float(X.sum()) / truth.shape[0])
    g.N = g.S.sum(axis=1)
    prev, laps = -np.inf, 0
    while laps < 500:
        g = model.stats_from_output(model.local_step(X, g), g.uids)
        elbo, laps = model.elbo(g), laps + 1
        if abs(elbo - prev) <= 1e-9 * abs(elbo):
            break
        prev = elbo
    lam = model.lam(g)
    return laps, elbo, lam / lam.sum(axis=1, keepdims=True)


def main() -> None:
    import bnpcore
    from bnpcore.datasets import make_bars

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--plot", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    X, truth = make_bars(n_docs=args.docs, random_state=0)
    Xt, _ = make_bars(n_docs=100, random_state=1)
    fits = {
        "K=50 merge+delete": lambda s: bnpcore.HDPTopicModel(50, moves=("merge", "delete"), n_batches=5, random_state=s),
        "every default": lambda s: bnpcore.HDPTopicModel(random_state=s),
        "K=50 default": lambda s: bnpcore.HDPTopicModel(50, random_state=s),
        "K=50 merge+delete, no small-allocation delete": lambda s: bnpcore.HDPTopicModel(
            50, moves=("merge", "delete"), n_batches=5, move_options={"delete_small": False}, random_state=s),
        "K=50 no moves": lambda s: bnpcore.HDPTopicModel(50, moves=(), n_batches=5, random_state=s),
        "LDA K=10": lambda s: bnpcore.FiniteTopicModel(10, random_state=s),
        "LDA K=10 kmeans++": lambda s: bnpcore.FiniteTopicModel(10, init="kmeans++", random_state=s),
        "LDA K=10 no moves": lambda s: bnpcore.FiniteTopicModel(10, moves=(), random_state=s),
    }
    rows, out = [], []
    first = None
    for name, make in fits.items():
        for seed in args.seeds:
            t = time.perf_counter()
            m = make(seed).fit(X)
            sec = time.perf_counter() - t
            d = matched(m.topics_, truth)
            rec = {"fit": name, "seed": seed, "topics": int(m.n_components_), "laps": int(m.n_iter_), "seconds": sec,
                   "elbo": float(m.elbo_), "heldout": float(m.score(Xt)), "hellinger_min": float(d.min()), "hellinger_max": float(d.max()),
                   "bars_off": int((d > 0.1).sum())}
            out.append(rec)
            rows.append([name, seed, rec["topics"], rec["laps"], f"{sec:.2f}", f"{m.elbo_:.1f}", f"{rec['heldout']:.4f}",
                         f"{d.min():.3f}-{d.max():.3f}", int((d > 0.1).sum())])
            print(rows[-1], flush=True)
            if first is None:
                first = m
    # the noise floor: iterate from the true topics (fixed K = 10, no moves) to convergence
    laps, elbo, found = from_true_topics(X, truth, args.seeds[0])
    d = matched(found, truth)
    rows.append(["true topics (fixed point, no moves)", "-", 10, laps, "-", f"{elbo:.1f}", "-", f"{d.min():.3f}-{d.max():.3f}", int((d > 0.1).sum())])
    out.append({"fit": "true topics", "laps": laps, "elbo": float(elbo), "hellinger_min": float(d.min()), "hellinger_max": float(d.max())})
    print()
    print(table(rows, ["fit", "seed", "topics", "laps", "s", "objective", "held-out", "Hellinger (min-max)", "> 0.1"]))
    save("bench_bars", {"docs": args.docs, "results": out})
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        fig = bnpcore.plotting.plot_topics(first, image_shape=(30, 30))
        RESULTS.mkdir(exist_ok=True)
        fig.savefig(RESULTS / "bars_topics.png", dpi=80)


if __name__ == "__main__":
    main()
