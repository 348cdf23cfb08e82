"""The names a hmmlearn user reaches for on HDPHMM and FiniteHMM: ``covars_``, ``sample(currstate=)``,
``monitor_``, ``n_features``, ``get_stationary_distribution``, ``decode(algorithm=None)`` and
the ``(X, lengths)`` conventions of ``score`` and ``predict``. The checks
run without hmmlearn; where hmmlearn is installed, its GaussianHMM given the fitted point
estimates is compared too."""

import dataclasses
import warnings
from collections import deque

import bnpcore
import numpy as np
import pytest
from bnpcore import HDPHMM, FiniteHMM
from bnpcore._reference import hmm as ref_hmm
from bnpcore.exceptions import ConvergenceWarning, ParameterError
from scipy.stats import multivariate_normal

GAUSS_OBS = ("gauss", "diag_gauss", "zero_mean_gauss")


def _data(n_seqs=3, seq_len=60, seed=0):
    return bnpcore.datasets.make_sticky_hmm(n_seqs=n_seqs, seq_len=seq_len, random_state=seed)[:2]


def _fit(est, X, lengths=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, lengths)


def _emission_log_lik(m, X):
    """log N(x_t | means_[k], covars_[k]) of every step and state, by scipy."""
    K, d = m.covars_.shape[0], X.shape[1]
    means = m.means_ if hasattr(m, "means_") else np.zeros((K, d))
    return np.stack([multivariate_normal(means[k], m.covars_[k]).logpdf(X) for k in range(K)], axis=1)


@pytest.mark.parametrize("cls", [HDPHMM, FiniteHMM])
@pytest.mark.parametrize("obs", GAUSS_OBS)
def test_covars_are_the_full_covariances_that_score_uses(cls, obs):
    X, lengths = _data()
    m = _fit(cls(obs, n_components=3, max_laps=5, random_state=0), X, lengths)
    K, d = m.transmat_.shape[0], X.shape[1]
    cov = m.covars_
    assert cov.shape == (K, d, d)
    expected = np.stack([np.diag(v) for v in m.covariances_]) if obs == "diag_gauss" else m.covariances_
    assert np.array_equal(cov, expected)
    cov[...] = 0.0  # a new array: the fitted covariances are untouched
    assert np.all(np.diagonal(m.covars_, axis1=1, axis2=2) > 0)
    # the forward algorithm with Gaussians of means_ and covars_ is the model's score
    seq_range = np.r_[0, np.cumsum(lengths)]
    ref = ref_hmm.forward_backward(_emission_log_lik(m, X), seq_range, np.log(m.startprob_), np.log(m.transmat_))
    assert np.isclose(m.score(X, lengths), ref["log_z_sum"], rtol=1e-9)
    with pytest.raises(AttributeError):
        m.covars_ = cov


def test_covars_of_the_autoregressive_model_are_its_noise_covariances():
    X, lengths = _data()
    m = _fit(FiniteHMM("ar_gauss", n_components=2, max_laps=3, random_state=0), X, lengths)
    assert m.covars_.shape == (2, X.shape[1], X.shape[1]) and np.array_equal(m.covars_, m.covariances_)


@pytest.mark.parametrize("obs", ["mult", "bern"])
def test_covars_are_absent_without_gaussian_observations(obs):
    X, lengths = _data()
    X = (X > 0).astype(float) if obs == "bern" else np.abs(np.round(X))
    m = _fit(FiniteHMM(obs, n_components=2, max_laps=3, random_state=0), X, lengths)
    assert not hasattr(m, "covars_")
    with pytest.raises(AttributeError, match=f"Gaussian observation models only, not obs='{obs}'"):
        _ = m.covars_
    with pytest.raises(AttributeError, match="not fitted yet"):
        _ = FiniteHMM().covars_


def test_covars_survive_save_and_load(tmp_path):
    X, lengths = _data()
    m = _fit(FiniteHMM("diag_gauss", n_components=2, max_laps=3, random_state=0), X, lengths)
    m.save(tmp_path / "m.npz")
    assert np.array_equal(bnpcore.load(tmp_path / "m.npz").covars_, m.covars_)



