"""Finite but huge inputs get the same clear error in predict/predict_proba/score_samples as in
fit, instead of uniform rows or NaN (issue 13 item 5)."""

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore.exceptions import DataError


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss", "zero_mean_gauss"])
def test_predicting_on_huge_values_is_a_clear_error(obs):
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(100, 2)), rng.normal(size=(100, 2)) + 8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model = bnpcore.DPMixture(obs, n_components=3, random_state=0).fit(X)
    huge = X[:3] * 1e160
    for method in ("predict", "predict_proba", "score_samples", "score"):
        with pytest.raises(DataError, match=r"`X` is too large in magnitude"):
            getattr(model, method)(huge)
    # large but representable values still give finite answers
    big = X[:3] * 1e150
    assert np.isfinite(model.predict_proba(big)).all()
    assert np.isfinite(model.score_samples(big)).all()


def test_predicting_on_counts_too_large_to_add_is_a_clear_error():
    rng = np.random.default_rng(1)
    X = rng.poisson(3.0, size=(60, 4)).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model = bnpcore.DPMixture("mult", n_components=2, random_state=0).fit(X)
    huge = np.full((2, 4), 1e308)
    with pytest.raises(DataError, match="counts too large"):
        model.predict_proba(huge)


def _two_regimes():
    rng = np.random.default_rng(2)
    states = np.repeat([0, 1, 0, 1], 15)
    return rng.normal(size=(60, 2)) + np.array([[-4.0, 0.0], [4.0, 0.0]])[states]


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss"])
def test_hmm_inference_on_huge_values_is_the_same_clear_error(obs):
    X = _two_regimes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model = bnpcore.FiniteHMM(obs=obs, n_components=2, random_state=0, max_laps=3).fit(X, [30, 30])
    huge = X.copy()
    huge[3] *= 1e200
    calls = {
        "predict": lambda: model.predict(huge, [30, 30]),
        "predict_proba": lambda: model.predict_proba(huge, [30, 30]),
        "score": lambda: model.score(huge, [30, 30]),
        "score_samples": lambda: model.score_samples(huge, [30, 30]),
        "decode": lambda: model.decode(huge, [30, 30]),
        "partial_fit": lambda: model.partial_fit(huge, [30, 30]),
    }
    elbo = model.elbo_
    for method, call in calls.items():
        with pytest.raises(DataError, match=r"`X` is too large in magnitude"):
            call()
            pytest.fail(f"{method} accepted the huge values")
    assert model.elbo_ == elbo  # the refused batch changed nothing


@pytest.mark.parametrize("cls", [bnpcore.FiniteMixture, bnpcore.DPMixture])
def test_huge_rows_outside_the_initialisation_sample_are_a_clear_error(cls):
    X = _two_regimes()
    huge = X.copy()
    huge[-1] *= 1e200
    # rows beyond init_subsample, and a later partial_fit batch, are checked as the sample is
    with pytest.raises(DataError, match=r"`X` is too large in magnitude"):
        cls(n_components=2, random_state=0, init_subsample=10).fit(huge)
    model = cls(n_components=2, random_state=0).partial_fit(X)
    elbo = model.elbo_
    with pytest.raises(DataError, match=r"`X` is too large in magnitude"):
        model.partial_fit(huge)
    assert model.elbo_ == elbo


def test_hmm_fit_on_huge_rows_outside_the_initialisation_sample_is_a_clear_error():
    X = _two_regimes()
    huge = np.r_[X, X]
    huge[-1] *= 1e200
    with pytest.raises(DataError, match=r"`X` is too large in magnitude"):
        bnpcore.FiniteHMM(n_components=2, random_state=0, init_subsample=30, algorithm="memoized", n_batches=2).fit(huge, [60, 60])


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss", "zero_mean_gauss"])
def test_fitting_values_too_small_to_square_is_a_clear_error(obs):
    X = _two_regimes()
    reference = bnpcore.FiniteMixture(obs, n_components=2, random_state=0).fit(X)
    if obs != "zero_mean_gauss":  # (its slow laps stop at a scale-dependent lap)
        # small but representable: the same clustering as at scale 1 (the model is scale-equivariant)
        small = bnpcore.FiniteMixture(obs, n_components=2, random_state=0).fit(X * 1e-140)
        np.testing.assert_array_equal(small.predict(X * 1e-140), reference.predict(X))
    # squares below float64's normal range: refused, where the fit silently merged the clusters
    for model in (bnpcore.FiniteMixture(obs, n_components=2, random_state=0), bnpcore.DPMixture(obs, random_state=0)):
        with pytest.raises(DataError, match=r"`X` is too small in magnitude"):
            model.fit(X * 1e-160)
    assert reference.predict(X[:3] * 1e-200).shape == (3,)  # tiny rows to label are fine


@pytest.mark.parametrize("obs", ["gauss", "ar_gauss"])
def test_hmm_fit_on_values_too_small_to_square_is_a_clear_error(obs):
    X = _two_regimes()
    with pytest.raises(DataError, match=r"`X` is too small in magnitude"):
        bnpcore.FiniteHMM(obs=obs, n_components=2, random_state=0).fit(X * 1e-160, [30, 30])


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss", "zero_mean_gauss"])
@pytest.mark.parametrize("top_l", [None, 2])
def test_a_row_beyond_every_component_is_an_error_not_a_uniform_row(obs, top_l):
    """A row whose sum of squares is finite but whose quadratic form under every fitted
    component overflows (a model of scale 1e-3, a row of 1e152) used to come out with uniform
    responsibilities; it has none, so predict and predict_proba name it. Rows near the model
    are unaffected, and its log-density stays -inf."""
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(-5, 1, (60, 2)), rng.normal(5, 1, (60, 2)), rng.normal(0, 1, (60, 2))] * 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model = bnpcore.FiniteMixture(obs, n_components=3, top_l=top_l, random_state=0).fit(X)
    rows = np.r_[X[:4], [[1e152, 1e152]], X[4:6]]
    for method in ("predict", "predict_proba"):
        with pytest.raises(DataError, match=r"`X` row 4 is too far from every fitted component"):
            getattr(model, method)(rows)
    assert np.array_equal(model.predict_proba(np.r_[X[:4], X[4:6]]), model.predict_proba(X[:6]))
    assert model.score_samples(rows)[4] == -np.inf


@pytest.mark.parametrize("method", ["predict", "predict_proba", "decode", "score", "score_samples"])
def test_an_hmm_step_beyond_every_state_is_an_error_naming_x(method):
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(-5, 1, (60, 2)), rng.normal(5, 1, (60, 2))] * 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model = bnpcore.FiniteHMM(n_components=2, random_state=0).fit(X)
    rows = np.r_[X[:2], [[1e152, 1e152]], X[2:4]]
    with pytest.raises(DataError, match=r"`X` row 2 is too far from every fitted component"):
        getattr(model, method)(rows)
