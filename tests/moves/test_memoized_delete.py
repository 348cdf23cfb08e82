"""Deletes fire in memoized fits (thesis §4.4.1 experiment): data from one Gaussian, started at
K = 5, merges and deletes reach K = 1 with several batches, for every seed tried, with the ELBO
never decreasing (the suite turns ``ELBODecreaseWarning`` into an error) and every accepted delete
judged by the exact whole-dataset ELBO."""

import warnings

import bnpcore
import numpy as np
import pytest


@pytest.mark.parametrize(("dim", "seed"), [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (8, 0)])
def test_memoized_deletes_reach_one_cluster(dim, seed):
    X = np.random.default_rng(seed).normal(size=(25_000, dim))
    model = bnpcore.DPMixture(
        obs="gauss", n_components=5, algorithm="memoized", n_batches=5, moves=("merge", "delete"), max_laps=40, random_state=seed
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model.fit(X)
    assert model.n_components_ == 1
    assert model.summaries_.K == 1
    accepted = [r for r in model.moves_log_ if r["accepted"]]
    assert len(accepted) == 4  # 5 -> 1, one cluster per accepted merge or delete
    for r in accepted:
        assert r["elbo_after"] > r["elbo_before"]
    if dim == 1:  # in 1-D every pairwise merge lowers the ELBO: only deletes can get there
        assert "delete" in [r["kind"] for r in accepted]
    elbo = model.history_["elbo"]
    assert np.all(np.diff(elbo[1:]) >= -1e-9 * np.abs(elbo[1:-1]))
    assert model.history_["n_components"][-1] == 1
    assert len(elbo) <= 40
