"""Shared fixtures: small synthetic data sets for every observation model."""

import numpy as np
import pytest

OBS_KINDS = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")


def synthetic_data(kind, n=240, n_clusters=3, seed=0, D=None):
    """Rows from a well-separated ``n_clusters``-component mixture of the given observation model.

    gauss/diag_gauss: Gaussian blobs in 2-D; zero_mean_gauss: zero-mean Gaussians with different
    covariance orientations; mult: count vectors (20 tokens) from distinct word distributions;
    bern: binary vectors from distinct prototypes with 10 % flips.
    """
    rng = np.random.default_rng(seed)
    z = np.arange(n) % n_clusters
    rng.shuffle(z)
    if kind in ("gauss", "diag_gauss"):
        D = D or 2
        centres = 8.0 * rng.standard_normal((n_clusters, D))
        return centres[z] + rng.standard_normal((n, D)), z
    if kind == "zero_mean_gauss":
        D = D or 2
        X = np.empty((n, D))
        for c in range(n_clusters):
            A = rng.standard_normal((D, D)) * np.exp(rng.uniform(-1.0, 1.5, size=D))
            idx = z == c
            X[idx] = rng.standard_normal((idx.sum(), D)) @ A.T
        return X, z
    if kind == "mult":
        D = D or 12
        topics = rng.dirichlet(np.full(D, 0.2), size=n_clusters)
        return np.array([rng.multinomial(20, topics[c]) for c in z], dtype=float), z
    D = D or 10
    protos = rng.random((n_clusters, D)) < 0.5
    flips = rng.random((n, D)) < 0.1
    return (protos[z] ^ flips).astype(float), z


@pytest.fixture
def make_data():
    return synthetic_data


def tree_total(memos):
    """Σ memos by the fixed binary tree over the batch index that FitState uses for G
    (an independent re-statement of the documented order, so tests can demand bit equality)."""

    def rec(lo, hi):
        if hi - lo == 1:
            return memos[lo]
        mid = (lo + hi) // 2
        a, b = rec(lo, mid), rec(mid, hi)
        return a if b is None else (b if a is None else a + b)

    return rec(0, len(memos))
