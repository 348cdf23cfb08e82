"""HMM moves as users get them, and the merges scored from pair statistics.

1. Every argument at its default (`HDPHMM()`, and `HDPHMM(n_components=1)` as the demo runs it)
   on the sticky toy (8 states) and `HDPHMM("ar_gauss")` on the AR toy (13 generating states):
   seconds, states, laps, ARI against the generating states, final objective, accepted moves.
2. Merges only from K=30 on the sticky toy, pair-statistics scoring on (`merge_candidates=10`,
   the default) and off (`0`: every merge judged by two passes), per seed.
3. The auto-regressive Gaussian as a mixture observation model with its defaults
   (`DPMixture("ar_gauss")` on `ar_rows` of the AR toy and on three synthetic 2-D regimes).

    python benches/bench_hmm_moves.py [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections import Counter

import numpy as np
from bnpcore import HDPHMM, DPMixture
from bnpcore.datasets import make_sticky_hmm
from bnpcore.obs import ar_rows
from sklearn.metrics import adjusted_rand_score


def _fit(est, *args):
    t = time.perf_counter()
    est.fit(*args)
    return est, time.perf_counter() - t


def _moves(m) -> str:
    c = Counter((r["kind"], r.get("evaluated", "passes")) for r in m.moves_log_ if r["accepted"])
    return ", ".join(f"{k}/{e}: {n}" for (k, e), n in sorted(c.items())) or "none"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    X, lengths, z = make_sticky_hmm(random_state=0)
    Xa, la, za = make_sticky_hmm("ar", random_state=0)
    print("1. defaults")
    for name, est, data, truth in [
        ("HDPHMM() sticky toy", HDPHMM(random_state=0), (X, lengths), z),
        ("HDPHMM(n_components=1) sticky toy", HDPHMM(n_components=1, random_state=0), (X, lengths), z),
        ('HDPHMM("ar_gauss") AR toy', HDPHMM("ar_gauss", random_state=0), (Xa, la), za),
        ('HDPHMM("ar_gauss", n_components=1) AR toy', HDPHMM("ar_gauss", n_components=1, random_state=0), (Xa, la), za),
    ]:
        m, dt = _fit(est, *data)
        ari = adjusted_rand_score(truth, m.predict(*data))
        print(f"  {name:42s} {dt:6.2f} s  K={m.n_components_:2d}  laps={m.n_iter_:2d}  ARI={ari:.3f}  "
              f"objective={m.elbo_:.1f}  accepted: {_moves(m)}")
    print("2. merges only from K=30 (sticky toy, kappa=50, 4 batches)")
    for seed in args.seeds:
        Xs, ls, zs = make_sticky_hmm(random_state=10 + seed)
        for mc in (10, 0):
            m, dt = _fit(HDPHMM(n_components=30, kappa=50.0, moves=("merge",), n_batches=4, max_laps=60, random_state=seed,
                                move_options={"merge_candidates": mc}), Xs, ls)
            ari = adjusted_rand_score(zs, m.predict(Xs, ls))
            print(f"  seed {seed} merge_candidates={mc:2d}  {dt:5.2f} s  K={m.n_components_}  laps={m.n_iter_}  ARI={ari:.3f}  "
                  f"objective={m.elbo_:.2f}  accepted: {_moves(m)}")
    print('3. DPMixture("ar_gauss") with its defaults')
    R, _ = ar_rows(Xa, la)
    zr = np.concatenate([s[1:] for s in np.split(za, np.cumsum(la)[:-1])])
    rng = np.random.default_rng(0)
    A = np.stack([[[0.9, 0.0], [0.0, 0.9]], [[0.0, -0.9], [0.9, 0.0]], [[-0.8, 0.3], [0.0, -0.5]]])
    prev = 2.0 * rng.standard_normal((1500, 2))
    zz = rng.integers(3, size=1500)
    Y = np.hstack([np.einsum("nij,nj->ni", A[zz], prev) + 0.1 * rng.standard_normal((1500, 2)), prev])
    for name, data, truth in [("AR toy steps (no Markov chain)", R, zr), ("three 2-D regimes, 1,500 rows", Y, zz)]:
        m, dt = _fit(DPMixture("ar_gauss", random_state=0), data)
        print(f"  {name:32s} {dt:5.2f} s  K={m.n_components_}  ARI={adjusted_rand_score(truth, m.predict(data)):.3f}")


if __name__ == "__main__":
    main()
