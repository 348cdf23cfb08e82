"""The scikit-learn style API of DPMixture and FiniteMixture (issue 2, "Estimators")."""

import doctest
import pickle
import warnings

import bnpcore
import bnpcore._reference as ref
import numpy as np
import pytest
from _helpers import KINDS, fit_quietly, seeded_data
from bnpcore import DPMixture, FiniteMixture
from bnpcore.estimators import mixture
from bnpcore.exceptions import ConvergenceWarning, ParameterError
from sklearn.metrics import adjusted_rand_score

ESTIMATORS = (DPMixture, FiniteMixture)


def test_public_names():
    for name in ("DPMixture", "FiniteMixture", "ConvergenceWarning", "ELBODecreaseWarning", "NumericalError"):
        assert name in bnpcore.__all__ and hasattr(bnpcore, name)
    assert isinstance(bnpcore.__version__, str)
    # every exception class of bnpcore.exceptions is exported; the lazy modules are listed by dir()
    import inspect

    import bnpcore.exceptions as exc

    for name, obj in vars(exc).items():
        if inspect.isclass(obj) and issubclass(obj, (Exception, Warning)) and obj.__module__ == exc.__name__:
            assert name in bnpcore.__all__ and getattr(bnpcore, name) is obj, name
    assert {"datasets", "load", "plotting", "DPMixture"} <= set(dir(bnpcore))
    with pytest.raises(AttributeError, match="no attribute 'lod'"):
        bnpcore.lod  # noqa: B018


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("kind", KINDS)
def test_fit_returns_self_and_fitted_attributes(cls, kind, make_data):
    X, _ = make_data(kind, n=150)
    est = cls(obs=kind, n_components=5, max_laps=30, random_state=0)
    assert fit_quietly(est, X) is est
    K = est.summaries_.K
    assert 1 <= est.n_iter_ <= est.max_laps
    assert est.n_components_ == int(np.sum(est.counts_ >= 1.0)) <= K
    assert est.weights_.shape == (K,) and est.weights_.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(est.weights_ > 0)
    D = X.shape[1]
    if kind in ("gauss", "diag_gauss", "mult", "bern"):
        assert est.means_.shape == (K, D)
    else:
        assert not hasattr(est, "means_")
    if kind in ("gauss", "zero_mean_gauss"):
        assert est.covariances_.shape == (K, D, D)
        assert np.all(np.linalg.eigvalsh(est.covariances_) > 0)
    elif kind == "diag_gauss":
        assert est.covariances_.shape == (K, D) and np.all(est.covariances_ > 0)
    else:
        assert not hasattr(est, "covariances_")
    # history_: equal-length 1-D arrays, seconds cumulative, elbo_ its last value
    h = est.history_
    assert set(h) == {"lap", "elbo", "n_components", "seconds"}
    assert len({len(v) for v in h.values()}) == 1 and len(h["lap"]) == est.n_iter_
    assert all(v.ndim == 1 for v in h.values())
    assert np.all(np.diff(h["seconds"]) >= 0)
    assert est.elbo_ == h["elbo"][-1]
    assert h["n_components"][-1] == est.n_components_
    if cls is DPMixture:  # clusters sorted by decreasing size
        assert np.all(np.diff(est.counts_) <= 0)


def test_convergence_warning_when_max_laps_too_small(make_data):
    X, _ = make_data("gauss", n=200)
    with pytest.warns(ConvergenceWarning, match="max_laps"):
        est = DPMixture(n_components=6, max_laps=1, random_state=0).fit(X)
    assert est.n_iter_ == 1 and not est.converged_
    # enough laps: converges silently (warnings are errors in this suite)
    est = DPMixture(n_components=6, max_laps=200, random_state=0).fit(X)
    assert est.converged_ and est.n_iter_ < 200


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_get_params_set_params_round_trip(cls):
    est = cls(obs="diag_gauss", n_components=7, gamma=2.5, max_laps=11, random_state=3, prior_scale=0.5)
    params = est.get_params()
    assert params["obs"] == "diag_gauss" and params["n_components"] == 7 and params["gamma"] == 2.5
    clone = cls(**params)
    assert clone.get_params() == params
    assert repr(clone) == repr(est)
    assert est.set_params(n_components=3, tol=1e-3) is est
    assert est.get_params()["n_components"] == 3 and est.get_params()["tol"] == 1e-3
    assert cls(**est.get_params()).get_params() == est.get_params()
    with pytest.raises(ParameterError, match="not_a_param"):
        est.set_params(not_a_param=1)


