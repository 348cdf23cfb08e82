"""A callback returning True stops the fit cleanly after that lap (issue 14 item 4)."""

import warnings

import bnpcore
import numpy as np
import pytest


def _X():
    rng = np.random.default_rng(0)
    return np.r_[rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 6.0]


@pytest.mark.parametrize("algorithm", ["full", "memoized", "stochastic"])
def test_callback_returning_true_stops_after_that_lap(algorithm, tmp_path):
    seen = []

    def stop_at_three(model, info):
        seen.append(info["lap"])
        return info["lap"] == 3

    model = bnpcore.DPMixture(
        n_components=4, algorithm=algorithm, n_batches=2, max_laps=50, random_state=0, callback=stop_at_three,
        checkpoint_path=str(tmp_path / "ck.npz"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConvergenceWarning when the callback stopped the fit
        model.fit(_X())
    assert seen == [1, 2, 3]
    assert model.n_iter_ == 3 and not model.converged_
    assert list(model.history_["lap"]) == [1, 2, 3]
    # the model is usable and the checkpoint holds the stopped state
    again = bnpcore.load(tmp_path / "ck.npz")
    assert np.array_equal(again.predict(_X()), model.predict(_X()))


def test_other_return_values_do_not_stop():
    seen = []
    model = bnpcore.DPMixture(n_components=4, max_laps=4, min_laps=4, tol=0.0, random_state=0,
                              callback=lambda m, info: seen.append(info["lap"]) or 1)  # truthy but not True
    with pytest.warns(bnpcore.ConvergenceWarning):
        model.fit(_X())
    assert seen == [1, 2, 3, 4]


@pytest.mark.parametrize("algorithm", ["memoized", "truncation_free"])
def test_numpy_true_stops_like_true(algorithm):
    # `return delta < tol` on numpy floats returns np.True_, not True
    seen = []

    def stop_at_two(model, info):
        seen.append(info["lap"])
        return np.float64(info["lap"]) >= 2.0

    if algorithm == "truncation_free":
        model = bnpcore.HDPTopicModel(algorithm=algorithm, max_laps=5, random_state=0, callback=stop_at_two)
        model.fit(np.random.default_rng(0).poisson(1.0, (20, 12)))
    else:
        model = bnpcore.DPMixture(n_components=4, max_laps=5, min_laps=5, tol=0.0, random_state=0, callback=stop_at_two)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # stopped: no ConvergenceWarning
            model.fit(_X())
    assert seen == [1, 2]
    assert model.n_iter_ == 2 and not model.converged_
