"""Sticky HMM toy against the peers, same data, same process (issue 12).

Data: ``bnpcore.datasets.make_sticky_hmm()`` (32 sequences × 1,000 steps, 2-D, 8 states).
bnpcore ``HDPHMM`` starts from ONE state (births, merges, deletes; memoized, 4 batches); the
peers are given the true K = 8 (BNPy's HDPHMM, run in its own environment by
``_bnpy_driver.py``, starts from 20 states with merges, as its documentation runs it): hmmlearn ``GaussianHMM`` (EM, full covariance) and
``VariationalGaussianHMM``, dynamax ``GaussianHMM`` (EM with a sticky transition prior,
timed with and without its JIT compilation). Reported: seconds to a fit, adjusted Rand index
of the decoded states, states found. Peers that are not installed are skipped.

Usage: ``python benches/bench_hmm_peers.py [--seed 0]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save, table
from sklearn.metrics import adjusted_rand_score


def run_bnpcore(X, lengths, seed):
    import bnpcore

    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = bnpcore.HDPHMM(n_components=1, kappa=50.0, n_batches=4, random_state=seed).fit(X, lengths)
    sec = time.perf_counter() - t
    return sec, m.predict(X, lengths), m.n_components_


def run_hmmlearn(X, lengths, seed, variational=False):
    if variational:
        from hmmlearn.vhmm import VariationalGaussianHMM as cls
    else:
        from hmmlearn.hmm import GaussianHMM as cls
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = cls(n_components=8, covariance_type="full", n_iter=100, random_state=seed).fit(X, lengths)
    sec = time.perf_counter() - t
    return sec, m.predict(X, lengths), 8


def run_dynamax(X, lengths, seed):
    import jax.numpy as jnp
    import jax.random as jr
    from dynamax.hidden_markov_model import GaussianHMM

    T = int(lengths[0])
    emissions = jnp.asarray(X.reshape(len(lengths), T, X.shape[1]))
    hmm = GaussianHMM(8, X.shape[1], transition_matrix_stickiness=50.0)

    def fit():
        params, props = hmm.initialize(jr.PRNGKey(seed), method="kmeans", emissions=emissions)
        params, _ = hmm.fit_em(params, props, emissions, num_iters=50, verbose=False)
        return params

    t = time.perf_counter()
    params = fit()
    first = time.perf_counter() - t
    t = time.perf_counter()
    params = fit()
    compiled = time.perf_counter() - t
    import jax

    states = np.concatenate([np.asarray(hmm.most_likely_states(params, e)) for e in emissions])
    _ = jax
    return first, compiled, states


#: BNPy's HDPHMM as its documentation runs it (memoized, merges, sticky), given no K
BNPY_KWARGS = dict(K=20, nLap=100, nBatch=4, initname="randcontigblocks", moves="merge,shuffle", m_startLap=2,
                   alpha=0.5, gamma=5.0, hmmKappa=50.0, startAlpha=1.0, ECovMat="eye", sF=1.0, convergeThr=1e-6)


def run_bnpy_hmm(X, lengths, seed, python):
    from bench_bnpy import run_bnpy

    kw = dict(BNPY_KWARGS, taskID=seed + 1)
    res = run_bnpy(python, X, "HDPHMM", "Gauss", "memoVB", kw, timeout=1800, labels=True, lengths=lengths)
    if "error" in res:
        raise RuntimeError(res["error"])
    return res["seconds"], res["labels"], res["K"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bnpy-python", default=str(Path(__file__).resolve().parent.parent / ".bnpy-venv" / "bin" / "python"),
                    help="interpreter of BNPy's environment (scripts/setup_bnpy.sh)")
    args = ap.parse_args(argv)
    import bnpcore

    X, lengths, z = bnpcore.datasets.make_sticky_hmm(random_state=args.seed)
    rows, out = [], {}
    sec, pred, k = run_bnpcore(X, lengths, args.seed)
    rows.append(["bnpcore HDPHMM (from K=1)", f"{sec:.2f}", f"{adjusted_rand_score(z, pred):.3f}", k])
    out["bnpcore"] = {"seconds": sec, "ari": adjusted_rand_score(z, pred), "K": int(k)}
    for name, fn in (("hmmlearn GaussianHMM (K=8)", lambda: run_hmmlearn(X, lengths, args.seed)),
                     ("hmmlearn VariationalGaussianHMM (K=8)", lambda: run_hmmlearn(X, lengths, args.seed, True))):
        try:
            sec, pred, k = fn()
        except ImportError:
            rows.append([name, "not installed", "", ""])
            continue
        rows.append([name, f"{sec:.2f}", f"{adjusted_rand_score(z, pred):.3f}", k])
        out[name] = {"seconds": sec, "ari": adjusted_rand_score(z, pred)}
    try:
        first, compiled, pred = run_dynamax(X, lengths, args.seed)
        rows.append(["dynamax GaussianHMM EM (K=8), with compilation", f"{first:.2f}", f"{adjusted_rand_score(z, pred):.3f}", 8])
        rows.append(["dynamax GaussianHMM EM (K=8), compiled", f"{compiled:.2f}", f"{adjusted_rand_score(z, pred):.3f}", 8])
        out["dynamax"] = {"seconds_first": first, "seconds_compiled": compiled, "ari": adjusted_rand_score(z, pred)}
    except ImportError:
        rows.append(["dynamax", "not installed", "", ""])
    if Path(args.bnpy_python).exists():
        try:
            sec, pred, k = run_bnpy_hmm(X, lengths, args.seed, args.bnpy_python)
            rows.append(["BNPy 0.1.7 HDPHMM memoVB + merges (K0=20)", f"{sec:.2f}", f"{adjusted_rand_score(z, pred):.3f}", k])
            out["bnpy"] = {"seconds": sec, "ari": adjusted_rand_score(z, pred), "K": int(k)}
        except RuntimeError as exc:
            rows.append(["BNPy HDPHMM", f"failed: {str(exc)[:60]}", "", ""])
    else:
        rows.append(["BNPy", "no environment (scripts/setup_bnpy.sh)", "", ""])
    print(f"sticky toy: {len(lengths)} sequences x {int(lengths[0])} steps, 8 states")
    print(table(rows, ["method", "seconds", "ARI", "states"]))
    save("bench_hmm_peers", {"machine": machine(), "seed": args.seed, "results": out})


if __name__ == "__main__":
    main()
