"""The finite HMM's swap move: ``FiniteHMM`` with every default (the swap on) against
``moves=()`` from the same initial states.

Data: the sticky toy (``make_sticky_hmm("gauss")``, K = 8, the true number) and its
auto-regressive variant (``make_sticky_hmm("ar")``, ``FiniteHMM("ar_gauss")``, K = 13), data
seeds ``--seeds``, fit seed 0, scored by the ARI of the Viterbi path against the true states;
and, when sktime is installed, JapaneseVowels and BasicMotions (standardised as in
``bench_hmm_real.py``) with K = 5 and 10, fit seeds ``--seeds``, scored by the held-out
log-likelihood per test step. Per fit: seconds, laps, swaps accepted / proposed, objective and
the score.

Usage::

    python benches/bench_hmm_swap.py
    python benches/bench_hmm_swap.py --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import save, table


def _fit(model, X, lengths):
    t = time.perf_counter()
    model.fit(X, lengths)
    return model, time.perf_counter() - t


def main() -> None:
    import bnpcore
    from bnpcore.datasets import make_sticky_hmm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from sklearn.metrics import adjusted_rand_score

    rows, out = [], []

    def record(data, seed, label, m, sec, score):
        log = m.moves_log_
        rec = {"data": data, "seed": seed, "fit": label, "seconds": sec, "laps": int(m.n_iter_),
               "swaps_accepted": int(sum(r["accepted"] for r in log)), "swaps_tried": len(log), "elbo": float(m.elbo_), "score": float(score)}
        out.append(rec)
        rows.append([data, seed, label, f"{sec:.2f}", rec["laps"], f"{rec['swaps_accepted']}/{rec['swaps_tried']}", f"{m.elbo_:.1f}", f"{score:.4f}"])
        print(rows[-1], flush=True)

    for variant, obs, K in (("gauss", "gauss", 8), ("ar", "ar_gauss", 13)):
        for seed in args.seeds:
            X, lengths, states = make_sticky_hmm(variant, random_state=seed)[:3]
            for label, kw in (("default (swap)", {}), ("moves=()", {"moves": ()})):
                m, sec = _fit(bnpcore.FiniteHMM(obs, n_components=K, random_state=0, **kw), X, lengths)
                record(f"sticky toy {variant}, K={K} (ARI)", seed, label, m, sec, adjusted_rand_score(states, m.predict(X, lengths)))
    try:
        from bench_hmm_real import _standardise
        from bnpcore.datasets import load_basic_motions, load_japanese_vowels

        sets = {"vowels": load_japanese_vowels, "motions": load_basic_motions}
        for name, load in sets.items():
            X, lx, _ = load("train")
            Xt, lt, _ = load("test")
            X, Xt = _standardise(X, Xt)
            for K in (5, 10):
                for seed in args.seeds:
                    for label, kw in (("default (swap)", {}), ("moves=()", {"moves": ()})):
                        m, sec = _fit(bnpcore.FiniteHMM(n_components=K, random_state=seed, **kw), X, lx)
                        record(f"{name}, K={K} (held-out/step)", seed, label, m, sec, m.score(Xt, lt) / Xt.shape[0])
    except ImportError as e:
        print(f"real sets skipped: {e}")
    print()
    print(table(rows, ["data", "seed", "fit", "s", "laps", "swaps", "objective", "score"]))
    save("bench_hmm_swap", {"results": out})


if __name__ == "__main__":
    main()
