"""README demo: a DP mixture of zero-mean Gaussians on 8×8 natural-image patches.

Loads the gray 8×8 patches (stride 4: 33,390 patches, per-patch mean removed) of the two
photographs bundled with scikit-learn and fits :class:`bnpcore.DPMixture` with a zero-mean
Gaussian likelihood by memoized variational inference **starting from a single cluster**:
birth, merge and delete moves, each accepted only if the exact ELBO rises, find the number of
clusters. For comparison it also fits the same model from 30 clusters without moves. It prints
the number of clusters found, the ELBO after every lap, the moves accepted and the largest
weights, and saves two figures:

* ``<output>/patch_components.png`` -- top-3 covariance eigenvectors of the largest clusters
  (edge- and texture-like filters);
* ``<output>/history.png`` -- ELBO and number of clusters per lap, accepted moves marked.

Run from the repository root (takes well under a minute)::

    python examples/demo_patches.py --output demo_output
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def parse_args(argv=None):
    """Command-line options of the demo."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="demo_output", help="directory for the figures")
    parser.add_argument("--laps", type=int, default=50, help="maximum number of laps")
    parser.add_argument("--n-components", type=int, default=1, help="initial number of clusters")
    parser.add_argument("--batches", type=int, default=8, help="number of memoized batches")
    parser.add_argument("--baseline-components", type=int, default=30, help="K of the comparison fit without moves (0: skip it)")
    parser.add_argument(
        "--stride", type=int, default=4, help="patch stride in pixels (4: 33,390 rows; 8: 8,480 rows)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random_state of the estimator")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import bnpcore
    import matplotlib.pyplot as plt
    from bnpcore.datasets import load_image_patches
    from bnpcore.plotting import plot_history, plot_patch_components

    t0 = time.perf_counter()
    X = load_image_patches(stride=args.stride, patch_size=8, zero_mean=True)
    print(
        f"data: {X.shape[0]:,} patches x {X.shape[1]} pixels (stride {args.stride}, mean removed)"
    )

    model = bnpcore.DPMixture(
        obs="zero_mean_gauss",
        n_components=args.n_components,
        gamma=10.0,
        algorithm="memoized",
        n_batches=args.batches,
        max_laps=args.laps,
        random_state=args.seed,
        verbose=True,
    )
    t_fit = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model.fit(X)
    fit_seconds = time.perf_counter() - t_fit

    print()
    print(f"clusters found: {model.n_components_} (started from {args.n_components})")
    status = "converged" if model.converged_ else f"stopped at the demo's cap of {args.laps} laps, not yet converged"
    print(f"laps: {model.n_iter_} ({status}), fit time {fit_seconds:.1f} s, final ELBO {model.elbo_:.6g}")

    history = model.history_
    print()
    print(f"{'lap':>6} {'ELBO':>16} {'clusters':>9} {'seconds':>9}")
    for lap, elbo, n_comp, sec in zip(
        history["lap"], history["elbo"], history["n_components"], history["seconds"]
    ):
        print(f"{float(lap):6g} {float(elbo):16.6g} {int(n_comp):9d} {float(sec):9.2f}")

    accepted = [r for r in model.moves_log_ if r["accepted"]]
    kinds = {k: sum(r["kind"] == k for r in accepted) for k in ("birth", "merge", "delete")}
    print()
    print(
        f"moves: {len(model.moves_log_)} proposals, accepted "
        + ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in kinds.items())
    )

    if args.baseline_components > 0:
        baseline = bnpcore.DPMixture(
            obs="zero_mean_gauss",
            n_components=args.baseline_components,
            gamma=10.0,
            algorithm="memoized",
            n_batches=args.batches,
            moves=(),
            max_laps=args.laps,
            random_state=args.seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
            baseline.fit(X)
        print(
            f"comparison: from K={args.baseline_components} without moves -> {baseline.n_components_} clusters, "
            f"ELBO {baseline.elbo_:.6g} (with moves from K={args.n_components}: {model.elbo_:.6g}, "
            f"{'higher' if model.elbo_ > baseline.elbo_ else 'lower'})"
        )

    weights = np.asarray(model.weights_)
    order = np.argsort(-weights)[:10]
    print()
    print("largest weights: " + ", ".join(f"#{k}: {weights[k]:.3f}" for k in order))

    os.makedirs(args.output, exist_ok=True)
    fig = plot_patch_components(model, n_show=16, patch_size=8, kind="eigen")
    path_components = os.path.join(args.output, "patch_components.png")
    fig.savefig(path_components, dpi=120, bbox_inches="tight")
    plt.close(fig)
    fig = plot_history(model)
    path_history = os.path.join(args.output, "history.png")
    fig.savefig(path_history, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"saved {path_components} and {path_history}")
    print(f"total time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
