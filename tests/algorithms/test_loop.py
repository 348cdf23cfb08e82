"""The lap loop (``bnpcore.algorithms.loop``) driven directly, without an estimator: config
objects in, FitState updated in place, laps reported through ``on_lap``."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import synthetic_data, tree_total
from bnpcore.algorithms._base import FitState
from bnpcore.algorithms.loop import FitConfig, LapInfo, lap_top_l, run_laps
from bnpcore.algorithms.stochastic import StochasticConfig
from bnpcore.alloc import DPAlloc
from bnpcore.data.sources import ArrayBatches
from bnpcore.model import Model
from bnpcore.moves import MoveConfig, MoveManager
from bnpcore.obs import ObsModel, default_prior


def _setup(n_batches=3, K=5, seed=0):
    X, _ = synthetic_data("gauss", n=300, n_clusters=3, seed=seed)
    X = np.ascontiguousarray(X)
    model = Model(DPAlloc(1.0), ObsModel("gauss", default_prior("gauss", X)))
    stats = model.init_stats(X, K, "kmeans++", np.random.default_rng(seed))
    state = FitState(
        stats=stats, memos=[None] * n_batches, next_uid=K,
        rng_order=np.random.default_rng(seed + 1), rng_moves=np.random.default_rng(seed + 2), n_rows=X.shape[0],
    )
    return X, model, ArrayBatches(X, n_batches, seed=seed + 3, validated=True), state


def test_memoized_laps_without_an_estimator():
    X, model, source, state = _setup()
    seen = []
    converged = run_laps(model, source, state, FitConfig(algorithm="memoized", max_laps=4, min_laps=4, tol=0.0), on_lap=seen.append)
    assert converged is False
    assert [i.lap for i in seen] == [1, 2, 3, 4] and all(isinstance(i, LapInfo) for i in seen)
    elbo = np.asarray(state.history["elbo"])
    assert elbo.tolist() == [i.elbo for i in seen]
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[:-1]))
    # G is the fixed-tree sum of the memos, and summarises every row once
    G = tree_total(state.memos)
    np.testing.assert_array_equal(state.stats.N, G.N)
    assert state.stats.N.sum() == pytest.approx(X.shape[0])


def test_moves_take_a_config_not_an_estimator():
    _, model, source, state = _setup(n_batches=1, K=8)
    moves = MoveManager(MoveConfig(kinds=("merge", "delete"), max_per_lap={"merge": 5, "delete": 1}))
    assert [m.kind for m in moves.moves] == ["merge", "delete"] and moves.moves[0].max_per_lap == 5
    run_laps(model, source, state, FitConfig(algorithm="full", max_laps=10, tol=1e-8), moves=moves)
    assert any(r["accepted"] for r in state.moves_log)
    assert state.stats.K < 8
    with pytest.raises(ValueError, match="move_options"):
        MoveManager(MoveConfig(options={"no_such_option": 1}))


def test_stochastic_laps_use_their_config():
    _, model, source, state = _setup(n_batches=4)
    cfg = FitConfig(algorithm="stochastic", max_laps=2, stochastic=StochasticConfig(delay=3.0, decay=0.7, eval_every=2))
    run_laps(model, source, state, cfg)
    assert state.stochastic_step == 8
    assert np.isnan(state.history["elbo"][0]) and np.isfinite(state.history["elbo"][1])


def test_dense_to_sparse_schedule():
    cfg = FitConfig(top_l=2, dense_laps=2)
    _, _, _, state = _setup()
    laps = []
    for lap in range(4):
        state.lap = lap
        laps.append(lap_top_l(cfg, state))
    assert laps == [None, None, 2, 2]
    assert lap_top_l(FitConfig(top_l=None), state) is None
    assert lap_top_l(FitConfig(top_l=3, dense_laps=0), None) == 3
    with pytest.raises(ValueError, match="algorithm"):
        FitConfig(algorithm="gibbs")


def test_an_interrupted_lap_leaves_g_the_sum_of_the_memos():
    _, model, source, state = _setup()
    run_laps(model, source, state, FitConfig(algorithm="memoized", max_laps=1, min_laps=1, tol=0.0))
    calls = []
    orig = source.get

    def failing_get(b):
        calls.append(b)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return orig(b)

    source.get = failing_get
    with pytest.raises(KeyboardInterrupt):
        run_laps(model, source, state, FitConfig(algorithm="memoized", max_laps=3))
    G = tree_total(state.memos)
    np.testing.assert_array_equal(state.stats.N, G.N)
    np.testing.assert_array_equal(state.stats.S, G.S)
    assert state.lap == 1 and len(state.history["elbo"]) == 1
