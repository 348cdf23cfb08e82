"""Auto-regressive Gaussian observation model (``ObsModel("ar_gauss", ...)``) against the numpy
reference ``bnpcore._reference.ar_gauss``, and its posterior against exact Bayesian multivariate
linear regression (T-OBS): the data ELBO at the optimal posterior equals the log evidence, checked
with the candidate's formula ``log p(X) = log p(X | A, Lam) + log p(A, Lam) - log p(A, Lam | X)`` at a
random ``(A, Lam)`` with scipy's Wishart and matrix-normal densities."""

import numpy as np
from bnpcore import _core
from bnpcore._reference import ar_gauss as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import matrix_normal, multivariate_normal, wishart

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_spd(rng, d, scale=1.0):
    a = rng.normal(size=(d, d))
    return scale * (a @ a.T / d + np.eye(d))


@st.composite
def cases(draw):
    F = draw(st.integers(1, 3))
    E = draw(st.integers(1, 3))
    n = draw(st.integers(1, 25))
    K = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    prior = {"nu": F + 1.0 + rng.uniform(0.5, 4.0), "B": random_spd(rng, F), "M": rng.normal(0, 0.5, (F, E)), "V": random_spd(rng, E)}
    Y = rng.normal(0.0, 1.5, size=(n, F + E))
    R = rng.dirichlet(np.ones(K), size=n)
    R_post = rng.dirichlet(np.ones(K), size=n)
    return F, E, prior, Y, R, R_post, rng


def close(a, b, rtol=1e-10):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape
    assert np.all(np.abs(a - b) <= rtol * np.maximum(1.0, np.abs(b))), float(np.max(np.abs(a - b)))


@SETTINGS
@given(cases())
def test_core_equals_reference(case):
    F, E, prior, Y, R, R_post, _ = case
    obs = _core.ObsModel("ar_gauss", prior)
    assert obs.n_features == F + E and obs.stat_dim == (F + E) ** 2
    N, S = obs.summarize(Y, R)
    Nr, Sr = ref.summarize(Y, R, F)
    close(N, Nr)
    close(S, Sr, rtol=1e-12 * max(1.0, float(np.abs(Y).max()) ** 2))
    n_post, s_post = obs.summarize(Y, R_post)
    close(obs.e_log_lik(Y, n_post, s_post), ref.e_log_lik(prior, n_post, s_post, Y, F), rtol=1e-9)
    h = -0.5 * N.sum() * F * np.log(2 * np.pi)
    close(obs.elbo_data(N, S) + h, ref.elbo_data(prior, N, S, F), rtol=1e-9)
    # sum_t r_tk C_tk from the statistics equals the direct sum
    C = obs.e_log_lik(Y, n_post, s_post)
    close(obs.e_log_lik_sum_from_stats(n_post, s_post, N, S), (R * C).sum(axis=0), rtol=1e-9)


@SETTINGS
@given(cases())
def test_data_elbo_is_the_exact_log_evidence(case):
    F, E, prior, Y, _, _, rng = case
    obs = _core.ObsModel("ar_gauss", prior)
    R = np.ones((len(Y), 1))
    N, S = obs.summarize(Y, R)
    elbo = obs.h_sum(Y) + obs.elbo_data(N, S)
    (post,) = ref.posterior(prior, N, S, F)
    lam = wishart(df=prior["nu"], scale=np.linalg.inv(prior["B"])).rvs(random_state=rng).reshape(F, F)
    cov = np.linalg.inv(lam)
    A = rng.normal(0.0, 0.5, size=(F, E))
    X, P = Y[:, :F], Y[:, F:]
    loglik = sum(multivariate_normal(A @ p, cov).logpdf(x) for x, p in zip(X, P))
    log_prior = wishart(df=prior["nu"], scale=np.linalg.inv(prior["B"])).logpdf(lam) + matrix_normal(
        mean=prior["M"], rowcov=cov, colcov=np.linalg.inv(prior["V"])
    ).logpdf(A)
    log_post = wishart(df=post["nu"], scale=np.linalg.inv(post["B"])).logpdf(lam) + matrix_normal(
        mean=post["M"], rowcov=cov, colcov=np.linalg.inv(post["V"])
    ).logpdf(A)
    evidence = loglik + log_prior - log_post
    assert abs(elbo - evidence) <= 1e-7 * max(1.0, abs(evidence))


def test_ar_observations_in_an_hmm_local_step():
    """The fused HMM local step accepts the AR model (rows [x_t, x_{t-1}])."""
    from bnpcore.datasets import make_sticky_hmm

    X, _, _ = make_sticky_hmm("ar", n_seqs=3, seq_len=50, random_state=0)
    rows, bounds = [], [0]
    for d in range(3):
        x = X[d * 50 : (d + 1) * 50]
        rows.append(np.hstack([x[1:], x[:-1]]))
        bounds.append(bounds[-1] + 49)
    Y = np.vstack(rows)
    sr = np.array(bounds, dtype=np.int64)
    prior = {"nu": 5.0, "B": np.eye(3), "M": np.zeros((3, 3)), "V": np.eye(3)}
    obs = _core.ObsModel("ar_gauss", prior)
    rng = np.random.default_rng(0)
    n_post, s_post = obs.summarize(Y, rng.dirichlet(np.ones(4), size=len(Y)))
    P = np.log(np.full((5, 5), 0.19))
    out = _core.hmm_local_step(obs, Y, n_post, s_post, sr, P[0, :4].copy(), np.ascontiguousarray(P[1:, :4]), return_resp=True)
    _, S = ref.summarize(Y, out["resp"], 3)
    assert np.allclose(out["S"], S, rtol=1e-10, atol=1e-10)
    assert abs(out["N"].sum() - len(Y)) < 1e-9
