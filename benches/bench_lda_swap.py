"""LDA's swap move: ``FiniteTopicModel`` with every default (the swap on) against
``moves=()`` from the same initial topics, on the toy bars and the corpora that ship in PyPI
packages.

Data: ``make_bars`` (2,000 training documents, 200 held out, K = 10, the true number of
topics), gensim's Lee corpus (K = 20), the ``lda`` package's Reuters titles (K = 20) and
gensim's Wikipedia sample (K = 50); for the real corpora the first 80 % of the documents train
and the rest are held out. Per fit: seconds, laps, swaps accepted / proposed, objective and the
held-out document-completion score (``FiniteTopicModel.score``, nats per token). Corpora whose
package is missing are skipped.

Usage::

    python benches/bench_lda_swap.py
    python benches/bench_lda_swap.py --corpus reuters --seeds 0 1 2 3 4 5 6 7
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import save, table


def corpus(name: str):
    from bnpcore import datasets

    if name == "bars":
        return datasets.make_bars(n_docs=2000, random_state=0)[0], datasets.make_bars(n_docs=200, random_state=1)[0], 10
    load = {"lee": datasets.load_lee_corpus, "reuters": datasets.load_reuters, "wiki": datasets.load_wiki_sample}[name]
    X = load()[0].tocsr()
    n = int(0.8 * X.shape[0])
    return X[:n], X[n:], {"lee": 20, "reuters": 20, "wiki": 50}[name]


def main() -> None:
    import bnpcore

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", nargs="+", default=["bars", "lee", "reuters", "wiki"], choices=("bars", "lee", "reuters", "wiki"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rows, out = [], []
    for name in args.corpus:
        try:
            X, Xt, K = corpus(name)
        except ImportError as e:
            print(f"skipped {name}: {e}")
            continue
        for label, kw in (("default (swap)", {}), ("moves=()", {"moves": ()})):
            for seed in args.seeds:
                t = time.perf_counter()
                m = bnpcore.FiniteTopicModel(K, random_state=seed, **kw).fit(X)
                sec = time.perf_counter() - t
                log = m.moves_log_
                rec = {"corpus": name, "fit": label, "seed": seed, "seconds": sec, "laps": int(m.n_iter_),
                       "swaps_accepted": int(sum(r["accepted"] for r in log)), "swaps_tried": len(log),
                       "elbo": float(m.elbo_), "heldout": float(m.score(Xt))}
                out.append(rec)
                rows.append([name, label, seed, f"{sec:.2f}", rec["laps"], f"{rec['swaps_accepted']}/{rec['swaps_tried']}",
                             f"{rec['elbo']:.1f}", f"{rec['heldout']:.4f}"])
                print(rows[-1], flush=True)
        for label in ("default (swap)", "moves=()"):
            r = [o for o in out if o["corpus"] == name and o["fit"] == label]
            rows.append([name, f"{label}: mean", "-", f"{np.mean([o['seconds'] for o in r]):.2f}", "-", "-",
                         f"{np.mean([o['elbo'] for o in r]):.1f}", f"{np.mean([o['heldout'] for o in r]):.4f}"])
    print()
    print(table(rows, ["corpus", "fit", "seed", "s", "laps", "swaps", "objective", "held-out"]))
    save("bench_lda_swap", {"results": out})


if __name__ == "__main__":
    main()
