"""CSR local step of the count-vector mixtures against the dense kernel on the same rows.

The case of issue 14: 2,000 x 20,000 word counts with ~80,000 non-zeros (1 MB as CSR), obs="mult".
For each K, one local step of the whole batch (with the default move statistics off) through the
CSR kernel and through the dense kernel on densified rows (what a dense-only kernel must do),
best of ``--repeat``; the machine's own rate is reported as multiply-adds per second (nnz·K for
CSR, rows·V·K for dense; two per entry: log weights and statistics). Then whole fits with every argument at its default, sparse input.

    python benches/bench_sparse_mixture.py [--k 10 50 200] [--repeat 3] [--reuters]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp
from bnpcore import DPMixture
from bnpcore.alloc import DPAlloc
from bnpcore.model import Model
from bnpcore.obs import ObsModel
from bnpcore.stats import SuffStats


def wide_corpus(n=2000, V=20000, per_row=40, seed=0):
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), per_row)
    cols = rng.integers(0, V, size=rows.size)
    S = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, V))
    S.sum_duplicates()
    return S


def best(f, repeat):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def one_step(S, k, repeat, seed=0):
    rng = np.random.default_rng(seed)
    obs = ObsModel.from_data("mult", S[:200].toarray())
    model = Model(DPAlloc(gamma=1.0), obs)
    R = rng.dirichlet(np.ones(k), size=S.shape[0])
    N = R.sum(0)
    Sk = np.asarray((S.T @ R).T)
    G = SuffStats(N, np.ascontiguousarray(Sk), np.zeros(k), 0.0, np.arange(k))
    t_csr = best(lambda: model.local_step(S, G), repeat)
    t_fixed = best(lambda: model.local_step(S[:1], G), repeat)  # the K x V table of E[ln phi] (digammas)
    X = S.toarray()
    t_dense = best(lambda: model.local_step(X, G), repeat)
    a, b = model.local_step(S, G), model.local_step(X, G)
    err = float(np.max(np.abs(a["S"] - b["S"])) / max(1.0, float(np.max(np.abs(b["S"])))))
    return t_csr, t_dense, t_fixed, err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reuters", action="store_true", help="also fit the 395 Reuters documents of the lda package")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    S = wide_corpus()
    n, V = S.shape
    print(f"corpus {n} x {V}, nnz {S.nnz} ({S.data.nbytes + S.indices.nbytes + S.indptr.nbytes:,} bytes as CSR)")
    print("(table s: the K x V table of E[ln phi] every step needs, the same for both kernels; rates exclude it)")
    print(f"{'K':>5} {'CSR s':>9} {'dense s':>9} {'table s':>9} {'speed-up':>9} {'CSR Gmadd/s':>12} {'dense Gmadd/s':>14} {'rel. diff S':>12}")
    for k in args.k:
        t_csr, t_dense, t_fixed, err = one_step(S, k, args.repeat)
        rate_csr = S.nnz * k * 2 / max(t_csr - t_fixed, 1e-9) / 1e9
        rate_dense = n * V * k * 2 / max(t_dense - t_fixed, 1e-9) / 1e9
        print(
            f"{k:5d} {t_csr:9.4f} {t_dense:9.4f} {t_fixed:9.4f} {t_dense / t_csr:8.1f}x {rate_csr:12.2f} "
            f"{rate_dense:14.2f} {err:12.1e}"
        )
    t = time.perf_counter()
    m = DPMixture(obs="mult", random_state=0).fit(S)
    print(f"DPMixture(obs='mult').fit(CSR) with every default: {time.perf_counter() - t:.2f} s, K={m.n_components_}, laps={m.n_iter_}")
    if args.reuters:
        from bnpcore.datasets import load_reuters

        X = load_reuters()[0]
        t = time.perf_counter()
        m = DPMixture(obs="mult", random_state=0).fit(X)
        print(f"Reuters {X.shape}, nnz {X.nnz}: default fit {time.perf_counter() - t:.2f} s, K={m.n_components_}, laps={m.n_iter_}")


if __name__ == "__main__":
    main()
