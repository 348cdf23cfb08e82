"""The finite mixture's fixed-K swap move, the default move of ``FiniteMixture``
(:mod:`bnpcore.moves.swap`): the worst-explained cluster is split by the births' fresh-cluster fit
and replaces itself and the smallest other clusters, accepted only when the objective rises; the
number of clusters never changes."""

from __future__ import annotations

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore import ConvergenceWarning, DPMixture, FiniteMixture, ParameterError
from bnpcore.datasets import make_gaussian_mixture
from sklearn.metrics import adjusted_rand_score


@pytest.fixture(scope="module")
def data():
    return make_gaussian_mixture(n_samples=10_000, random_state=0)


def _fit(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X)


def test_swap_is_the_default_and_finds_the_clusters(data):
    """On the 25-cluster benchmark at the true K the fit without moves puts several clusters
    under one component (ARI < 0.9); the default fit's swaps separate them, each raising the
    objective, with K kept and the history never falling."""
    X, y = data
    a = _fit(FiniteMixture(n_components=25, random_state=0), X)
    b = _fit(FiniteMixture(n_components=25, moves=(), random_state=0), X)
    assert a.get_params()["moves"] is None and b.moves_log_ == []
    accepted = [r for r in a.moves_log_ if r["accepted"]]
    assert accepted and {r["kind"] for r in a.moves_log_} == {"swap"}
    for r in accepted:
        assert r["elbo_after"] > r["elbo_before"] and len(r["new_uids"]) == len(r["uids"]) >= 2
    assert a.weights_.shape == b.weights_.shape == (25,)
    assert adjusted_rand_score(y, b.predict(X)) < 0.9
    assert adjusted_rand_score(y, a.predict(X)) > 0.97
    assert a.elbo_ > b.elbo_ + 1000.0
    e = a.history_["elbo"][1:]
    assert np.all(np.diff(e) >= -1e-9 * np.abs(e[1:]))


def test_a_converged_fit_has_tried_every_cluster(data):
    """The fit does not stop while a cluster is untried at the final structure: the lap that
    meets the convergence test is followed by one that judges every untried cluster."""
    X, _ = data
    m = _fit(FiniteMixture(n_components=25, random_state=0), X)
    assert m.converged_
    assert m.moves_manager_._untried(m.moves_manager_._model, m.moves_manager_._last_stats) == []


def test_at_most_two_rejections_per_structure():
    """After two proposals rejected on the whole data none is made at that structure: on a
    thousand image patches the fit converges instead of running to max_laps."""
    from bnpcore.datasets import load_image_patches

    X = load_image_patches(images=("china.jpg",))[::4]
    m = _fit(FiniteMixture(obs="zero_mean_gauss", n_components=50, random_state=0), X)
    assert m.converged_ and m.n_iter_ < 20
    rejected = {}
    version = 0
    for r in m.moves_log_:
        if r["accepted"]:
            version += 1
        else:
            rejected[version] = rejected.get(version, 0) + 1
    assert rejected and max(rejected.values()) <= 2


def test_swap_resumes_to_the_same_fit(data, tmp_path):
    """3 laps + save + load + 3 laps equal 6 laps, with swaps in both halves."""
    X, _ = data
    kw = dict(n_components=25, n_batches=2, algorithm="memoized", tol=0, random_state=1)
    six = _fit(FiniteMixture(max_laps=6, **kw), X)
    assert any(r["accepted"] for r in six.moves_log_ if r["lap"] <= 3) and any(r["lap"] > 3 for r in six.moves_log_)
    three = _fit(FiniteMixture(max_laps=3, **kw), X)
    three.save(tmp_path / "m.bnp")
    loaded = bnpcore.load(tmp_path / "m.bnp")
    loaded.set_params(warm_start=True)
    _fit(loaded, X)
    np.testing.assert_array_equal(loaded.history_["elbo"], six.history_["elbo"])
    assert loaded.moves_log_ == six.moves_log_


def test_swap_fit_is_the_same_for_any_thread_count(data):
    X, _ = data
    a = _fit(FiniteMixture(n_components=25, n_threads=1, random_state=1), X)
    b = _fit(FiniteMixture(n_components=25, n_threads=2, random_state=1), X)
    assert any(r["accepted"] for r in a.moves_log_) and a.moves_log_ == b.moves_log_
    np.testing.assert_array_equal(a.history_["elbo"], b.history_["elbo"])


def test_no_swap_in_a_stream_or_when_switched_off(data):
    X, _ = data
    assert _fit(FiniteMixture(n_components=25, algorithm="stochastic", max_laps=2, random_state=0), X).moves_log_ == []
    assert _fit(FiniteMixture(n_components=25, max_births_per_lap=0, random_state=0), X).moves_log_ == []


@pytest.mark.parametrize(
    "cls, moves, match",
    [(FiniteMixture, ("merge",), "DPMixture"), (FiniteMixture, "birth", "DPMixture"), (DPMixture, ("swap",), "FiniteMixture"),
     (FiniteMixture, ("swap", "x"), "subset")],
)
def test_move_kinds_by_estimator(data, cls, moves, match):
    X, _ = data
    with pytest.raises(ParameterError, match=match):
        cls(n_components=3, moves=moves).fit(X)
