"""The methods and attributes a BayesianGaussianMixture user reaches for (issue 14 item 2):
fit_predict, lower_bound_, sample."""

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore.exceptions import NotFittedError, ParameterError


def _data():
    rng = np.random.default_rng(0)
    return np.r_[rng.normal(size=(150, 2)), rng.normal(size=(150, 2)) * 0.5 + 6.0]


def _fit(obs, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        return bnpcore.DPMixture(obs, n_components=3, random_state=0, **kw).fit(X)


def test_fit_predict_equals_fit_then_predict():
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        labels = bnpcore.DPMixture(n_components=3, random_state=0).fit_predict(X)
    assert np.array_equal(labels, _fit("gauss", X).predict(X))


def test_lower_bound_is_the_elbo():
    model = _fit("gauss", _data())
    assert model.lower_bound_ == model.elbo_
    assert not hasattr(bnpcore.DPMixture(), "lower_bound_")


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss", "zero_mean_gauss", "bern"])
def test_sample_draws_from_the_fitted_mixture(obs):
    X = _data()
    if obs == "bern":
        X = (X > 3.0).astype(float)
    model = _fit(obs, X)
    S, y = model.sample(20_000, random_state=1)
    assert S.shape == (20_000, X.shape[1]) and y.shape == (20_000,)
    K = model.weights_.shape[0]
    freq = np.bincount(y, minlength=K) / y.size
    assert np.allclose(freq, model.weights_ / model.weights_.sum(), atol=0.02)
    for k in range(K):
        rows = S[y == k]
        if rows.shape[0] < 2000:
            continue
        want = np.zeros(X.shape[1]) if obs == "zero_mean_gauss" else model.means_[k]
        spread = 1.0 if obs == "bern" else float(np.sqrt(np.max(np.atleast_1d(model.covariances_[k]))))
        assert np.allclose(rows.mean(axis=0), want, atol=0.05 * spread)  # ~5 standard errors
        if obs == "gauss" or obs == "zero_mean_gauss":
            assert np.allclose(np.cov(rows.T), model.covariances_[k], rtol=0.06, atol=0.05)
        elif obs == "diag_gauss":
            assert np.allclose(rows.var(axis=0), model.covariances_[k], rtol=0.06, atol=0.05)
    again, _ = model.sample(20_000, random_state=1)
    assert np.array_equal(S, again)


def test_sample_refuses_what_it_cannot_do():
    with pytest.raises(NotFittedError):
        bnpcore.DPMixture().sample(3)
    model = _fit("gauss", _data())
    with pytest.raises(ValueError, match="n_samples"):
        model.sample(0)
    counts = np.random.default_rng(0).poisson(3.0, size=(80, 5)).astype(float)
    with pytest.raises(ParameterError, match="mult"):
        _fit("mult", counts).sample(3)


@pytest.mark.parametrize("obs", ["gauss", "diag_gauss", "zero_mean_gauss", "bern"])
def test_precisions_follow_scikit_learns_conventions(obs, tmp_path):
    X = _data()
    if obs == "bern":
        X = (X > 3.0).astype(float)
    model = _fit(obs, X)
    if obs == "bern":
        assert not hasattr(model, "precisions_") and not hasattr(model, "precisions_cholesky_")
        return
    P, U, C = model.precisions_, model.precisions_cholesky_, model.covariances_
    if obs == "diag_gauss":
        assert np.allclose(P * C, 1.0) and np.allclose(U**2, P)
    else:
        for k in range(C.shape[0]):
            assert np.allclose(P[k] @ C[k], np.eye(C.shape[1]), atol=1e-10)
            assert np.allclose(U[k] @ U[k].T, P[k])
            assert np.allclose(np.tril(U[k], -1), 0.0)
    model.save(tmp_path / "m.npz")
    again = bnpcore.load(tmp_path / "m.npz")
    assert np.array_equal(again.precisions_, P) and np.array_equal(again.precisions_cholesky_, U)


def _bgm_from_resp(resp, **kw):
    """scikit-learn's BayesianGaussianMixture whose first M-step uses the responsibilities ``resp``
    (instead of its own k-means start)."""
    from sklearn.mixture import BayesianGaussianMixture

    class FromResp(BayesianGaussianMixture):
        def _initialize_parameters(self, X, random_state, **_):
            self._initialize(X, resp)

    return FromResp(n_components=resp.shape[1], **kw)


def _same_fixed_point(cls):
    """A converged fit and scikit-learn's BayesianGaussianMixture with the prior converted as
    docs/sklearn_mapping.md says, started from the fit's responsibilities."""
    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(size=(120, 2)) @ [[1.0, 0.3], [0.0, 1.0]], rng.normal(size=(80, 2)) * 0.5 + 6.0, rng.normal(size=(40, 2)) * 0.7 + [6.0, -5.0]]
    D, K, w0, nu, kappa = X.shape[1], 3, 0.5, 5.0, 0.5
    finite = cls is bnpcore.FiniteMixture
    model = cls(
        n_components=K, gamma=K * w0 if finite else w0, algorithm="full", tol=1e-13, max_laps=2000, random_state=0,
        prior_dof=nu, prior_mean_precision=kappa, prior_mean=[1.0, 2.0], prior_covariance=np.cov(X.T) / (nu - D - 1),
        **({} if finite else {"moves": ()}),
    ).fit(X)  # fmt: skip
    resp = model.predict_proba(X)
    assert resp.shape == (X.shape[0], K)
    sk = _bgm_from_resp(
        resp, weight_concentration_prior_type="dirichlet_distribution" if finite else "dirichlet_process", weight_concentration_prior=w0,
        degrees_of_freedom_prior=nu, mean_precision_prior=kappa, mean_prior=[1.0, 2.0], covariance_prior=np.cov(X.T),
        reg_covar=0.0, tol=1e-10, max_iter=50,
    ).fit(X)  # fmt: skip
    return model, sk, X


