"""Defaults that find the number of clusters (issue 13 item 0): ``DPMixture()`` with every
argument at its default starts from one cluster and grows/prunes it with birth, merge and delete
moves in memoized laps, the number of batches chosen from the number of rows;
``FiniteMixture()`` keeps its K fixed."""

import numpy as np
import pytest
from _helpers import fit_quietly
from bnpcore import DPMixture, FiniteMixture
from bnpcore.datasets import make_gaussian_mixture
from bnpcore.estimators._engine import auto_n_batches
from sklearn.metrics import adjusted_rand_score


@pytest.mark.parametrize(
    ("n_rows", "expected"),
    [(1, 1), (500, 1), (9_999, 1), (10_000, 2), (25_000, 5), (49_999, 9), (50_000, 10), (100_000, 10),
     (5_000_000, 10), (5_000_001, 11), (20_000_000, 40)],
)
def test_auto_n_batches_rule(n_rows, expected):
    assert auto_n_batches(n_rows) == expected


def test_default_parameters():
    p = DPMixture().get_params()
    assert (p["n_components"], p["algorithm"], p["n_batches"], p["moves"]) == (None, "auto", None, None)
    assert DPMixture()._n_components() == 1 and FiniteMixture()._n_components() == 10
    assert DPMixture()._algorithm() == "memoized" and FiniteMixture()._algorithm() == "full"
    assert DPMixture()._moves_tuple() == ("birth", "merge", "delete")
    assert DPMixture(algorithm="full")._moves_tuple() == ("birth", "merge", "delete")
    assert DPMixture(algorithm="stochastic")._moves_tuple() == ()
    assert FiniteMixture()._moves_tuple() == ("swap",) and FiniteMixture(algorithm="memoized")._moves_tuple() == ("swap",)
    assert FiniteMixture(algorithm="stochastic")._moves_tuple() == ()


@pytest.mark.parametrize(("n", "k", "d", "sep"), [(500, 3, 2, 5.0), (12_000, 6, 3, 3.0)])
@pytest.mark.parametrize("seed", [0, 1])
def test_defaults_find_the_number_of_clusters(n, k, d, sep, seed):
    X, y = make_gaussian_mixture(n_samples=n, n_features=d, n_components=k, separation=sep, random_state=1)
    m = fit_quietly(DPMixture(random_state=seed), X)
    assert m.n_components_ == k
    # the clusters overlap a little: on the 500-row sample the partition with the highest ELBO
    # is not the generating one (seed 1 ends at ELBO -2051.00 with ARI 0.80, above the
    # -2051.12 of the ARI-0.90 partition), so the bound is on the labels' agreement only
    assert adjusted_rand_score(y, m.predict(X)) >= 0.75
    assert len(m.state_.memos) == auto_n_batches(n)
    assert any(r["kind"] == "birth" and r["accepted"] for r in m.moves_log_)  # grown from K = 1
    assert m.history_["n_components"][0] == 1


def test_finite_mixture_keeps_its_k():
    X, _ = make_gaussian_mixture(n_samples=500, n_features=2, n_components=3, separation=3.0, random_state=1)
    m = fit_quietly(FiniteMixture(random_state=0), X)
    assert m.summaries_.K == 10 and m.moves_log_ == []
    assert len(m.state_.memos) == 1


def test_full_with_default_moves_is_memoized_with_one_batch():
    """Below 10,000 rows the defaults run one batch: the full-dataset algorithm, moves included,
    trace for trace."""
    X, _ = make_gaussian_mixture(n_samples=600, n_features=2, n_components=4, separation=3.0, random_state=2)
    common = dict(n_components=1, random_state=3, max_laps=12, tol=0)
    full = fit_quietly(DPMixture(algorithm="full", **common), X)
    memo = fit_quietly(DPMixture(algorithm="memoized", n_batches=1, **common), X)
    auto = fit_quietly(DPMixture(**common), X)
    assert any(r["accepted"] for r in full.moves_log_)
    for other in (memo, auto):
        for key in ("elbo", "n_components"):
            assert np.array_equal(full.history_[key], other.history_[key]), key
        assert full.moves_log_ == other.moves_log_


def test_warm_start_with_automatic_batches():
    X, _ = make_gaussian_mixture(n_samples=20_000, n_features=2, n_components=3, separation=3.0, random_state=0)
    m = fit_quietly(DPMixture(max_laps=2, warm_start=True, random_state=0), X)
    fit_quietly(m, X)
    assert len(m.state_.memos) == auto_n_batches(20_000) == 4
    assert m.history_["lap"][-1] == m.history_["lap"].size


def test_hdp_topic_model_lap_limit_follows_the_algorithm():
    """``max_laps=None`` (the HDP topic model's default) is 200 laps for full and memoized
    learning, whose moves keep finding topics for a while, and 100 for the stochastic
    algorithms; a given value is used as it is, and the fit stops there with a warning."""
    import warnings

    from bnpcore import ConvergenceWarning, FiniteTopicModel, HDPTopicModel
    from bnpcore.datasets import make_bars

    assert HDPTopicModel().max_laps is None and FiniteTopicModel().max_laps == 100
    limits = {alg: HDPTopicModel(algorithm=alg)._max_laps() for alg in ("full", "memoized", "stochastic", "truncation_free")}
    assert limits == {"full": 200, "memoized": 200, "stochastic": 100, "truncation_free": 100}
    assert HDPTopicModel(max_laps=7)._max_laps() == 7
    X, _ = make_bars(n_docs=60, n_tokens=40, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        m = HDPTopicModel(max_laps=3, tol=0, random_state=0).fit(X)
    assert m.n_iter_ == 3 and any("3 laps" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="max_laps"):
        FiniteTopicModel(max_laps=None).fit(X)
