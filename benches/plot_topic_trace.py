"""Held-out score against fitting time of the topic models and their peers (one corpus, one seed).

Reads the JSON written by ``bench_topic.py --trace [--hdp-passes N]`` and draws, for the chosen
corpus and seed, the held-out score (nats per token, document completion) against seconds on a
log axis: bnpcore's HDP after every lap (the scoring not counted in its time) ending at its
converged fit, gensim's ``HdpModel`` after every pass when ``--hdp-passes`` was given, and every
other method as one point at its final time and score. Usage::

    python benches/bench_topic.py --corpus bars --trace --hdp-passes 20
    python benches/plot_topic_trace.py bench_results/bench_topic.json [--corpus bars] [--out docs/img/topic_time_quality.png]
"""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

#: colour by library, marker by model (HDP triangles, LDA circles; bnpcore's LDA without moves a cross)
COLOURS = {"bnpcore": "tab:blue", "gensim": "tab:red", "tomotopy": "tab:green", "sklearn": "tab:purple"}


def _marker(method: str) -> str:
    if "no moves" in method:
        return "x"
    return "^" if "HDP" in method else "o"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--corpus", default="bars")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench_results/topic_time_quality.png")
    ap.add_argument("--ymin", type=float, default=None, help="lower limit of the score axis (default: matplotlib's)")
    args = ap.parse_args()
    with open(args.results) as fh:
        rows = [r for r in json.load(fh).get(args.corpus, []) if r["seed"] == args.seed]
    ours = next((r for r in rows if r["method"] == "bnpcore HDPTopicModel" and "trace" in r), None)
    if ours is None:
        raise SystemExit(f"no bnpcore HDP trace for corpus {args.corpus!r}, seed {args.seed}: run bench_topic.py --trace")
    fig, ax = plt.subplots(figsize=(8.0, 6.2))
    tr = [x for x in ours["trace"] if x["seconds"] > 0]
    ax.plot([x["seconds"] for x in tr], [x["heldout_per_token"] for x in tr], "-o", color=COLOURS["bnpcore"], ms=3.5,
            label=f"bnpcore HDPTopicModel, per lap ({ours['n_topics']} topics at convergence)")
    for r in rows:
        if r is ours:
            continue
        if r["method"].startswith("gensim HdpModel,") and "trace" in r:
            ax.plot([x["seconds"] for x in r["trace"]], [x["heldout_per_token"] for x in r["trace"]], "-^", color=COLOURS["gensim"], ms=3.5,
                    label=f"gensim HdpModel, per pass ({r['trace'][-1]['n_topics']} topics after {r['passes']})")
            continue
        if r["method"] == "gensim HdpModel" and any(x["method"].startswith("gensim HdpModel,") for x in rows):
            continue  # its one default pass is the first point of the per-pass curve
        lib = r["method"].split()[0]
        ax.plot([r["seconds"]], [r["heldout_per_token"]], _marker(r["method"]), color=COLOURS.get(lib, "black"), ms=7,
                label=f"{r['method']} ({r['n_topics']} topics)")
    ax.set_xscale("log")
    ax.set_xlabel("seconds (this machine, 2 cores)")
    ax.set_ylabel("held-out log likelihood per token (nats)")
    if args.ymin is not None:
        ax.set_ylim(bottom=args.ymin)
    ax.set_title(f"{args.corpus}: held-out score against fitting time (seed {args.seed})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(args.out, dpi=130)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