@pytest.mark.parametrize("cls", [bnpcore.FiniteMixture, bnpcore.DPMixture])
def test_posterior_parameters_match_bayesian_gaussian_mixture(cls):
    """Both at the same fixed point, read under scikit-learn's names."""
    model, sk, X = _same_fixed_point(cls)
    D = X.shape[1]
    finite = cls is bnpcore.FiniteMixture
    np.testing.assert_allclose(model.weights_, sk.weights_, rtol=1e-8)
    np.testing.assert_allclose(model.means_, sk.means_, rtol=1e-8, atol=1e-10)
    nu_k = model.degrees_of_freedom_
    np.testing.assert_allclose(model.covariances_ * ((nu_k - D - 1) / nu_k)[:, None, None], sk.covariances_, rtol=1e-8)
    np.testing.assert_allclose(nu_k, sk.degrees_of_freedom_, rtol=1e-10)
    np.testing.assert_allclose(model.mean_precision_, sk.mean_precision_, rtol=1e-10)
    if finite:
        np.testing.assert_allclose(model.weight_concentration_, sk.weight_concentration_, rtol=1e-10)
    else:
        assert isinstance(model.weight_concentration_, tuple) and len(model.weight_concentration_) == 2
        for ours, theirs in zip(model.weight_concentration_, sk.weight_concentration_):
            np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    np.testing.assert_allclose(model.predict_proba(X), sk.predict_proba(X), atol=1e-8)


def test_posterior_parameters_follow_the_observation_model():
    X = _data()
    model = _fit("zero_mean_gauss", X)
    assert not hasattr(model, "mean_precision_")
    np.testing.assert_array_equal(model.degrees_of_freedom_, model.obs_model_.prior["nu"] + model.counts_)
    model = _fit("bern", (X > 3.0).astype(float))
    assert not hasattr(model, "mean_precision_") and not hasattr(model, "degrees_of_freedom_")
    eta1, eta0 = model.weight_concentration_
    np.testing.assert_allclose(eta1, 1.0 + model.counts_)
    np.testing.assert_allclose(eta0, model.gamma + (model.counts_.sum() - np.cumsum(model.counts_)), atol=1e-9)


