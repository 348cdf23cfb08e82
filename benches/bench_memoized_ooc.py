"""Out-of-core memoized inference: seconds per lap and peak resident memory.

A 2,000,000 × 16 Gaussian-mixture dataset (bnpcore.datasets.make_gaussian_mixture parameters,
sampled in chunks) is written to a ``.npy`` file; then, each in a fresh subprocess so that peak
RSS is measured per configuration (``resource.getrusage(RUSAGE_SELF).ru_maxrss``):

* ``memoized-ooc``: ``DPMixture(algorithm="memoized", n_batches=20).fit(path)`` — the file is
  read one batch at a time;
* ``full-inmem``: the same data loaded into memory, ``algorithm="full"``;
* ``memoized-inmem``: the same data in memory, ``algorithm="memoized", n_batches=20``.

Fixed K (no moves), ``tol=0``, the same seed. The issue's targets: per-lap time of
``memoized-ooc`` within 15 % of ``full-inmem``; its peak memory at most one batch plus
O(B·K·D²) summaries plus 200 MB above the interpreter's baseline.

Usage::

    python benches/bench_memoized_ooc.py              # 2,000,000 rows (≈ 256 MB file)
    python benches/bench_memoized_ooc.py --rows 200000 --laps 3 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent.parent / "bench_results"


def write_dataset(path: Path, rows: int, features: int, components: int, chunk: int = 100_000) -> None:
    """Sample from one fixed mixture in chunks straight into a .npy file (never all in memory)."""
    from bnpcore.datasets import make_gaussian_mixture

    _, _, params = make_gaussian_mixture(n_samples=10, n_features=features, n_components=components,
                                         random_state=0, return_params=True)
    w, mu, cov = params["weights"], params["means"], params["covariances"]
    chol = np.linalg.cholesky(cov)
    rng = np.random.default_rng(1)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(rows, features))
    for lo in range(0, rows, chunk):
        hi = min(rows, lo + chunk)
        z = rng.choice(components, size=hi - lo, p=w)
        e = rng.standard_normal((hi - lo, features))
        out[lo:hi] = mu[z] + np.einsum("nij,nj->ni", chol[z], e)
    out.flush()
    del out


def peak_rss_mb() -> float:
    """Peak resident set size of this process image (VmHWM; unlike ru_maxrss it is not
    inherited from the parent across fork + exec)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mode: str, path: str, batches: int, laps: int, components: int) -> dict:
    """Runs in a subprocess: fit once, report seconds per lap and peak RSS."""
    import warnings

    import bnpcore
    from bnpcore import DPMixture

    base_mb = peak_rss_mb()
    common = dict(n_components=components, random_state=0, max_laps=laps, tol=0, init_subsample=20_000)
    if mode == "memoized-ooc":
        data = path
        est = DPMixture(algorithm="memoized", n_batches=batches, moves=(), **common)
    elif mode == "memoized-inmem":
        data = np.load(path)
        est = DPMixture(algorithm="memoized", n_batches=batches, moves=(), **common)
    elif mode == "full-inmem":
        data = np.load(path)
        est = DPMixture(algorithm="full", **common)
    else:
        raise ValueError(mode)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        est.fit(data)
    wall = time.perf_counter() - t0
    secs = np.diff(np.concatenate([[0.0], est.history_["seconds"]]))
    peak_mb = peak_rss_mb()
    return {
        "mode": mode,
        "seconds_per_lap": secs.tolist(),
        "median_seconds_per_lap": float(np.median(secs[1:] if len(secs) > 1 else secs)),
        "wall_seconds_fit": wall,
        "peak_rss_mb": peak_mb,
        "baseline_rss_mb": base_mb,
        "elbo": est.history_["elbo"].tolist(),
        "K": int(est.summaries_.K),
        "stat_dim": int(est.summaries_.S.shape[1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--components", type=int, default=25)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--laps", type=int, default=3)
    ap.add_argument("--modes", default="memoized-ooc,full-inmem,memoized-inmem")
    ap.add_argument("--repeat", type=int, default=1, help="run the modes this many times, interleaved; keep each mode's fastest run")
    ap.add_argument("--path", default=None, help="where to write the .npy (default: a temporary directory)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.path, args.batches, args.laps, args.components)))
        return

    tmp = None
    if args.path is None:
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "gmm.npy"
    else:
        path = Path(args.path)
    t0 = time.perf_counter()
    write_dataset(path, args.rows, args.features, args.components)
    gen = time.perf_counter() - t0
    file_mb = path.stat().st_size / 2**20
    print(f"wrote {args.rows} x {args.features} ({file_mb:.0f} MB) to {path} in {gen:.1f} s")
    runs = []
    for _ in range(args.repeat):
        for mode in args.modes.split(","):
            cmd = [sys.executable, __file__, "--child", mode, "--path", str(path), "--batches", str(args.batches),
                   "--laps", str(args.laps), "--components", str(args.components)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), check=False)
            if proc.returncode != 0:
                print(proc.stderr)
                raise SystemExit(f"{mode} failed")
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    results = []
    for mode in args.modes.split(","):
        mine = [r for r in runs if r["mode"] == mode]
        best = min(mine, key=lambda r: r["median_seconds_per_lap"])
        best["all_median_seconds_per_lap"] = [r["median_seconds_per_lap"] for r in mine]
        best["max_peak_rss_mb"] = max(r["peak_rss_mb"] for r in mine)
        results.append(best)
    D, K, B = args.features, args.components, args.batches
    batch_mb = args.rows / B * D * 8 / 2**20
    summaries_mb = (B + 1) * K * (D + D * D + 2) * 8 / 2**20
    print()
    hdr = ("mode", "s/lap (median, laps 2+)", "peak RSS MB", "baseline MB", "peak - baseline MB")
    rows = [(r["mode"], f"{r['median_seconds_per_lap']:.3f}", f"{r['peak_rss_mb']:.0f}", f"{r['baseline_rss_mb']:.0f}",
             f"{r['peak_rss_mb'] - r['baseline_rss_mb']:.0f}") for r in results]
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(hdr)]
    print("  ".join(h.rjust(w) for h, w in zip(hdr, widths)))
    for x in rows:
        print("  ".join(v.rjust(w) for v, w in zip(x, widths)))
    by = {r["mode"]: r for r in results}
    if "memoized-ooc" in by and "full-inmem" in by:
        ratio = by["memoized-ooc"]["median_seconds_per_lap"] / by["full-inmem"]["median_seconds_per_lap"]
        print(f"\nper-lap time memoized-ooc / full-inmem = {ratio:.3f} (target <= 1.15)")
        print(f"memory budget: one batch {batch_mb:.1f} MB + summaries {summaries_mb:.1f} MB + 200 MB; "
              f"measured above baseline {by['memoized-ooc']['peak_rss_mb'] - by['memoized-ooc']['baseline_rss_mb']:.0f} MB")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "bench_memoized_ooc.json"
    out.write_text(json.dumps({"benchmark": "bench_memoized_ooc", "args": vars(args), "file_mb": file_mb,
                               "batch_mb": batch_mb, "summaries_mb": summaries_mb, "results": results,
                               "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu_count": os.cpu_count()}, indent=2))
    print(f"wrote {out}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
