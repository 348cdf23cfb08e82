"""Truncation-free SVI (Wang & Blei 2012) against truncated stochastic VI and memoized VI with
moves: held-out per-token log-likelihood and number of topics against training time, for batch
sizes S in {1, 10, 100} (the experiment of issue 15; Wang & Blei's Figs. 3-4 in miniature).

Data: the toy bars (``make_bars``: 10 topics, 900 words; 2,000 training documents, 200 held
out) and a bundled real corpus, Reuters (``load_reuters``, from the ``lda`` package: 395
documents, 4,258 words; 320 training, 75 held out), skipped when ``lda`` is absent.

Methods, all the same model (``HDPTopicModel`` with Wang & Blei's HDP settings eta = 0.01,
a = gamma = 1, b = alpha = 1) and the same evaluation (``HDPTopicModel.score``: document
completion on the held-out documents, nats per token, higher is better), recorded after every
pass with ``fit(..., eval_X=...)``:

* ``tf-svi S=...``: ``algorithm="truncation_free"``, ``batch_size=S``, from zero topics;
* ``svi K=300 S=...``: ``algorithm="stochastic"``, 300 topics, batches of S documents
  (``n_batches = D / S``), learning rate (1 + t)^-0.6 as in the paper's baseline;
* ``memoized+moves``: the defaults (memoized, birth/merge/delete, from one topic), and the
  same from 50 random-document topics (``memoized+moves K0=50``).

Each run stops at its time budget (``--budget`` seconds of training, evaluation excluded) or
after ``--laps`` passes. Writes ``bench_results/truncation_free.json`` and a figure
``bench_results/truncation_free.png``.

Usage::

    python benches/bench_truncation_free.py                 # both corpora, budget 20 s per run
    python benches/bench_truncation_free.py --corpus bars --budget 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent.parent / "bench_results"
HYPER = dict(alpha=1.0, gamma=1.0, prior_count=0.01)


def _run(name, make, X, Xt, budget, laps):
    from bnpcore.exceptions import ConvergenceWarning

    def stop(model, info):
        return bool(model.history_["seconds"][-1] >= budget)

    model = make(max_laps=laps, callback=stop)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, eval_X=Xt)
    wall = time.perf_counter() - t0
    h = model.history_
    rec = {
        "method": name,
        "seconds": h["seconds"].tolist(),
        "score": h["score"].tolist(),
        "n_components": h["n_components"].tolist(),
        "final_score": float(h["score"][-1]),
        "final_k": int(h["n_components"][-1]),
        "passes": len(h["lap"]),
        "wall_seconds_with_eval": wall,
    }
    print(f"  {name:<22} passes={rec['passes']:>4}  train={h['seconds'][-1]:7.2f}s  K={rec['final_k']:>4}  "
          f"held-out={rec['final_score']:.4f}", flush=True)
    return rec


def run_corpus(X, Xt, budget, laps, sizes):
    from bnpcore import HDPTopicModel

    D = X.shape[0]
    out = []
    for S in sizes:
        out.append(_run(f"tf-svi S={S}", lambda S=S, **kw: HDPTopicModel(algorithm="truncation_free", batch_size=S, random_state=0, **HYPER, **kw),
                        X, Xt, budget, laps))
    for S in sizes:
        nb = max(1, D // S)
        out.append(_run(f"svi K=300 S={S}", lambda nb=nb, **kw: HDPTopicModel(n_components=300, algorithm="stochastic", n_batches=nb, init="random_docs",
                                                                    learning_rate_delay=1.0, learning_rate_decay=0.6, random_state=0, **HYPER, **kw),
                        X, Xt, budget, laps))
    out.append(_run("memoized+moves", lambda **kw: HDPTopicModel(random_state=0, **HYPER, **kw), X, Xt, budget, laps))
    out.append(_run("memoized+moves K0=50", lambda **kw: HDPTopicModel(n_components=50, random_state=0, **HYPER, **kw), X, Xt, budget, laps))
    return out


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(6 * len(results), 7), squeeze=False)
    for j, (corpus, runs) in enumerate(results.items()):
        for r in runs:
            style = "-" if r["method"].startswith("tf") else ("--" if r["method"].startswith("svi") else "-")
            lw = 2.5 if r["method"].startswith("memo") else 1.5
            axes[0, j].plot(r["seconds"], r["score"], style, lw=lw, marker=".", label=r["method"])
            axes[1, j].plot(r["seconds"], r["n_components"], style, lw=lw, marker=".", label=r["method"])
        axes[0, j].set_title(f"{corpus}: held-out log-likelihood per token")
        axes[0, j].set_xscale("log")
        axes[1, j].set_xscale("log")
        axes[1, j].set_yscale("log")
        axes[1, j].set_xlabel("training seconds")
        axes[1, j].set_title("topics (expected words >= 1)")
        axes[0, j].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    from bnpcore.datasets import load_reuters, make_bars

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", choices=("bars", "reuters", "all"), default="all")
    ap.add_argument("--budget", type=float, default=20.0, help="training seconds per run")
    ap.add_argument("--laps", type=int, default=200, help="maximum passes per run")
    ap.add_argument("--sizes", default="1,10,100")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}
    if args.corpus in ("bars", "all"):
        X, _ = make_bars(n_docs=2000, random_state=0)
        Xt, _ = make_bars(n_docs=200, random_state=1)
        print(f"# toy bars: {X.shape[0]} training docs, {Xt.shape[0]} held out, V={X.shape[1]}", flush=True)
        results["bars"] = run_corpus(X, Xt, args.budget, args.laps, sizes)
    if args.corpus in ("reuters", "all") and importlib.util.find_spec("lda") is not None:
        X = load_reuters()[0]
        perm = np.random.default_rng(0).permutation(X.shape[0])
        X = X[perm]
        print(f"# Reuters (lda package): 320 training docs, {X.shape[0] - 320} held out, V={X.shape[1]}", flush=True)
        results["reuters"] = run_corpus(X[:320], X[320:], args.budget, args.laps, sizes)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "truncation_free.json").write_text(json.dumps(results, indent=1))
    plot(results, RESULTS / "truncation_free.png")
    print(f"wrote {RESULTS / 'truncation_free.json'} and truncation_free.png")


if __name__ == "__main__":
    main()