def test_moves_off_keeps_every_cluster_with_rows():
    """moves=() (docs/sklearn_mapping.md): no change of K but the removal of clusters left with
    no rows by a DPMixture; a FiniteMixture keeps n_components clusters."""
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        dp = bnpcore.DPMixture(n_components=10, moves=(), algorithm="full", random_state=0).fit(X)
        one_lap = bnpcore.DPMixture(n_components=10, moves=(), algorithm="full", max_laps=1, random_state=0).fit(X)
        finite = bnpcore.FiniteMixture(n_components=10, random_state=0).fit(X)
    assert one_lap.weights_.shape == (10,) and np.all(one_lap.counts_ > 1e-10)
    assert 2 <= dp.weights_.shape[0] < 10 and np.all(dp.counts_ > 1e-10)
    assert finite.weights_.shape == (10,) and np.min(finite.counts_) < 1e-10


@pytest.mark.parametrize("cls", [bnpcore.FiniteMixture, bnpcore.DPMixture])
def test_score_samples_definitions(cls):
    """docs/sklearn_mapping.md: bnpcore's score_samples is the plug-in log density; scikit-learn's
    is log sum_k exp(E[ln pi_k] + E[ln N(x | mu_k, Lambda_k^-1)]) under the posterior."""
    from scipy.special import digamma, logsumexp
    from scipy.stats import multivariate_normal

    model, sk, X = _same_fixed_point(cls)
    K, D = model.weights_.shape[0], X.shape[1]
    plug_in = [np.log(model.weights_[k]) + multivariate_normal(model.means_[k], model.covariances_[k]).logpdf(X) for k in range(K)]
    np.testing.assert_allclose(model.score_samples(X), logsumexp(plug_in, axis=0), rtol=1e-10)
    if cls is bnpcore.FiniteMixture:
        alpha = model.weight_concentration_
        e_log_pi = digamma(alpha) - digamma(alpha.sum())
    else:
        a, b = model.weight_concentration_
        e_log_u, e_log_rest = digamma(a) - digamma(a + b), digamma(b) - digamma(a + b)
        e_log_pi = e_log_u + np.r_[0.0, np.cumsum(e_log_rest)[:-1]]
    nu, kappa = model.degrees_of_freedom_, model.mean_precision_
    terms = []
    for k in range(K):
        W = np.linalg.inv(model.covariances_[k] * (nu[k] - D - 1))  # E[Lambda_k] = nu_k W_k
        diff = X - model.means_[k]
        e_log_det = np.sum(digamma(0.5 * (nu[k] - np.arange(D)))) + D * np.log(2.0) + np.linalg.slogdet(W)[1]
        maha = nu[k] * np.einsum("ni,ij,nj->n", diff, W, diff)
        terms.append(e_log_pi[k] + 0.5 * (e_log_det - D * np.log(2 * np.pi) - D / kappa[k] - maha))
    np.testing.assert_allclose(sk.score_samples(X), logsumexp(terms, axis=0), rtol=1e-8)
    assert np.mean(np.abs(sk.score_samples(X) - model.score_samples(X))) > 1e-3  # the same fixed point, different quantities


