"""The finite HMM's fixed-K swap move, the default move of ``FiniteHMM``
(:mod:`bnpcore.moves.hmm`): the largest state and the smallest other one are replaced by two
fresh states fitted to the largest state's time steps, accepted only when the objective rises;
the number of states never changes."""

from __future__ import annotations

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore import HDPHMM, ConvergenceWarning, FiniteHMM, ParameterError
from bnpcore.datasets import make_sticky_hmm
from sklearn.metrics import adjusted_rand_score


@pytest.fixture(scope="module")
def toy():
    X, lengths, states = make_sticky_hmm("gauss", random_state=1)[:3]
    return X, lengths, states


def _fit(model, X, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, lengths)


def test_swap_is_the_default_and_finds_the_states(toy):
    """On the sticky toy at the true K = 8 the fit without moves merges states (ARI < 0.95);
    the default fit's swaps find all eight, each raising the objective, with K kept and the
    history never falling."""
    X, lengths, states = toy
    a = _fit(FiniteHMM(n_components=8, random_state=0), X, lengths)
    b = _fit(FiniteHMM(n_components=8, moves=(), random_state=0), X, lengths)
    assert a.get_params()["moves"] is None and b.moves_log_ == []
    accepted = [r for r in a.moves_log_ if r["accepted"]]
    assert accepted and {r["kind"] for r in a.moves_log_} == {"swap"}
    for r in accepted:
        assert r["elbo_after"] > r["elbo_before"] and len(r["uids"]) == 2 and len(r["new_uids"]) == 2
    assert a.state_.stats.K == b.state_.stats.K == 8
    assert adjusted_rand_score(states, b.predict(X, lengths)) < 0.95
    assert adjusted_rand_score(states, a.predict(X, lengths)) > 0.99
    assert a.elbo_ > b.elbo_ + 1000.0
    e = a.history_["elbo"]
    assert np.all(np.diff(e) >= -1e-9 * np.abs(e[1:]))


def test_swaps_stop_at_the_first_rejection(toy):
    X, lengths, _ = toy
    for seed in (0, 1, 2):
        flags = [r["accepted"] for r in _fit(FiniteHMM(n_components=8, random_state=seed), X, lengths).moves_log_]
        assert flags.count(False) <= 1 and (False not in flags or flags[-1] is False)


def test_swap_resumes_to_the_same_fit(toy, tmp_path):
    """3 laps + save + load + 3 laps equal 6 laps, with swaps in both halves."""
    X, lengths, _ = toy
    kw = dict(n_components=8, n_batches=2, tol=0, random_state=0)
    six = _fit(FiniteHMM(max_laps=6, **kw), X, lengths)
    assert any(r["accepted"] for r in six.moves_log_ if r["lap"] <= 3) and any(r["lap"] > 3 for r in six.moves_log_)
    three = _fit(FiniteHMM(max_laps=3, **kw), X, lengths)
    three.save(tmp_path / "h.bnp")
    loaded = bnpcore.load(tmp_path / "h.bnp")
    loaded.set_params(warm_start=True)
    _fit(loaded, X, lengths)
    np.testing.assert_array_equal(loaded.history_["elbo"], six.history_["elbo"])
    assert loaded.moves_log_ == six.moves_log_


def test_swap_fit_is_the_same_for_any_thread_count(toy):
    X, lengths, _ = toy
    a = _fit(FiniteHMM(n_components=8, n_threads=1, random_state=0), X, lengths)
    b = _fit(FiniteHMM(n_components=8, n_threads=2, random_state=0), X, lengths)
    assert any(r["accepted"] for r in a.moves_log_) and a.moves_log_ == b.moves_log_
    np.testing.assert_array_equal(a.history_["elbo"], b.history_["elbo"])


def test_auto_regressive_states_swap(toy):
    """The swap's fresh states of an auto-regressive HMM come from the k-means of [x_t, x_t-1]
    (as its births'): on the AR toy the default fit ends above the fit without moves."""
    X, lengths, _ = make_sticky_hmm("ar", n_seqs=10, seq_len=500, random_state=2)[:3]
    a = _fit(FiniteHMM("ar_gauss", n_components=6, random_state=0), X, lengths)
    b = _fit(FiniteHMM("ar_gauss", n_components=6, moves=(), random_state=0), X, lengths)
    assert any(r["accepted"] for r in a.moves_log_)
    assert a.elbo_ > b.elbo_


def test_no_swap_in_a_stream_or_when_switched_off(toy):
    X, lengths, _ = toy
    assert _fit(FiniteHMM(n_components=8, algorithm="stochastic", max_laps=2, random_state=0), X, lengths).moves_log_ == []
    assert _fit(FiniteHMM(n_components=8, max_births_per_lap=0, random_state=0), X, lengths).moves_log_ == []


@pytest.mark.parametrize(
    "cls, moves, match",
    [(FiniteHMM, ("merge",), "HDPHMM"), (FiniteHMM, "birth", "HDPHMM"), (HDPHMM, ("swap",), "FiniteHMM"), (FiniteHMM, ("swap", "x"), "subset")],
)
def test_move_kinds_by_estimator(toy, cls, moves, match):
    X, lengths, _ = toy
    with pytest.raises(ParameterError, match=match):
        cls(n_components=3, moves=moves).fit(X, lengths)
