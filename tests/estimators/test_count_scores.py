"""score_samples / score of the count models are log-probabilities of the count vectors: for
obs="mult" the multinomial coefficient is included (as scipy.stats.multinomial.logpmf and
hmmlearn's MultinomialHMM), for mixtures and HMMs, dense or CSR rows; the objective leaves it out."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import HDPHMM, DPMixture, FiniteHMM, FiniteMixture
from bnpcore.exceptions import ConvergenceWarning
from scipy import stats
from scipy.special import logsumexp


def _quiet(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(*args)


def _counts(n=40, V=5, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(V, 0.5), size=2)
    z = rng.integers(2, size=n)
    return np.stack([rng.multinomial(rng.integers(3, 12), p[k]) for k in z]).astype(float)


def _log_emissions(est, X, obs):
    """log F(x_t | point estimates) by scipy, shape (n_samples, K)."""
    if obs == "mult":
        n = X.sum(axis=1).astype(int)
        return np.stack([stats.multinomial.logpmf(X, n, beta) for beta in est.means_], axis=1)
    return np.stack([stats.bernoulli.logpmf(X, theta).sum(axis=1) for theta in est.means_], axis=1)


@pytest.mark.parametrize("cls", [DPMixture, FiniteMixture])
@pytest.mark.parametrize("obs", ["mult", "bern"])
def test_mixture_score_samples_is_the_log_probability_of_the_rows(cls, obs):
    X = _counts()
    if obs == "bern":
        X = (X > 1).astype(float)
    est = _quiet(cls(obs=obs, n_components=3, max_laps=10, random_state=0), X)
    X_new = _counts(n=15, seed=1)
    X_new = (X_new > 1).astype(float) if obs == "bern" else X_new
    want = logsumexp(_log_emissions(est, X_new, obs) + np.log(est.weights_), axis=1)
    if obs == "mult":  # the coefficient is no round-off: nats per row
        assert np.max(want - logsumexp(X_new @ np.log(est.means_).T + np.log(est.weights_), axis=1)) > 5.0
    for rows in (X_new, sp.csr_array(X_new), sp.csr_matrix(X_new), sp.coo_array(X_new)):
        np.testing.assert_allclose(est.score_samples(rows), want, rtol=1e-10)
        assert est.score(rows) == pytest.approx(want.mean(), rel=1e-10)


def _forward(log_b, log_start, log_trans):
    """log p(x) of one sequence by a numpy forward pass."""
    alpha = log_start + log_b[0]
    for t in range(1, log_b.shape[0]):
        alpha = logsumexp(alpha[:, None] + log_trans, axis=0) + log_b[t]
    return logsumexp(alpha)


@pytest.mark.parametrize("cls", [HDPHMM, FiniteHMM])
@pytest.mark.parametrize("obs", ["mult", "bern"])
def test_hmm_score_is_the_forward_log_likelihood_of_the_count_vectors(cls, obs):
    X = _counts(n=60, seed=2)
    X = (X > 1).astype(float) if obs == "bern" else X
    lengths = [25, 35]
    est = _quiet(cls(obs, n_components=3, max_laps=10, random_state=0), X, lengths)
    log_b = _log_emissions(est, X, obs)
    with np.errstate(divide="ignore"):
        ls, lt = np.log(est.startprob_), np.log(est.transmat_)
    want = _forward(log_b[:25], ls, lt) + _forward(log_b[25:], ls, lt)
    for rows in (X, sp.csr_array(X)):
        assert est.score(rows, lengths) == pytest.approx(want, rel=1e-10)
        logp = est.score_samples(rows, lengths)[0]
        assert logp == pytest.approx(want, rel=1e-10)
        # the best path's log p(x, z*) with the same emissions
        log_prob, states = est.decode(rows, lengths)
        path = sum(ls[s[0]] + np.sum(lt[s[:-1], s[1:]]) + np.sum(log_b[np.arange(a, a + len(s)), s])
                   for a, s in ((0, states[:25]), (25, states[25:])))
        assert log_prob == pytest.approx(path, rel=1e-10)


def test_the_objective_leaves_the_multinomial_coefficient_out():
    """elbo_ is unchanged by the scoring constant: its data term has h = 0 for obs='mult'."""
    X = _counts()
    est = _quiet(FiniteMixture(obs="mult", n_components=2, max_laps=5, random_state=0), X)
    assert est.elbo_terms()["h"] == 0.0


def test_the_coefficient_of_sparse_rows_is_computed_without_densifying(monkeypatch):
    from bnpcore.obs import log_multinomial_coefficient
    from scipy.special import gammaln

    X = _counts(n=30, V=7, seed=3)
    X[4] = 0.0  # an empty row: coefficient 0
    want = gammaln(X.sum(axis=1) + 1) - gammaln(X + 1).sum(axis=1)
    np.testing.assert_allclose(log_multinomial_coefficient(X), want, rtol=1e-13)
    rows, cols = np.nonzero(X)
    # duplicate entries (non-canonical COO/CSR) add up before the factorial
    dup = sp.coo_array((np.concatenate([X[rows, cols] - 1, np.ones(rows.size)]), (np.tile(rows, 2), np.tile(cols, 2))), shape=X.shape)
    order = np.argsort(dup.row, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dup.row, minlength=X.shape[0]))])
    noncanonical = sp.csr_array((dup.data[order], dup.col[order], indptr), shape=X.shape)
    assert not noncanonical.has_canonical_format
    for S in (sp.csr_array(X), sp.csc_matrix(X), dup, noncanonical):
        monkeypatch.setattr(type(S), "toarray", lambda self, *a, **k: pytest.fail("densified"))
        np.testing.assert_allclose(log_multinomial_coefficient(S), want, rtol=1e-13, atol=1e-13)
