"""Full-dataset VB on a 25-cluster Gaussian mixture: bnpcore vs scikit-learn, same run.

Both fit a DP mixture with full covariances from 50 initial clusters for the same number of
iterations (tol=0 on both sides); bnpcore runs twice, without moves (scikit-learn's algorithm)
and with its default birth/merge/delete moves. Reported: seconds per iteration (initialisation excluded on
both sides), their ratio, and the held-out log-likelihood per row computed by one plug-in
function on each system's weights_/means_/covariances_.

    python benches/bench_full_vs_sklearn.py               # 100,000 x 16, 50 clusters, 30 iterations
    python benches/bench_full_vs_sklearn.py --rows 20000  # quicker
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import plugin_loglik, save, table


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--clusters", type=int, default=25)
    p.add_argument("--components", type=int, default=50)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    import bnpcore
    from bnpcore.datasets import make_gaussian_mixture
    from sklearn.metrics import adjusted_rand_score
    from sklearn.mixture import BayesianGaussianMixture

    X_all, y_all = make_gaussian_mixture(
        n_samples=a.rows + a.rows // 5, n_features=a.features, n_components=a.clusters, random_state=a.seed
    )
    X, y = X_all[: a.rows], y_all[: a.rows]
    Xt = X_all[a.rows :]

    warnings.simplefilter("ignore")
    # bnpcore: time the laps only (history_['seconds'] excludes initialisation)
    # the same algorithm as scikit-learn's (no moves), then what a user gets by default
    # (birth/merge/delete on full-dataset fits too)
    t0 = time.perf_counter()
    ours = bnpcore.DPMixture(
        "gauss", n_components=a.components, algorithm="full", max_laps=a.iters, tol=0.0, random_state=a.seed, moves=()
    ).fit(X)
    ours_total = time.perf_counter() - t0
    ours_iter = ours.history_["seconds"][-1] / len(ours.history_["seconds"])
    t0 = time.perf_counter()
    dflt = bnpcore.DPMixture(
        "gauss", n_components=a.components, algorithm="full", max_laps=a.iters, tol=0.0, random_state=a.seed
    ).fit(X)
    dflt_total = time.perf_counter() - t0
    dflt_iter = dflt.history_["seconds"][-1] / len(dflt.history_["seconds"])

    # scikit-learn: per-iteration time measured by subtracting a max_iter=1 fit (same init)
    kw = dict(
        n_components=a.components,
        covariance_type="full",
        weight_concentration_prior_type="dirichlet_process",
        tol=0.0,
        random_state=a.seed,
        init_params="k-means++",
    )
    t0 = time.perf_counter()
    BayesianGaussianMixture(max_iter=1, **kw).fit(X)
    sk_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    sk = BayesianGaussianMixture(max_iter=a.iters, **kw).fit(X)
    sk_total = time.perf_counter() - t0
    sk_iter = (sk_total - sk_one) / max(a.iters - 1, 1)

    ll_ours = plugin_loglik(ours.weights_, ours.means_, ours.covariances_, Xt).mean()
    ll_sk = plugin_loglik(sk.weights_, sk.means_, sk.covariances_, Xt).mean()
    ari_ours = adjusted_rand_score(y, ours.predict(X))
    ari_sk = adjusted_rand_score(y, sk.predict(X))
    k_sk = int(np.sum(sk.weights_ * a.rows >= 1.0))
    ll_dflt = plugin_loglik(dflt.weights_, dflt.means_, dflt.covariances_, Xt).mean()
    ari_dflt = adjusted_rand_score(y, dflt.predict(X))
    rows = [
        ["bnpcore (moves off)", f"{ours_iter * 1e3:.1f}", f"{ours_total:.2f}", f"{ll_ours:.4f}", ours.n_components_, f"{ari_ours:.3f}"],
        ["bnpcore (default moves)", f"{dflt_iter * 1e3:.1f}", f"{dflt_total:.2f}", f"{ll_dflt:.4f}", dflt.n_components_, f"{ari_dflt:.3f}"],
        ["scikit-learn", f"{sk_iter * 1e3:.1f}", f"{sk_total:.2f}", f"{ll_sk:.4f}", k_sk, f"{ari_sk:.3f}"],
    ]
    print(f"N={a.rows} D={a.features} true K={a.clusters} initial K={a.components} iterations={a.iters}")
    print(table(rows, ["system", "ms/iter", "total s", "heldout ll/row", "K(N>=1)", "ARI"]))
    print(f"speed-up per iteration: {sk_iter / ours_iter:.1f}x (moves off, the same algorithm), {sk_iter / dflt_iter:.1f}x "
          f"(default moves); held-out difference (ours - sklearn): {ll_ours - ll_sk:+.4f} / {ll_dflt - ll_sk:+.4f} nats/row")
    save(
        "full_vs_sklearn",
        {
            "args": vars(a),
            "bnpcore_ms_per_iter": ours_iter * 1e3,
            "sklearn_ms_per_iter": sk_iter * 1e3,
            "speedup_per_iter": sk_iter / ours_iter,
            "bnpcore_default_moves_ms_per_iter": dflt_iter * 1e3,
            "speedup_per_iter_default_moves": sk_iter / dflt_iter,
            "heldout_bnpcore": ll_ours,
            "heldout_sklearn": ll_sk,
            "ari_bnpcore": ari_ours,
            "ari_sklearn": ari_sk,
        },
    )


if __name__ == "__main__":
    main()
