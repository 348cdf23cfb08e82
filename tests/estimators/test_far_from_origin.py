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


def _ar_series(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    A = np.array([[0.9, 0.1], [-0.2, 0.5]])
    x = np.zeros((n, 2))
    for t in range(1, n):
        x[t] = A @ x[t - 1] + rng.standard_normal(2)
    return x


def _ar_fit(cls, x, **kw):
    if cls == "HDPHMM":
        return _fit(bnpcore.HDPHMM(obs="ar_gauss", random_state=0, max_laps=8, **kw), x, lengths=[x.shape[0]])
    return _fit(bnpcore.DPMixture(obs="ar_gauss", random_state=0, max_laps=8, **kw), bnpcore.obs.ar_rows(x)[0])


@pytest.mark.parametrize("cls", ["DPMixture", "HDPHMM"])
def test_auto_regressive_fits_do_not_depend_on_the_data_scale(cls):
    # the default prior scales with the data (B with the steps' covariance, V with the inputs'
    # mean square), so a rescaled series gives the same coefficients and clustering, covariances
    # scaled by s^2 and the ELBO shifted by the Jacobian; with V = I fixed, s = 0.01 gave half the
    # coefficients and s = 1e10 a singular posterior
    x = _ar_series()
    ref = _ar_fit(cls, x, n_components=3)
    n_steps = x.shape[0] - 1
    for s in (1e-4, 1e-2, 1e3, 1e10):
        m = _ar_fit(cls, s * x, n_components=3)
        assert m.n_components_ == ref.n_components_
        np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(m.covariances_ / s**2, ref.covariances_, rtol=1e-7)
        np.testing.assert_allclose(m.elbo_ + n_steps * 2 * np.log(s), ref.elbo_, rtol=1e-9)
    one = _ar_fit(cls, 1e-2 * x, n_components=1)
    np.testing.assert_allclose(one.coef_[0], [[0.9, 0.1], [-0.2, 0.5]], atol=0.05)


def test_auto_regressive_prior_scales_with_the_inputs():
    Y = bnpcore.obs.ar_rows(_ar_series(200))[0]
    prior = bnpcore.obs.default_prior("ar_gauss", Y)
    np.testing.assert_allclose(prior["V"], np.mean(Y[:, 2:] ** 2) * np.eye(2))
    scaled = bnpcore.obs.default_prior("ar_gauss", 1e-3 * Y)
    for key, power in (("V", 2), ("B", 2), ("M", 0)):
        np.testing.assert_allclose(scaled[key], 1e-3**power * prior[key], rtol=1e-12)
    # a single step has no step covariance: B follows the values' scale too
    one, one_big = (bnpcore.obs.default_prior("ar_gauss", s * Y[5:6]) for s in (1.0, 1e150))
    np.testing.assert_allclose(one_big["B"], 1e300 * one["B"], rtol=1e-12)
    np.testing.assert_allclose(one_big["V"], 1e300 * one["V"], rtol=1e-12)


@pytest.mark.parametrize("cls", ["DPMixture", "HDPHMM"])
@pytest.mark.parametrize("kind", ["far", "constant"])
def test_auto_regressive_series_without_resolvable_steps_are_refused(cls, kind):
    # x_t = A x_(t-1) + e has no intercept, so it is not translation-equivariant and is not
    # centred internally: at 1e7 + N(0, 1e-3) the steps are below float64's resolution of the
    # values (every digit of the innovations lost to cancellation), and a constant series has no
    # steps at all; both get a DataError naming X instead of a failed fit
    rng = np.random.default_rng(0)
    X = 1e7 + 1e-3 * rng.standard_normal((200, 2)) if kind == "far" else np.tile([3.0, -1.0], (200, 1))
    with pytest.raises(bnpcore.DataError, match=r"`X`: the steps x_t - x_\(t-1\) of the series are below"):
        _ar_fit(cls, X, n_components=2)
    if kind == "far":  # the same series centred by the caller fits
        assert np.isfinite(_ar_fit(cls, X - X.mean(axis=0), n_components=2).elbo_)
