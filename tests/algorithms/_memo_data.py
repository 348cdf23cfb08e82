"""Small seeded datasets for every observation model (shared by the algorithm and io tests)."""

import numpy as np

OBS = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")


def make_data(obs: str, n: int = 600, d: int = 3, k: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.integers(0, k, size=n)
    if obs in ("gauss", "diag_gauss"):
        centers = rng.normal(0, 4, size=(k, d))
        return centers[z] + rng.normal(size=(n, d))
    if obs == "zero_mean_gauss":
        scales = rng.uniform(0.3, 3.0, size=(k, d))
        return rng.normal(size=(n, d)) * scales[z]
    if obs == "mult":
        p = rng.dirichlet(np.full(2 * d, 0.3), size=k)
        return np.stack([rng.multinomial(20, p[j]) for j in z]).astype(np.float64)
    if obs == "bern":
        p = rng.uniform(0.05, 0.95, size=(k, 2 * d))
        return (rng.random((n, 2 * d)) < p[z]).astype(np.float64)
    raise ValueError(obs)
