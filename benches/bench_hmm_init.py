"""The HMM's initial transition counts: the random-block windows' own against all ones.

`init_hmm_stats` gives each initial state the observation summaries of a window of
`init_block_len` consecutive steps and the transition counts of that window (its n - 1
self-transitions added to a count of one for every pair). Before, the transition counts were
all ones; this script reproduces that start by patching `bnpcore.estimators.hmm.init_hmm_stats`
("all ones" rows) and fits the same data both ways:

* `HDPHMM("ar_gauss")` on the auto-regressive toy `make_sticky_hmm("ar")` (52 x 800 steps,
  13 states), seeds 0-2, and on a longer one (`n_seqs=50, seq_len=2000`), seeds 1-2;
* `HDPHMM()` on the sticky toy `make_sticky_hmm()` (32 x 1,000, 8 states), seeds 0-2;
* `FiniteHMM` at the true K on both toys, seeds 0-2, without its swap move (``moves=()``).

Reported per fit: laps, converged, states, objective, ARI against the generating states,
seconds. The oracle lines start from the true labels' observation summaries (AR toy, seed 0,
13 states, no moves) with all-ones and with the true transition counts.

    python benches/bench_hmm_init.py [--quick]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.metrics import adjusted_rand_score


def _flat(init):
    def flat(*args, **kw):
        G = init(*args, **kw)
        G["M"] = np.ones_like(np.asarray(G["M"]))
        return G

    return flat


def _oracle_line(transitions: str) -> str:
    from bnpcore import HDPHMM
    from bnpcore.datasets import make_sticky_hmm
    from bnpcore.stats import SuffStats

    X, lengths, z = make_sticky_hmm("ar", random_state=0)
    seqs = [s[1:] for s in np.split(z, np.cumsum(lengths)[:-1])]  # AR rows drop each first step
    zr, K = np.concatenate(seqs), 13
    M, M0 = np.ones((K, K)), np.ones(K)
    if transitions == "true":
        M, M0 = np.zeros((K, K)), np.zeros(K)
        for s in seqs:
            M0[s[0]] += 1
            np.add.at(M, (s[:-1], s[1:]), 1)

    class Oracle(HDPHMM):
        def _init_stats(self, model, X0, rng):
            R = np.zeros((X0.X.shape[0], K))
            R[np.arange(zr.size), zr] = 1.0
            N, S = model.obs.core.summarize(np.ascontiguousarray(X0.X), R)
            extra = {"n_seqs": float(len(seqs)) if transitions == "true" else 0.0, "M0": M0, "M": M,
                     "Hstart": np.zeros(K), "Htable": np.zeros((K, K))}
            return SuffStats(np.asarray(N), np.asarray(S), np.zeros(K), 0.0, np.arange(K, dtype=np.int64), extra)

    m = Oracle("ar_gauss", n_components=K, moves=(), random_state=0).fit(X, lengths)
    return (f"  oracle, {transitions:>8s} transitions: laps={m.n_iter_:3d}  objective={m.elbo_:.1f}  "
            f"ARI={adjusted_rand_score(z, m.predict(X, lengths)):.3f}")


def main() -> None:
    import bnpcore.estimators.hmm as est_hmm
    from bnpcore import HDPHMM, FiniteHMM
    from bnpcore.datasets import make_sticky_hmm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="seed 0 of each fit only, no long toy")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    seeds = (0,) if args.quick else (0, 1, 2)
    fits = [
        ('HDPHMM("ar_gauss"), AR toy', lambda s: make_sticky_hmm("ar", random_state=s), lambda: HDPHMM("ar_gauss", random_state=0), seeds),
        ('HDPHMM("ar_gauss"), AR toy 50 x 2000', lambda s: make_sticky_hmm("ar", n_seqs=50, seq_len=2000, random_state=s),
         lambda: HDPHMM("ar_gauss", random_state=0), () if args.quick else (1, 2)),
        ("HDPHMM(), sticky toy", lambda s: make_sticky_hmm(random_state=s), lambda: HDPHMM(random_state=0), seeds),
        # without the swap move (FiniteHMM's default since session 31): the start alone
        ("FiniteHMM(n_components=8, moves=()), sticky toy", lambda s: make_sticky_hmm(random_state=s),
         lambda: FiniteHMM(n_components=8, moves=(), random_state=0), seeds),
        ('FiniteHMM("ar_gauss", n_components=13, moves=()), AR toy', lambda s: make_sticky_hmm("ar", random_state=s),
         lambda: FiniteHMM("ar_gauss", n_components=13, moves=(), random_state=0), seeds),
    ]
    windows = est_hmm.init_hmm_stats
    for name, data, make, fit_seeds in fits:
        print(name)
        for seed in fit_seeds:
            X, lengths, z = data(seed)
            for start, init in (("all ones", _flat(windows)), ("windows", windows)):
                est_hmm.init_hmm_stats = init
                try:
                    t = time.perf_counter()
                    m = make().fit(X, lengths)
                    sec = time.perf_counter() - t
                finally:
                    est_hmm.init_hmm_stats = windows
                print(f"  seed {seed} {start:>8s}: laps={m.n_iter_:3d} converged={m.converged_!s:5s} K={m.n_components_:2d}  "
                      f"objective={m.elbo_:.1f}  ARI={adjusted_rand_score(z, m.predict(X, lengths)):.3f}  {sec:.2f} s")
    print("Oracle starts (AR toy, seed 0, 13 states, no moves)")
    for transitions in ("all-ones", "true"):
        print(_oracle_line("true" if transitions == "true" else "ones"))


if __name__ == "__main__":
    main()
