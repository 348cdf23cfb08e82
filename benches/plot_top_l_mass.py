"""How much of each row's dense responsibility the top L clusters keep, on image patches, at the
initial clusters and after one and ten dense laps (spec 04 §6.1, Fig. 1d analogue; the reason
for the estimators' ``dense_laps=1``).

Usage::

    python benches/plot_top_l_mass.py [--k 200] [--rows 265860] [--eval-rows 20000] [--out bench_results/top_l_mass.png]

Prints the mean mass kept and the mean −log m (the per-row ELBO an L-sparse step gives up at
those global parameters) for L in 1, 2, 4, 8, 16, 64.
"""

from __future__ import annotations

import argparse
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from bnpcore import DPMixture
from bnpcore.datasets import load_image_patches
from bnpcore.plotting import plot_top_l_mass

LEVELS = (1, 2, 4, 8, 16, 64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--rows", type=int, default=265_860)
    ap.add_argument("--eval-rows", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench_results/top_l_mass.png")
    args = ap.parse_args()
    X, img = load_image_patches(stride=1, return_image_index=True)
    X = np.ascontiguousarray(X[img == 0])
    X = np.ascontiguousarray(X[np.linspace(0, X.shape[0] - 1, min(args.rows, X.shape[0])).astype(np.int64)])
    E = X[np.linspace(0, X.shape[0] - 1, args.eval_rows).astype(np.int64)]
    m = DPMixture(obs="zero_mean_gauss", n_components=args.k, algorithm="memoized", n_batches=20, moves=(),
                  init_subsample=20_000, random_state=args.seed, warm_start=True, max_laps=1)
    m._validate_params()
    source = m._make_source(X)
    m._initialize(source)
    m._finalize(m._make_model(m.obs_model_))
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.2))
    done = 0
    for ax, laps in zip(axes, (0, 1, 10)):
        if laps > done:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.set_params(max_laps=laps - done).fit(X)
            done = laps
        mass = m.top_l_mass(E, LEVELS)
        print(f"after {laps:2d} laps: mean mass kept " + "  ".join(f"L={L}: {v:.4f}" for L, v in zip(LEVELS, mass.mean(0)))
              + " | mean -log m " + "  ".join(f"{v:.2g}" for v in -np.log(mass).mean(0)), flush=True)
        plot_top_l_mass(m, E, LEVELS, ax=ax)
        ax.set_title(f"K={args.k}: {'initial clusters' if laps == 0 else f'after {laps} dense lap' + ('s' if laps > 1 else '')}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
