"""Gaussian data far from the origin (issue 13 item 5): fitted centred, reported in the user's
coordinates, the same model as the centred data (bnpcore.obs.data_shift)."""

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore.exceptions import ConvergenceWarning
from bnpcore.obs import data_shift


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(m, 1.0, size=(400, 3)) * [1.0, 2.0, 0.5] for m in (-5, 0, 5)])


def _fit(est, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, **kw)


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss"])
@pytest.mark.parametrize("algorithm", ["full", "memoized", "stochastic"])
@pytest.mark.parametrize("offset,scale", [(1e7, 1e-3), (-3e5, 1.0)])
def test_far_data_fit_like_centred_data(obs, algorithm, offset, scale):
    Z = scale * _data()
    X = offset + Z
    kw = dict(obs=obs, n_components=6, algorithm=algorithm, n_batches=3, max_laps=15, random_state=0)
    ref = _fit(bnpcore.DPMixture(**kw), Z)
    far = _fit(bnpcore.DPMixture(**kw), X)
    assert ref.obs_model_.shift is None and far.obs_model_.shift is not None
    assert far.n_components_ == ref.n_components_
    np.testing.assert_allclose(far.elbo_, ref.elbo_, rtol=1e-6)
    np.testing.assert_allclose(far.means_ - offset, ref.means_, atol=1e-6 * scale + 1e-9 * abs(offset))
    np.testing.assert_allclose(far.covariances_, ref.covariances_, rtol=1e-4)
    assert np.array_equal(far.predict(X), ref.predict(Z))
    np.testing.assert_allclose(far.score_samples(X), ref.score_samples(Z), rtol=1e-6, atol=1e-6)
    S, _ = far.sample(50, random_state=1)
    assert np.all(np.abs(S - offset) < 100 * scale)


def test_far_data_survive_save_load_and_partial_fit(tmp_path):
    X = 1e7 + 1e-3 * _data(1)
    m = _fit(bnpcore.DPMixture(n_components=5, algorithm="memoized", n_batches=2, random_state=0), X)
    m.save(tmp_path / "m.npz")
    back = bnpcore.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.obs_model_.shift, m.obs_model_.shift)
    assert np.array_equal(back.predict(X), m.predict(X))
    np.testing.assert_array_equal(back.means_, m.means_)
    s = bnpcore.DPMixture(n_components=3, random_state=0)
    for part in np.array_split(X, 4):
        s.partial_fit(part)
    assert s.obs_model_.shift is not None and np.isfinite(s.elbo_)
    assert np.all(np.abs(s.means_ - 1e7) < 1.0)


def test_data_shift_rule():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(100, 2))
    assert data_shift("gauss", Z) is None
    assert data_shift("gauss", Z + [0.0, 1e4]) is not None  # one column far away is enough
    assert data_shift("zero_mean_gauss", Z + 1e7) is None  # a zero-mean model cannot be translated
    assert data_shift("mult", np.abs(Z) + 1e7) is None


@pytest.mark.parametrize("cls", ["DPMixture", "HDPHMM"])
def test_auto_regressive_data_far_from_origin_get_a_clear_error(cls):
    # x_t = A x_(t-1) + e has no intercept, so it is not translation-equivariant and is not
    # centred internally: 1e7 + N(0, 1e-3) loses every digit of the innovations to
    # cancellation, and the error says what to do
    rng = np.random.default_rng(0)
    X = 1e7 + 1e-3 * rng.standard_normal((200, 2))
    est = getattr(bnpcore, cls)(obs="ar_gauss", n_components=2, max_laps=5, random_state=0)
    kw = {"lengths": [200]} if cls == "HDPHMM" else {}
    with pytest.raises(bnpcore.NumericalError, match=r"obs='ar_gauss'.*centred by the caller"):
        _fit(est, X, **kw)
    # the same series centred by the caller fits
    assert np.isfinite(_fit(getattr(bnpcore, cls)(obs="ar_gauss", n_components=2, max_laps=5, random_state=0), X - X.mean(axis=0), **kw).elbo_)
