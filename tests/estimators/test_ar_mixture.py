"""The auto-regressive Gaussian as an observation model of the mixtures (issue 12 item 3):
rows [x_t, x_(t-1)], regimes x_t ~ N(A_k x_(t-1), Λ_k⁻¹) with a Matrix-Normal-Wishart prior;
objective and responsibilities against the numpy reference, recovery from one cluster with the
default moves, the likelihood-gap divergence of its k-means++ and births, bad input."""

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore import DPMixture, FiniteMixture
from bnpcore._reference import alloc as ref_alloc
from bnpcore._reference import ar_gauss as ref_ar
from bnpcore._reference import local as ref_local
from bnpcore.exceptions import ConvergenceWarning, ParameterError, ShapeError
from bnpcore.obs import ar_rows
from sklearn.metrics import adjusted_rand_score

A_TRUE = [np.array([[0.9, 0.0], [0.0, 0.9]]), np.array([[0.0, -0.9], [0.9, 0.0]]), np.array([[-0.8, 0.3], [0.0, -0.5]])]


def _regimes(n=1500, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    prev = 2.0 * rng.standard_normal((n, 2))
    z = rng.integers(3, size=n)
    cur = np.einsum("nij,nj->ni", np.stack(A_TRUE)[z], prev) + noise * rng.standard_normal((n, 2))
    return np.hstack([cur, prev]), z


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X)


def test_defaults_find_the_regimes_from_one_cluster():
    Y, z = _regimes()
    m = _fit(DPMixture("ar_gauss", random_state=0), Y)
    assert m.n_components_ == 3
    labels = m.predict(Y)
    # rows whose regressor is near 0 are ambiguous: compare with the true parameters' own labels
    resid = [np.sum((Y[:, :2] - Y[:, 2:] @ A.T) ** 2, axis=1) for A in A_TRUE]
    oracle = adjusted_rand_score(z, np.argmin(resid, axis=0))
    assert adjusted_rand_score(z, labels) >= oracle - 0.005 and oracle > 0.97
    for k in range(3):  # each true regime's coefficients, read off the cluster most of its rows got
        c = np.bincount(labels[z == k]).argmax()
        np.testing.assert_allclose(m.coef_[c], A_TRUE[k], atol=0.03)
        assert np.all(np.linalg.eigvalsh(m.covariances_[c]) < 0.05)  # noise variance 0.01; the data 3+
    assert not hasattr(m, "means_") and m.precisions_.shape == m.covariances_.shape
    assert any(r["kind"] == "birth" and r["accepted"] for r in m.moves_log_)
    f = _fit(FiniteMixture("ar_gauss", n_components=3, random_state=0), Y)
    assert adjusted_rand_score(z, f.predict(Y)) >= oracle - 0.005


@pytest.mark.parametrize("cls", [DPMixture, FiniteMixture])
def test_objective_and_responsibilities_equal_the_reference(cls):
    Y, _ = _regimes(n=400, seed=3, noise=0.3)
    m = _fit(cls("ar_gauss", n_components=4, moves=() if cls is DPMixture else None, algorithm="memoized", n_batches=3,
                 max_laps=6, tol=0, random_state=1), Y)
    G, prior, F = m.summaries_, m.obs_model_.prior, 2
    assert np.all(np.diff(m.history_["elbo"][1:]) >= -1e-9 * np.abs(m.history_["elbo"][2:]))
    alloc = "dp" if cls is DPMixture else "finite"
    a = ref_alloc.dp_elbo_alloc(G.N, m.gamma) if alloc == "dp" else ref_alloc.finite_elbo_alloc(G.N, m.gamma)
    want = ref_ar.elbo_data(prior, G.N, G.S, F) + G.H.sum() + a
    assert np.isclose(m.elbo_, want, rtol=1e-9)
    # one local step with the fitted globals = softmax of the reference log weights
    W = ref_ar.e_log_lik(prior, G.N, G.S, Y, F) + ref_local.e_log_pi(alloc, G.N, m.gamma)
    R = np.exp(W - W.max(axis=1, keepdims=True))
    np.testing.assert_allclose(m.predict_proba(Y), R / R.sum(axis=1, keepdims=True), rtol=1e-8, atol=1e-12)


def test_likelihood_gap_divergence_seeds_kmeanspp():
    Y, z = _regimes(n=300, seed=5)
    m = _fit(DPMixture("ar_gauss", n_components=3, moves=(), max_laps=2, random_state=0), Y)
    core = m.obs_model_.core
    for i in (0, 17, 299):
        d = np.asarray(core.smoothed_divergence(Y, i))
        assert d[i] == 0.0 and np.all(d >= 0.0) and np.mean(d[z != z[i]]) > np.mean(d[z == z[i]])
    seeds = core.kmeanspp(Y, np.array([0.1, 0.5, 0.9]))
    assert len(set(seeds)) == 3


def test_ar_rows_and_bad_input():
    X, lengths, _ = bnpcore.datasets.make_sticky_hmm("ar", n_seqs=3, seq_len=50, random_state=0)
    R, new_lengths = ar_rows(X, lengths)
    assert R.shape == (X.shape[0] - 3, 2 * X.shape[1]) and list(new_lengths) == [49, 49, 49]
    np.testing.assert_array_equal(R[0], np.concatenate([X[1], X[0]]))
    m = _fit(DPMixture("ar_gauss", random_state=0, max_laps=5), R)
    assert m.n_features_in_ == R.shape[1] and m.coef_.shape[1:] == (X.shape[1], X.shape[1])
    with pytest.raises(ShapeError, match="even number of columns"):
        DPMixture("ar_gauss").fit(np.ones((20, 3)))
    bad = R.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="X"):
        DPMixture("ar_gauss").fit(bad)
    with pytest.raises(ParameterError, match="sample"):
        m.sample(5)
    with pytest.raises(ShapeError, match="at least 2 steps"):
        ar_rows(X[:5], [4, 1])
