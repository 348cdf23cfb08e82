"""HMMs on real sequence sets (issue 12): bnpcore ``HDPHMM`` against hmmlearn ``GaussianHMM``
with K chosen by hmmlearn's own BIC on a grid, held-out log-likelihood per time step.

Data (``bnpcore.datasets``, read from sktime's bundled files; skipped without sktime):
JapaneseVowels (270 training / 370 test utterances, 12 cepstral coefficients, 7-29 frames)
and BasicMotions (40 / 40 smart-watch recordings, 6 channels, 100 steps). Features are
standardised with the training set's mean and standard deviation.

Methods, all on the training sequences, scored on the test sequences by the forward algorithm
at the fitted point estimates (``score(X, lengths)`` of both libraries) divided by the number of
test time steps:

* ``bnpcore HDPHMM()``: the defaults;
* ``bnpcore HDPHMM(n_components=1)``: from one state, births/merges/deletes find K;
* ``hmmlearn GaussianHMM``: full covariances, EM, K = 2..12 and the K with the lowest
  ``bic(X, lengths)`` on the training data (the time reported is the whole grid, which is
  what a user without K pays; the time of the chosen K alone is listed too).

Also saves the segmentation of four test sequences by the bnpcore model
(``bench_results/hmm_real_<set>.png``).

Usage: ``python benches/bench_hmm_real.py [--set vowels|motions|all] [--seed 0]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, save, table


def _standardise(X, Xt):
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd[sd == 0] = 1.0
    return (X - mu) / sd, (Xt - mu) / sd


def run_bnpcore(X, lx, Xt, lt, seed, **kw):
    import bnpcore

    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = bnpcore.HDPHMM(random_state=seed, **kw).fit(X, lx)
    sec = time.perf_counter() - t
    return m, sec, m.score(Xt, lt) / Xt.shape[0], m.n_components_


def run_hmmlearn(X, lx, Xt, lt, seed, grid):
    from hmmlearn import hmm

    best, total, per_k = None, 0.0, {}
    for k in grid:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = hmm.GaussianHMM(n_components=k, covariance_type="full", n_iter=100, random_state=seed).fit(X, lx)
            bic = m.bic(X, lx)
        sec = time.perf_counter() - t
        total += sec
        per_k[k] = sec
        if best is None or bic < best[1]:
            best = (m, bic, k)
    m, _, k = best
    return total, per_k[k], m.score(Xt, lt) / Xt.shape[0], k


def main(argv=None):
    from bnpcore.datasets import load_basic_motions, load_japanese_vowels

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("vowels", "motions", "all"), default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-k", type=int, default=12)
    args = ap.parse_args(argv)
    sets = {"vowels": load_japanese_vowels, "motions": load_basic_motions}
    chosen = list(sets) if args.set == "all" else [args.set]
    out = {"machine": machine()}
    for name in chosen:
        try:
            X, lx, _ = sets[name]("train")
            Xt, lt, _ = sets[name]("test")
        except ImportError as exc:
            print(f"# {name}: skipped ({exc})")
            continue
        X, Xt = _standardise(X, Xt)
        rows = []
        _m, sec, ll, k = run_bnpcore(X, lx, Xt, lt, args.seed)
        rows.append(["bnpcore HDPHMM() (defaults)", f"{sec:.2f}", k, f"{ll:.4f}"])
        m1, sec, ll, k = run_bnpcore(X, lx, Xt, lt, args.seed, n_components=1)
        rows.append(["bnpcore HDPHMM(n_components=1)", f"{sec:.2f}", k, f"{ll:.4f}"])
        try:
            total, sec_k, ll, k = run_hmmlearn(X, lx, Xt, lt, args.seed, range(2, args.max_k + 1))
            rows.append([f"hmmlearn GaussianHMM, K by BIC over 2..{args.max_k}", f"{total:.2f} (K alone {sec_k:.2f})", k, f"{ll:.4f}"])
        except ImportError:
            rows.append(["hmmlearn (not installed)", "", "", ""])
        print(f"# {name}: {len(lx)} training sequences ({X.shape[0]} steps), {len(lt)} test ({Xt.shape[0]} steps), {X.shape[1]} features")
        print(table(rows, ["method", "fit s", "K", "held-out log-lik / step"]))
        out[name] = rows
        try:
            from bnpcore.plotting import plot_segmentation

            fig = plot_segmentation(m1, Xt, lt, n_show=4)
            RESULTS.mkdir(exist_ok=True)
            fig.savefig(RESULTS / f"hmm_real_{name}.png", dpi=100)
        except ImportError:
            pass
    save("bench_hmm_real", out)


if __name__ == "__main__":
    main()
