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