@pytest.mark.parametrize("obs", ["gauss", "bern"])
def test_sample_starts_in_currstate_and_goes_on_from_a_previous_draw(obs):
    X, lengths = _data()
    X = (X > 0).astype(float) if obs == "bern" else X
    m = _fit(FiniteHMM(obs, n_components=3, max_laps=5, random_state=0), X, lengths)
    for k in range(3):
        for seed in range(5):
            S, z = m.sample(4, random_state=seed, currstate=k)
            assert z[0] == k and z.dtype == np.int64 and S.shape == (4, X.shape[1])
    _, z = m.sample(30, random_state=0)
    _, z2 = m.sample(30, random_state=1, currstate=z[-1])  # numpy integers are states too
    assert z2[0] == z[-1]
    # None draws the first state from startprob_, as before
    assert np.array_equal(m.sample(30, random_state=2, currstate=None)[1], m.sample(30, random_state=2)[1])


@pytest.mark.parametrize("bad", [-1, 3, 1.0, "0", True, [0]])
def test_sample_refuses_a_currstate_that_is_not_a_state(bad):
    X, lengths = _data()
    m = _fit(FiniteHMM(n_components=3, max_laps=3, random_state=0), X, lengths)
    with pytest.raises(ParameterError, match="`currstate` must be"):
        m.sample(5, random_state=0, currstate=bad)


def test_monitor_reports_the_last_fit(tmp_path):
    X, lengths = _data()
    m = _fit(HDPHMM(n_components=3, kappa=10.0, max_laps=40, tol=1e-5, verbose=False, random_state=0), X, lengths)
    mon = m.monitor_
    assert m.converged_ and mon.converged is True
    assert mon.iter == m.n_iter_ and mon.n_iter == 40 and mon.tol == 1e-5 and mon.verbose is False
    assert isinstance(mon.history, deque) and list(mon.history) == list(m.history_["elbo"])
    # a stop at max_laps is not convergence (hmmlearn's monitor says converged then)
    short = _fit(FiniteHMM(n_components=3, max_laps=1, random_state=0), X, lengths)  # min_laps=2: no test of convergence
    assert not short.converged_ and short.monitor_.converged is False and short.monitor_.iter == short.monitor_.n_iter == 1
    # a continued fit reports its own laps only, and a loaded model the same as the saved one
    short.set_params(warm_start=True, max_laps=3)
    _fit(short, X, lengths)
    assert short.monitor_.iter == short.n_iter_ and len(short.history_["elbo"]) == 1 + short.n_iter_
    assert list(short.monitor_.history) == list(short.history_["elbo"][1:])
    short.save(tmp_path / "m.npz")
    assert bnpcore.load(tmp_path / "m.npz").monitor_ == short.monitor_


def test_monitor_is_read_only_and_absent_before_fit():
    assert not hasattr(FiniteHMM(), "monitor_")
    X, lengths = _data()
    m = _fit(FiniteHMM(n_components=2, max_laps=3, random_state=0), X, lengths)
    with pytest.raises(AttributeError):
        m.monitor_ = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.monitor_.converged = True


def test_monitor_has_the_attributes_of_hmmlearns():
    hmm = pytest.importorskip("hmmlearn.hmm")
    X, lengths = _data()
    h = hmm.GaussianHMM(n_components=2, n_iter=3, random_state=0).fit(X, lengths)
    m = _fit(FiniteHMM(n_components=2, max_laps=3, random_state=0), X, lengths)
    names = {k for k in vars(h.monitor_) if not k.startswith("_")} | {"converged"}
    assert names <= {f.name for f in dataclasses.fields(m.monitor_)}
    for name in names:
        assert isinstance(getattr(m.monitor_, name), type(getattr(h.monitor_, name))), name