def test_diag_prior_conversion_and_m_step():
    """docs/sklearn_mapping.md, covariance_type="diag": covariance_prior / (nu - 2) as
    prior_covariance gives scikit-learn's prior, and its M-step from the fitted responsibilities
    returns the fitted parameters (its diag E-step differs, so only the M-step is compared)."""
    rng = np.random.default_rng(2)
    X = np.r_[rng.normal(size=(120, 3)) * [1.0, 2.0, 0.5], rng.normal(size=(80, 3)) * 0.5 + 6.0]
    nu, kappa = 4.0, 0.5
    var = np.var(X, axis=0, ddof=1)
    model = bnpcore.FiniteMixture(
        "diag_gauss", n_components=2, gamma=1.0, tol=1e-13, max_laps=2000, random_state=0,
        prior_dof=nu, prior_mean_precision=kappa, prior_covariance=var / (nu - 2.0),
    ).fit(X)  # fmt: skip
    np.testing.assert_allclose(model.obs_model_.prior["beta"], var, rtol=1e-12)
    sk = _bgm_from_resp(
        model.predict_proba(X), covariance_type="diag", weight_concentration_prior_type="dirichlet_distribution",
        weight_concentration_prior=0.5, degrees_of_freedom_prior=nu, mean_precision_prior=kappa, reg_covar=0.0, max_iter=0,
    ).fit(X)  # fmt: skip
    np.testing.assert_allclose(sk.covariance_prior_, var)
    np.testing.assert_allclose(model.weights_, sk.weights_, rtol=1e-8)
    np.testing.assert_allclose(model.means_, sk.means_, rtol=1e-8, atol=1e-10)
    nu_k = model.degrees_of_freedom_
    np.testing.assert_allclose(model.covariances_ * ((nu_k - 2.0) / nu_k)[:, None], sk.covariances_, rtol=1e-8)
    np.testing.assert_allclose(nu_k, sk.degrees_of_freedom_, rtol=1e-10)


def test_behaviours_the_mapping_document_states():
    """docs/sklearn_mapping.md, methods table: fit_predict after one lap, sample's seeding and
    grouping, errors for another number of features, one row, no n_init / verbose_interval."""
    from bnpcore.exceptions import ShapeError

    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        labels = bnpcore.FiniteMixture(n_components=4, max_laps=1, random_state=0).fit_predict(X)
        model = bnpcore.FiniteMixture(n_components=4, max_laps=1, random_state=0).fit(X)
    assert np.array_equal(labels, model.predict(X))
    S1, y1 = model.sample(50)
    S2, _ = model.sample(50)
    assert not np.array_equal(S1, S2)  # not seeded by the estimator's random_state
    assert np.all(np.diff(y1) >= 0)
    with pytest.raises(ShapeError, match=r"X has 3 features, but .* expecting 2 features"):
        model.predict(np.zeros((2, 3)))
    one = bnpcore.DPMixture().fit(X[:1])
    assert one.weights_.shape == (1,) and np.array_equal(one.means_, X[:1])
    for name in ("n_init", "verbose_interval", "covariance_type"):
        with pytest.raises(TypeError, match=name):
            bnpcore.DPMixture(**{name: 1})


def test_random_state_objects_and_history_as_the_mapping_document_states():
    """A RandomState or Generator passed as random_state is advanced by one draw per fit; the
    last fit's lower bounds are the last n_iter_ entries of history_["elbo"]."""
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        for make, draw in ((np.random.RandomState, lambda r: r.randint(0, 2**63 - 1, dtype=np.int64)), (np.random.default_rng, lambda r: r.integers(0, 2**63 - 1))):
            rng, twin = make(5), make(5)
            bnpcore.FiniteMixture(n_components=2, max_laps=3, random_state=rng).fit(X)
            draw(twin)
            assert draw(rng) == draw(twin)
        # (no swap move: plain coordinate ascent, still rising in these laps)
        model = bnpcore.FiniteMixture(n_components=2, max_laps=3, min_laps=100, moves=(), warm_start=True, random_state=0).fit(X)
        first = model.history_["elbo"].copy()
        model.fit(X)
    assert model.n_iter_ == 3 and len(model.history_["elbo"]) == 6
    np.testing.assert_array_equal(model.history_["elbo"][:3], first)
    assert np.all(np.diff(model.history_["elbo"][-model.n_iter_ - 1 :]) > 0)  # the second fit went on from the first
