"""LDA's fixed-K swap move, the default move of ``FiniteTopicModel`` (:mod:`bnpcore.moves.topic`):
the largest topic and the smallest other one are replaced by two topics split from the largest,
accepted only when the objective rises; the number of topics never changes."""

from __future__ import annotations

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore import ConvergenceWarning, FiniteTopicModel, HDPTopicModel, ParameterError
from bnpcore.datasets import make_bars


@pytest.fixture(scope="module")
def bars():
    return make_bars(n_docs=300, n_tokens=100, random_state=0)[0]


def _fit(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X)


def test_swap_is_the_default_and_raises_the_objective(bars):
    """From the same initial topics, the default fit (swaps) ends higher than the fit without
    moves, with the same number of topics; every accepted swap raised the objective, and the
    history never falls."""
    a = _fit(FiniteTopicModel(10, random_state=1), bars)
    b = _fit(FiniteTopicModel(10, moves=(), random_state=1), bars)
    assert a.get_params()["moves"] is None and b.moves_log_ == []
    log = a.moves_log_
    assert log and {r["kind"] for r in log} == {"swap"}
    accepted = [r for r in log if r["accepted"]]
    assert accepted, "no swap accepted on a fit that ends in a local optimum without moves"
    for r in accepted:
        assert r["elbo_after"] > r["elbo_before"] and len(r["uids"]) == 2 and len(r["new_uids"]) == 2
    assert a.topics_.shape == b.topics_.shape == (10, bars.shape[1])
    assert a.state_.stats.K == 10
    assert a.elbo_ > b.elbo_ + 1000.0
    e = a.history_["elbo"]
    assert np.all(np.diff(e) >= -1e-9 * np.abs(e[1:]))
    assert a.elbo_ == pytest.approx(a._make_model(a.obs_model_).elbo(a.state_.stats), rel=1e-12)


def test_swaps_stop_at_the_first_rejection(bars):
    """A rejected swap ends the proposals at that structure: for LDA, for good."""
    for seed in (0, 1, 2):
        log = _fit(FiniteTopicModel(10, random_state=seed), bars).moves_log_
        flags = [r["accepted"] for r in log]
        assert flags.count(False) <= 1 and (False not in flags or flags[-1] is False)


def test_swap_resumes_to_the_same_fit(bars, tmp_path):
    """3 laps + save + load + 3 laps equal 6 laps, with swaps accepted in both halves."""
    kw = dict(n_components=10, n_batches=3, tol=0, random_state=1)
    six = _fit(FiniteTopicModel(max_laps=6, **kw), bars)
    assert sum(r["accepted"] for r in six.moves_log_ if r["lap"] <= 3) >= 1
    assert any(r["lap"] > 3 for r in six.moves_log_)
    three = _fit(FiniteTopicModel(max_laps=3, **kw), bars)
    three.save(tmp_path / "m.bnp")
    loaded = bnpcore.load(tmp_path / "m.bnp")
    loaded.set_params(warm_start=True)
    _fit(loaded, bars)
    np.testing.assert_array_equal(loaded.history_["elbo"], six.history_["elbo"])
    np.testing.assert_array_equal(loaded.topics_, six.topics_)
    assert loaded.moves_log_ == six.moves_log_


def test_swap_fit_is_the_same_for_any_thread_count(bars):
    a = _fit(FiniteTopicModel(10, n_threads=1, random_state=2), bars)
    b = _fit(FiniteTopicModel(10, n_threads=2, random_state=2), bars)
    assert any(r["accepted"] for r in a.moves_log_)
    assert a.moves_log_ == b.moves_log_
    np.testing.assert_array_equal(a.history_["elbo"], b.history_["elbo"])
    np.testing.assert_array_equal(a.topics_, b.topics_)


def test_no_swap_in_a_stream_or_when_switched_off(bars):
    assert _fit(FiniteTopicModel(10, algorithm="stochastic", max_laps=2, random_state=0), bars).moves_log_ == []
    assert _fit(FiniteTopicModel(10, max_births_per_lap=0, random_state=1), bars).moves_log_ == []
    full = _fit(FiniteTopicModel(10, algorithm="full", random_state=1), bars)
    assert {r["kind"] for r in full.moves_log_} == {"swap"}


@pytest.mark.parametrize(
    "cls, moves, match",
    [
        (FiniteTopicModel, ("merge",), "HDPTopicModel"),
        (FiniteTopicModel, "birth", "HDPTopicModel"),
        (FiniteTopicModel, ("swap", "jump"), "subset"),
        (HDPTopicModel, ("swap",), "FiniteTopicModel"),
        (HDPTopicModel, ("birth", "swap"), "FiniteTopicModel"),
    ],
)
def test_move_kinds_by_estimator(bars, cls, moves, match):
    with pytest.raises(ParameterError, match=match):
        cls(4, moves=moves).fit(bars)


def test_plot_history_marks_accepted_swaps(bars):
    import matplotlib as mpl  # in the test extra: a missing matplotlib fails, it does not skip

    mpl.use("Agg")
    import matplotlib.pyplot as plt
    from bnpcore.plotting import plot_history

    m = _fit(FiniteTopicModel(10, random_state=1), bars)
    n = sum(r["accepted"] for r in m.moves_log_)
    try:
        labels = [t.get_text() for t in plot_history(m).axes[0].get_legend().get_texts()]
    finally:
        plt.close("all")
    assert any(lbl.startswith(f"swap ({n})") for lbl in labels)
