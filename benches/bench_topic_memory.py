"""Memory of a memoized topic-model fit from a list of CSR batch files (issue 11): the corpus is
20,000 toy-bars documents written as 200 ``.npz`` batches (``scipy.sparse.save_npz``); the fit
(``HDPTopicModel``, defaults: memoized, birth/merge/delete, from one topic) reads one batch at a
time, so its peak memory should be one batch plus the summaries, not the corpus.

Reported: the size of the corpus in memory (CSR arrays) and of one batch, the driver's resident
memory before the fit and its peak during the fit (sampled every 10 ms by a thread), the size of
the summaries (global + 200 memos: K × V each), and the same fit on the corpus held in memory as
one CSR matrix for comparison.

Usage: ``python benches/bench_topic_memory.py [--docs 20000] [--batches 200] [--laps 4]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save, table


class PeakRSS:
    """Peak resident memory of this process while the context is open (10 ms sampling)."""

    def __enter__(self):
        import psutil

        self.proc = psutil.Process()
        self.start = self.peak = self.proc.memory_info().rss
        self.stop = False

        def run():
            while not self.stop:
                self.peak = max(self.peak, self.proc.memory_info().rss)
                time.sleep(0.01)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()


def main(argv=None):
    import scipy.sparse as sp
    from bnpcore import HDPTopicModel
    from bnpcore.datasets import make_bars
    from bnpcore.exceptions import ConvergenceWarning

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--laps", type=int, default=4)
    ap.add_argument("--init-subsample", type=int, default=None, help="HDPTopicModel(init_subsample=...) (default: the estimator's)")
    args = ap.parse_args(argv)

    X, _ = make_bars(n_docs=args.docs, random_state=0)
    X = sp.csr_array(X)
    tmp = Path(tempfile.mkdtemp(prefix="bnpcore-topic-mem-"))
    bounds = np.linspace(0, X.shape[0], args.batches + 1).astype(int)
    paths = []
    for b in range(args.batches):
        p = tmp / f"batch{b:04d}.npz"
        sp.save_npz(p, sp.csr_matrix(X[bounds[b]:bounds[b + 1]]))
        paths.append(str(p))
    corpus_mb = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 1e6
    batch_mb = corpus_mb / args.batches
    del X

    kw = dict(random_state=0, max_laps=args.laps)
    if args.init_subsample is not None:
        kw["init_subsample"] = args.init_subsample
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with PeakRSS() as files:
            m = HDPTopicModel(**kw).fit(paths)
        K, V = m.summaries_.S.shape
        summaries_mb = (len(m.state_.memos) + 1) * K * V * 8 / 1e6
        Xmem = sp.vstack([sp.load_npz(p) for p in paths], format="csr")
        with PeakRSS() as inmem:
            m2 = HDPTopicModel(**kw).fit(Xmem)
    rows = [
        ["list of 200 .npz batches", f"{files.start / 1e6:.0f}", f"{(files.peak - files.start) / 1e6:.1f}", m.n_components_],
        ["one CSR matrix in memory", f"{inmem.start / 1e6:.0f}", f"{(inmem.peak - inmem.start) / 1e6:.1f}", m2.n_components_],
    ]
    print(f"{args.docs} documents, V = {V}: corpus {corpus_mb:.1f} MB as CSR, one batch {batch_mb:.2f} MB; "
          f"summaries (G + {len(m.state_.memos)} memos, K = {K}) {summaries_mb:.1f} MB; {args.laps} laps")
    print(table(rows, ["data", "RSS before (MB)", "peak increase during fit (MB)", "topics"]))
    save("bench_topic_memory", {"machine": machine(), "docs": args.docs, "batches": args.batches, "corpus_mb": corpus_mb,
                                "batch_mb": batch_mb, "summaries_mb": summaries_mb,
                                "files_peak_increase_mb": (files.peak - files.start) / 1e6,
                                "inmem_peak_increase_mb": (inmem.peak - inmem.start) / 1e6})


if __name__ == "__main__":
    main()