def test_sklearn_clone_works():
    from sklearn.base import clone

    est = DPMixture(obs="bern", n_components=4, random_state=1)
    assert clone(est).get_params() == est.get_params()


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("kind", KINDS)
def test_pickle_round_trip(cls, kind, make_data):
    X, _ = make_data(kind, n=150)
    est = fit_quietly(cls(obs=kind, n_components=4, max_laps=20, random_state=0), X)
    back = pickle.loads(pickle.dumps(est))
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))
    assert np.array_equal(back.predict(X), est.predict(X))
    assert np.array_equal(back.score_samples(X), est.score_samples(X))
    assert back.get_params() == est.get_params()
    assert back.elbo_ == est.elbo_
    for key in est.history_:
        assert np.array_equal(back.history_[key], est.history_[key])


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("kind", KINDS)
def test_prediction_shapes_and_score_samples_vs_reference(cls, kind, make_data):
    X, _ = make_data(kind, n=150, seed=1)
    X_new, _ = make_data(kind, n=37, seed=2)
    est = fit_quietly(cls(obs=kind, n_components=5, max_laps=20, random_state=0), X)
    K = est.summaries_.K
    proba = est.predict_proba(X_new)
    assert proba.shape == (37, K)
    labels = est.predict(X_new)
    assert labels.shape == (37,) and labels.dtype.kind == "i"
    assert np.array_equal(labels, np.argmax(proba, axis=1))
    s = est.score_samples(X_new)
    assert s.shape == (37,) and np.all(np.isfinite(s))
    assert est.score(X_new) == pytest.approx(s.mean(), rel=1e-14)
    assert isinstance(est.score(X_new), float)
    # plug-in density with the public weights_ and point estimates, by the reference
    pe = {name: getattr(est, name + "_") for name in ("means", "covariances") if hasattr(est, name + "_")}
    want = ref.score_samples(kind, est.weights_, pe, X_new)
    np.testing.assert_allclose(s, want, rtol=1e-10, atol=1e-10)
    # and those point estimates are the reference posterior means of the fitted summaries
    pe_ref = ref.point_estimates(kind, est.obs_model_.prior, est.summaries_.N, est.summaries_.S)
    for name, value in pe.items():
        np.testing.assert_allclose(value, pe_ref[name], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.weights_, ref.weights("dp" if cls is DPMixture else "finite", est.summaries_.N, est.gamma), rtol=1e-12)


def test_mixture_module_doctests():
    """The example in DPMixture's docstring runs and prints what it claims."""
    result = doctest.testmod(mixture, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted >= 5, "the DPMixture example was not collected"
    assert result.failed == 0


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("init", ["kmeans++", "random_from_data"])
def test_recovers_three_well_separated_blobs(cls, init):
    rng = np.random.default_rng(11)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    z = rng.integers(0, 3, size=600)
    X = centres[z] + rng.standard_normal((600, 2))
    est = cls(obs="gauss", n_components=10, init=init, max_laps=300, random_state=0).fit(X)
    labels = est.predict(X)
    assert adjusted_rand_score(z, labels) >= 0.95
    assert est.n_components_ == 3
    order = np.argsort(est.means_[est.counts_ >= 1][:, 0] + 2 * est.means_[est.counts_ >= 1][:, 1])
    np.testing.assert_allclose(est.means_[est.counts_ >= 1][order], centres, atol=0.3)


@pytest.mark.parametrize("obs", ["gauss", "mult"])
@pytest.mark.parametrize("kw", [dict(cls="dp", moves=()), dict(cls="finite")])
def test_n_components_and_the_represented_clusters_agree(obs, kw):
    """``n_components_`` counts the clusters with at least one expected row; every fitted array,
    ``predict_proba``'s columns and ``predict``'s labels are indexed by the K represented
    clusters (documented), so they agree with each other, even when some hold under one row."""

    X = seeded_data(obs, n=300, k=2, seed=4)
    cls = DPMixture if kw["cls"] == "dp" else FiniteMixture
    extra = {k: v for k, v in kw.items() if k != "cls"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = cls(obs, n_components=12, max_laps=30, random_state=0, **extra).fit(X)
    K = m.weights_.shape[0]
    assert m.n_components_ == int(np.sum(m.counts_ >= 1.0)) <= K
    assert m.counts_.shape == (K,) and m.means_.shape[0] == K
    assert m.predict_proba(X).shape == (X.shape[0], K)
    assert set(np.unique(m.predict(X))) <= set(range(K))
    assert np.isclose(m.weights_.sum(), 1.0)


@pytest.mark.parametrize("change", [dict(obs="diag_gauss"), dict(prior_scale=10.0), dict(prior_mean=np.zeros(2)), dict(prior_dof=9.0)])
def test_changed_observation_arguments_are_refused_when_continuing(change, tmp_path):
    # the fitted observation model (kind and prior) is part of the fit state: a warm start or
    # a further partial_fit used to keep it silently while get_params reported the new value
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 6]
    name = next(iter(change))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        m = bnpcore.DPMixture(n_components=3, max_laps=3, random_state=0).fit(X)
        m.save(tmp_path / "m.npz")
        for est in (m, bnpcore.load(tmp_path / "m.npz")):
            est.set_params(warm_start=True, **change)
            with pytest.raises(bnpcore.ParameterError, match=f"`{name}` changed from"):
                est.fit(X)
        s = bnpcore.DPMixture(n_components=3, random_state=0)
        s.partial_fit(X[:200])
        s.set_params(**change)
        with pytest.raises(bnpcore.ParameterError, match=f"`{name}` changed from"):
            s.partial_fit(X[200:])
        # what a warm start may change (here the laps) still runs
        ok = bnpcore.DPMixture(n_components=3, max_laps=3, random_state=0).fit(X)
        ok.set_params(warm_start=True, max_laps=2)
        assert np.isfinite(ok.fit(X).elbo_)
        # and warm_start=False refits with the new value
        m.set_params(warm_start=False)
        assert np.isfinite(m.fit(X).elbo_)


def test_changed_prior_count_is_refused_when_a_topic_model_continues():
    X, _ = bnpcore.datasets.make_bars(n_docs=60, n_tokens=60, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        m = bnpcore.HDPTopicModel(n_components=3, max_laps=2, random_state=0).fit(X)
    m.set_params(warm_start=True, prior_count=1.0)
    with pytest.raises(bnpcore.ParameterError, match=r"`prior_count` changed from 0\.1 to 1\.0"):
        m.fit(X)