@pytest.mark.parametrize(("obs", "width"), [("gauss", 2), ("ar_gauss", 2), ("bern", 2)])
def test_n_features_is_the_number_of_columns_fitted(obs, width):
    assert not hasattr(FiniteHMM(), "n_features")
    X, lengths = _data()
    X = (X > 0).astype(float) if obs == "bern" else X
    m = _fit(FiniteHMM(obs, n_components=2, max_laps=2, random_state=0), X, lengths)
    assert m.n_features == m.n_features_in_ == width and type(m.n_features) is int
    with pytest.raises(AttributeError):
        m.n_features = 3


@pytest.mark.parametrize("cls", [HDPHMM, FiniteHMM])
def test_stationary_distribution_is_the_long_run_share_of_the_chain(cls):
    X, lengths = _data(n_seqs=4, seq_len=100)
    m = _fit(cls(n_components=4, kappa=5.0, max_laps=10, random_state=0), X, lengths)
    pi = m.get_stationary_distribution()
    K = m.transmat_.shape[0]
    assert pi.shape == (K,) and np.all(pi >= 0) and np.isclose(pi.sum(), 1.0)
    assert np.allclose(pi @ m.transmat_, pi, atol=1e-12)
    # the distribution of the state after many steps, from any start
    assert np.allclose(m.startprob_ @ np.linalg.matrix_power(m.transmat_, 2000), pi, atol=1e-8)
    with pytest.raises(bnpcore.exceptions.NotFittedError):
        cls().get_stationary_distribution()


def test_decode_with_hmmlearns_default_algorithm_none_is_viterbi():
    X, lengths = _data()
    m = _fit(FiniteHMM(n_components=3, max_laps=3, random_state=0), X, lengths)
    (a, za), (b, zb) = m.decode(X, lengths, algorithm=None), m.decode(X, lengths, algorithm="viterbi")
    assert a == b and np.array_equal(za, zb)


def test_lengths_conventions_and_total_score():
    X, lengths = _data()
    m = _fit(FiniteHMM(n_components=3, max_laps=5, random_state=0), X, lengths)
    assert _fit(m, X, lengths) is m
    score, states = m.score(X, lengths), m.predict(X, lengths)
    for lens in (list(lengths), tuple(int(n) for n in lengths), np.asarray(lengths, dtype=np.int32)):
        assert m.score(X, lens) == score and np.array_equal(m.predict(X, lens), states)
    # the total over the sequences, each scored on its own; None is one sequence
    bounds = np.r_[0, np.cumsum(lengths)]
    parts = [m.score(X[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    assert np.isclose(score, sum(parts), rtol=1e-12)
    assert m.score(X) == m.score(X, [len(X)]) and m.score(X) != score
    logp, post = m.score_samples(X, lengths)
    assert logp == score and post.shape == (len(X), m.transmat_.shape[0])

@pytest.mark.parametrize("obs", ["gauss", "diag_gauss"])
def test_hmmlearn_given_the_point_estimates_scores_and_decodes_the_same(obs):
    hmm = pytest.importorskip("hmmlearn.hmm")
    X, lengths = _data()
    m = _fit(FiniteHMM(obs, n_components=3, max_laps=5, random_state=0), X, lengths)
    h = hmm.GaussianHMM(n_components=3, covariance_type="full", init_params="", params="")
    h.n_features = X.shape[1]
    h.startprob_, h.transmat_, h.means_, h.covars_ = m.startprob_, m.transmat_, m.means_, m.covars_
    assert np.isclose(h.score(X, lengths), m.score(X, lengths), rtol=1e-9)
    assert np.array_equal(h.predict(X, lengths), m.predict(X, lengths))
    assert np.allclose(h.predict_proba(X, lengths), m.predict_proba(X, lengths), atol=1e-9)
    (hp, hz), (mp, mz) = h.decode(X, lengths), m.decode(X, lengths)
    assert np.isclose(hp, mp, rtol=1e-9) and np.array_equal(hz, mz)
    assert np.allclose(h.get_stationary_distribution(), m.get_stationary_distribution(), atol=1e-9)
    assert h.n_features == m.n_features
