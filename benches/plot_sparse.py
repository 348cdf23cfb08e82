"""Held-out score against training time for L-sparse and dense runs (spec 04 §6.1, Fig. 2).

Reads the JSON written by ``bench_sparse.py --heldout-every N`` (one or more files) and draws,
for each K, the held-out log-likelihood per patch against the cumulative seconds of the timed
laps, one curve per (L, seed) (``--x lap``: against the lap); the dense run is black, L-sparse runs
without the dense first lap (``dense_laps=0``) are dashed red. Usage::

    python benches/plot_sparse.py bench_results/bench_sparse.json [more.json ...] [--out docs/img/sparse_heldout.png]
"""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out", default="bench_results/sparse_heldout.png")
    ap.add_argument("--x", choices=["seconds", "lap"], default="seconds",
                    help="horizontal axis: cumulative seconds of the timed laps, or the lap")
    args = ap.parse_args()
    runs = []
    for path in args.results:
        with open(path) as fh:
            d = json.load(fh)
        for r in d["runs"]:
            if r.get("heldout_trace"):
                runs.append({**r, "rows": d["rows"], "algorithm": d.get("algorithm", "full")})
    if not runs:
        raise SystemExit("no held-out traces: run bench_sparse.py with --heldout-every N")
    Ks = sorted({r["K"] for r in runs})
    fig, axes = plt.subplots(1, len(Ks), figsize=(5.5 * len(Ks), 4.0), squeeze=False)
    colours = {1: "tab:red", 2: "tab:orange", 4: "tab:blue", 8: "tab:green", 16: "tab:purple"}
    for ax, K in zip(axes[0], Ks):
        labelled = set()
        for r in (r for r in runs if r["K"] == K):
            lap, sec, score = zip(*r["heldout_trace"])
            name = "dense" if r["dense"] else f"L={r['L']}"
            style = "-o"
            if not r["dense"] and r.get("dense_laps") == 0:
                name += ", no dense first lap"
                style = "--x"
            colour = "black" if r["dense"] else colours.get(r["L"], "tab:gray")
            if style == "--x":
                colour = "tab:red"
            # wide L-sparse lines under thin dense ones, so that coinciding curves stay visible
            width = 1.2 if r["dense"] or style == "--x" else 4.0
            ax.plot(lap if args.x == "lap" else sec, score, style, ms=4, color=colour, lw=width,
                    zorder=3 if r["dense"] else 2,
                    alpha=0.9 if r.get("seed", 0) == 0 else 0.45, label=None if name in labelled else name)
            labelled.add(name)
        r0 = next(r for r in runs if r["K"] == K)
        if args.x == "seconds":
            ax.set_xscale("log")
            ax.set_xlabel("training seconds (timed laps)")
        else:
            ax.set_xlabel("lap")
        ax.set_ylabel("held-out log-likelihood (nats/patch)")
        seeds = sorted({r.get("seed", 0) for r in runs if r["K"] == K})
        ax.set_title(f"K={K}, {r0['rows']:,} patches, {r0['algorithm']}, seeds {', '.join(map(str, seeds))}")
        ax.legend(fontsize="small", loc="lower right")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
