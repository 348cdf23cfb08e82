"""Throughput of the topic-model document local step (``_core.doc_topic_step``).

Synthetic corpus drawn from an LDA-like generative model (defaults: 1,500 documents, V = 10,000,
50 true topics, 150-600 distinct word types per document). For each K the topic-word table is
built from noisy copies of the true topics, and one batch local step (default settings: cold
start, max_iter=100, tol=0.05, restarts on) is timed for the dense step and ``top_l=8``, with 1
and 2 threads. Reported: seconds per lap, dense-equivalent token-topic updates per second
(``n_type_passes * K / seconds``; one update = the two multiply-adds of one word type x topic
pair in one pass) and the dense / top_l speed-up per lap.

Run: ``python benches/bench_doc_topic.py [--n-docs 1500] [--ks 100 400 800] [--threads 1 2] [--repeat 3]``
(``--repeat``: the fastest of that many timings of each mode, the modes alternating).
Record the machine and its load with the numbers (the shared 2-core machine gives noisy timings).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import scipy.sparse as sp
from bnpcore import _core


def make_corpus(n_docs, n_vocab, n_true=50, seed=0):
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(n_vocab, 0.02), size=n_true)
    rows, cols, vals = [], [], []
    for d in range(n_docs):
        mix = rng.dirichlet(np.full(n_true, 0.1))
        n_tokens = int(rng.integers(300, 1500))
        counts = rng.multinomial(n_tokens, mix @ topics)
        nz = np.flatnonzero(counts)
        rows.append(np.full(nz.size, d))
        cols.append(nz)
        vals.append(counts[nz].astype(float))
    X = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_docs, n_vocab))
    return X, topics, rng


def table_for(topics, K, rng):
    """exp(E[ln phi]) of K noisy copies of the true topics (lam = 0.1 + 5000 * topic * noise)."""
    base = topics[np.arange(K) % topics.shape[0]]
    lam = 0.1 + 5000.0 * base * rng.gamma(2.0, 0.5, base.shape)
    return _core.topic_word_table(lam)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-docs", type=int, default=1500)
    ap.add_argument("--n-vocab", type=int, default=10_000)
    ap.add_argument("--ks", type=int, nargs="+", default=[100, 400, 800])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--top-l", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=1,
                    help="time every (mode, threads) this many times, the modes alternating, and report the fastest "
                         "(the 2-core machine's run-to-run spread is a few per cent)")
    args = ap.parse_args()
    X, topics, rng = make_corpus(args.n_docs, args.n_vocab)
    types = np.diff(X.indptr)
    print(
        f"corpus: D={X.shape[0]} V={X.shape[1]} nnz={X.nnz} types/doc mean={types.mean():.0f} tokens={X.data.sum():.0f}; "
        f"machine: {platform.machine()} {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'K':>5} {'mode':>8} {'thr':>3} {'sec/lap':>8} {'passes/doc':>10} {'updates/s':>10} {'restarts acc/tried':>18}")
    for K in args.ks:
        table = table_for(topics, K, rng)
        a = np.full(K, args.alpha / (K + 1))
        a_rem = args.alpha / (K + 1)
        per_mode, outs = {}, {}
        modes = (("dense", None), (f"top{args.top_l}", args.top_l))
        for _ in range(max(1, args.repeat)):
            for thr in args.threads:
                for mode, top_l in modes:
                    t0 = time.perf_counter()
                    outs[mode, thr] = _core.doc_topic_step(X.indptr, X.indices, X.data, table, a, alpha_beta_rem=a_rem, top_l=top_l,
                                                           n_threads=thr)
                    sec = time.perf_counter() - t0
                    per_mode[mode, thr] = min(sec, per_mode.get((mode, thr), np.inf))
        for mode, _ in modes:
            for thr in args.threads:
                out, sec = outs[mode, thr], per_mode[mode, thr]
                ups = out["n_type_passes"] * K / sec
                print(
                    f"{K:>5} {mode:>8} {thr:>3} {sec:>8.2f} {out['n_type_passes'] / X.nnz:>10.1f} {ups:>10.2e} "
                    f"{out['restarts_accepted']:>8}/{out['restarts_tried']}"
                )
        for thr in args.threads:
            print(f"{K:>5} speed-up dense/top{args.top_l} per lap with {thr} thread(s): {per_mode['dense', thr] / per_mode[f'top{args.top_l}', thr]:.2f}x")


if __name__ == "__main__":
    main()
