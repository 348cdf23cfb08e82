"""Self-checks of the numpy/scipy reference (``bnpcore._reference``) against itself and against
independent math (exact marginal likelihoods, Monte Carlo, closed-form identities).

The reference is the oracle for the Rust kernels, so it is checked here on its own:
(1) raw ELBO at optimal globals == ELBO from summaries (spec 01 P8);
(2) one cluster: ELBO data term == exact log marginal likelihood by the chain rule (P6);
(3) expected log-likelihood from summaries == sum over rows (P5);
(4) additivity of summaries (P9);
(5) Bregman divergences: zero on the diagonal, non-negative (P4);
(6) hard-label DP allocation term == log p(z) (P7);
(7) Monte-Carlo checks of E_q[log F] and of KL(q || p) (P1);
plus local/global-step optimality (P13, P15), the general-form identities of §3.3 and small
consistency checks of the allocation and scoring helpers.
"""

import bnpcore._reference as ref
import numpy as np
import pytest
from _helpers import KINDS
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import betaln

ALLOCS = ("dp", "finite")

SETTINGS = settings(max_examples=25, deadline=None)


def close(a, b, rtol):
    """|a - b| <= rtol * max(1, |b|) elementwise."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.all(np.abs(a - b) <= rtol * np.maximum(1.0, np.abs(b)))


# ----------------------------------------------------------------------------------------------
# random data, priors and responsibilities
# ----------------------------------------------------------------------------------------------


def random_spd(rng, D):
    A = rng.standard_normal((D, D))
    return A @ A.T + 0.5 * np.eye(D)


def make_prior(kind, rng, D):
    if kind == "gauss":
        return {
            "nu": D + 2.0 + rng.uniform(0.0, 2.0),
            "kappa": rng.uniform(0.1, 2.0),
            "m": rng.standard_normal(D),
            "B": random_spd(rng, D),
        }
    if kind == "diag_gauss":
        return {
            "nu": rng.uniform(2.5, 6.0),
            "kappa": rng.uniform(0.1, 2.0),
            "m": rng.standard_normal(D),
            "beta": rng.uniform(0.3, 3.0, size=D),
        }
    if kind == "zero_mean_gauss":
        return {"nu": D + 2.0 + rng.uniform(0.0, 2.0), "B": random_spd(rng, D)}
    if kind == "mult":
        return {"lam": rng.uniform(0.1, 2.0, size=D)}
    return {"lam1": rng.uniform(0.1, 2.0, size=D), "lam0": rng.uniform(0.1, 2.0, size=D)}


def make_data(kind, rng, n, D):
    if kind in ("gauss", "diag_gauss", "zero_mean_gauss"):
        return rng.standard_normal((n, D))
    if kind == "mult":
        return rng.poisson(2.0, size=(n, D)).astype(float)
    return rng.integers(0, 2, size=(n, D)).astype(float)


def make_dim(kind, rng):
    if kind == "mult":
        return int(rng.integers(2, 7))
    return int(rng.integers(1, 5))


def make_resp(rng, n, K):
    """Random responsibility rows (Dirichlet), some entries exactly zero."""
    R = rng.dirichlet(np.full(K, 0.7), size=n)
    if K > 1:
        mask = rng.random((n, K)) < 0.2
        mask[np.arange(n), rng.integers(0, K, size=n)] = False
        R[mask] = 0.0
        R /= R.sum(axis=1, keepdims=True)
    return R


def make_case(kind, seed, n, K):
    rng = np.random.default_rng(seed)
    D = make_dim(kind, rng)
    prior = make_prior(kind, rng, D)
    X = make_data(kind, rng, n, D)
    R = make_resp(rng, n, K)
    gamma = float(rng.uniform(0.2, 5.0))
    return rng, prior, X, R, gamma


seeds = st.integers(0, 2**31 - 1)
kinds = st.sampled_from(KINDS)
allocs = st.sampled_from(ALLOCS)
sizes = st.integers(1, 30)
n_comps = st.integers(1, 5)


# ----------------------------------------------------------------------------------------------
# (1) raw ELBO at optimal globals == ELBO from summaries  (P8)
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, kind=kinds, alloc=allocs, n=sizes, K=n_comps)
def test_raw_elbo_equals_summary_elbo(seed, kind, alloc, n, K):
    _, prior, X, R, gamma = make_case(kind, seed, n, K)
    N, S = ref.summarize(kind, X, R)
    H = ref.entropy(R)
    h = ref.h_sum(kind, X)
    from_summaries = ref.elbo(kind, prior, alloc, gamma, N, S, H, h)
    raw = ref.raw_elbo(kind, prior, alloc, gamma, X, R)
    assert close(raw, from_summaries, 1e-9), (raw, from_summaries)


@SETTINGS
@given(seed=seeds, kind=kinds, alloc=allocs, n=sizes, K=n_comps)
def test_raw_elbo_equals_general_form_at_any_globals(seed, kind, alloc, n, K):
    """§3.3: raw form == sum_k e_log_lik_sum - sum_k KL_phi + sum_k H_k + L_alloc(general form)."""
    rng, prior, X, R, gamma = make_case(kind, seed, n, K)
    N, S = ref.summarize(kind, X, R)
    N_post, S_post = ref.summarize(kind, X, make_resp(rng, n, K))
    raw = ref.raw_elbo(kind, prior, alloc, gamma, X, R, N_post=N_post, S_post=S_post)
    data = ref.e_log_lik_sum_from_stats(kind, prior, N_post, S_post, N, S).sum()
    data -= sum(ref.kl_posterior(kind, prior, p) for p in ref.posterior(kind, prior, N_post, S_post))
    if alloc == "dp":
        eta1, eta0 = ref.dp_eta(N_post, gamma)
        alloc_term = ref.dp_elbo_alloc(N, gamma, eta1, eta0)
    else:
        alloc_term = ref.finite_elbo_alloc(N, gamma, ref.finite_theta(N_post, gamma))
    general = data + ref.entropy(R).sum() + alloc_term
    assert close(raw, general, 1e-9), (raw, general)


@SETTINGS
@given(seed=seeds, kind=kinds, n=sizes, K=n_comps)
def test_elbo_data_general_form_at_optimum(seed, kind, n, K):
    """At the optimal posterior, sum_k e_log_lik_sum - KL == boxed L_data (c-function form)."""
    _, prior, X, R, _ = make_case(kind, seed, n, K)
    N, S = ref.summarize(kind, X, R)
    lhs = ref.e_log_lik_sum_from_stats(kind, prior, N, S, N, S).sum()
    lhs -= sum(ref.kl_posterior(kind, prior, p) for p in ref.posterior(kind, prior, N, S))
    rhs = ref.elbo_data(kind, prior, N, S, ref.h_sum(kind, X))
    assert close(lhs, rhs, 1e-9), (lhs, rhs)


# ----------------------------------------------------------------------------------------------
# (2) one cluster: L_data == exact log marginal likelihood  (P6)
# ----------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(seed=seeds, kind=kinds, n=sizes)
def test_single_cluster_elbo_data_is_log_marginal_likelihood(seed, kind, n):
    _, prior, X, _, gamma = make_case(kind, seed, n, 1)
    R = np.ones((n, 1))
    N, S = ref.summarize(kind, X, R)
    h = ref.h_sum(kind, X)
    exact = ref.log_marginal_likelihood(kind, prior, X)
    assert close(ref.elbo_data(kind, prior, N, S, h), exact, 1e-8)
    # whole-ELBO version: finite mixture with K = 1 has a point-mass allocation
    H = ref.entropy(R)
    assert close(ref.elbo(kind, prior, "finite", gamma, N, S, H, h), exact, 1e-8)
    # DP: plus the probability that every atom picks stick 1
    dp_extra = betaln(1.0 + n, gamma) - betaln(1.0, gamma)
    assert close(ref.elbo(kind, prior, "dp", gamma, N, S, H, h), exact + dp_extra, 1e-8)


def test_marginal_likelihood_of_empty_data_is_zero():
    rng = np.random.default_rng(0)
    for kind in KINDS:
        prior = make_prior(kind, rng, 3)
        assert ref.log_marginal_likelihood(kind, prior, np.zeros((0, 3))) == 0.0
        N, S = ref.summarize(kind, np.zeros((0, 3)), np.zeros((0, 1)))
        assert abs(ref.elbo_data(kind, prior, N, S, 0.0)) < 1e-12


# ----------------------------------------------------------------------------------------------
# (3) expected log-likelihood from summaries  (P5)
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, kind=kinds, n=sizes, K=n_comps)
def test_e_log_lik_sum_from_stats(seed, kind, n, K):
    rng, prior, X, R, _ = make_case(kind, seed, n, K)
    N_post, S_post = ref.summarize(kind, X, make_resp(rng, n, K))
    N, S = ref.summarize(kind, X, R)
    direct = (R * ref.e_log_lik(kind, prior, N_post, S_post, X)).sum(axis=0)
    from_stats = ref.e_log_lik_sum_from_stats(kind, prior, N_post, S_post, N, S)
    assert direct.shape == (K,)
    assert close(from_stats, direct, 1e-9)


# ----------------------------------------------------------------------------------------------
# (4) additivity  (P9)
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, kind=kinds, n=st.integers(2, 30), K=n_comps, data=st.data())
def test_summaries_are_additive(seed, kind, n, K, data):
    _, _prior, X, R, _ = make_case(kind, seed, n, K)
    cut = data.draw(st.integers(1, n - 1))
    N, S = ref.summarize(kind, X, R)
    N1, S1 = ref.summarize(kind, X[:cut], R[:cut])
    N2, S2 = ref.summarize(kind, X[cut:], R[cut:])
    assert S.shape == (K, ref.stat_dim(kind, X.shape[1]))
    assert close(N1 + N2, N, 1e-12)
    assert close(S1 + S2, S, 1e-12)
    assert close(ref.entropy(R[:cut]) + ref.entropy(R[cut:]), ref.entropy(R), 1e-12)
    assert close(ref.h_sum(kind, X[:cut]) + ref.h_sum(kind, X[cut:]), ref.h_sum(kind, X), 1e-12)
    pairs = [(a, b) for a in range(K) for b in range(a + 1, K)]
    if pairs:
        total = ref.pair_entropy(R[:cut], pairs) + ref.pair_entropy(R[cut:], pairs)
        assert close(total, ref.pair_entropy(R, pairs), 1e-12)


def test_summary_layout_matches_internals_doc():
    X = np.array([[1.0, 2.0], [3.0, -1.0]])
    R = np.array([[1.0], [0.5]])
    N, S = ref.summarize("gauss", X, R)
    Sx = X[0] + 0.5 * X[1]
    Sxx = np.outer(X[0], X[0]) + 0.5 * np.outer(X[1], X[1])
    np.testing.assert_allclose(N, [1.5])
    np.testing.assert_allclose(S[0], np.concatenate([Sx, Sxx.ravel()]))
    _, S = ref.summarize("diag_gauss", X, R)
    np.testing.assert_allclose(S[0], np.concatenate([Sx, X[0] ** 2 + 0.5 * X[1] ** 2]))
    _, S = ref.summarize("zero_mean_gauss", X, R)
    np.testing.assert_allclose(S[0], Sxx.ravel())
    for kind in ("mult", "bern"):
        _, S = ref.summarize(kind, X, R)
        np.testing.assert_allclose(S[0], Sx)


# ----------------------------------------------------------------------------------------------
# (5) Bregman divergences  (P4)
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, kind=kinds, n=sizes, data=st.data())
def test_smoothed_divergence_zero_on_diagonal_and_nonnegative(seed, kind, n, data):
    _, prior, X, _, _ = make_case(kind, seed, n, 1)
    i = data.draw(st.integers(0, n - 1))
    div = ref.smoothed_divergence(kind, prior, X, i)
    assert div.shape == (n,)
    assert abs(div[i]) <= 1e-12
    assert np.all(div >= -1e-12)
    # equal rows give zero divergence
    same = np.all(X[i] == X, axis=1)
    assert np.all(np.abs(div[same]) <= 1e-12)


def test_smoothed_divergence_matches_distribution_kl():
    rng = np.random.default_rng(1)
    # multinomial: C_n KL(bt_n || bt_i) with scipy's KL
    prior = make_prior("mult", rng, 4)
    X = make_data("mult", rng, 6, 4)
    div = ref.smoothed_divergence("mult", prior, X, 2)
    for j in range(6):
        bt_j = (X[j] + prior["lam"]) / (X[j].sum() + prior["lam"].sum())
        bt_i = (X[2] + prior["lam"]) / (X[2].sum() + prior["lam"].sum())
        assert np.isclose(div[j], X[j].sum() * stats.entropy(bt_j, bt_i), rtol=1e-10, atol=1e-12)
    # gauss: KL(N(x_n, S0) || N(x_i, S0)), S0 = B/(nu - D - 1)
    prior = make_prior("gauss", rng, 3)
    X = make_data("gauss", rng, 5, 3)
    div = ref.smoothed_divergence("gauss", prior, X, 0)
    S0 = prior["B"] / (prior["nu"] - 4.0)
    for j in range(5):
        d = X[j] - X[0]
        assert np.isclose(div[j], 0.5 * d @ np.linalg.inv(S0) @ d, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# (6) hard labels: DP allocation term == log p(z)  (P7)
# ----------------------------------------------------------------------------------------------


def log_p_z_chain_rule(z, gamma):
    """log p(z) = sum_n log E[pi_{z_n} | z_{<n}], sticks a posteriori Beta(1 + N_k, gamma + N^>_k)."""
    z = np.asarray(z)
    K = int(z.max()) + 1 if len(z) else 1
    counts = np.zeros(K)
    total = 0.0
    for label in z:
        n_gt = np.array([counts[k + 1:].sum() for k in range(K)])
        a, b = 1.0 + counts, gamma + n_gt
        u = a / (a + b)
        total += np.log(u[label]) + np.sum(np.log(1.0 - u[:label]))
        counts[label] += 1.0
    return total


@SETTINGS
@given(seed=seeds, n=sizes, K=n_comps, gamma=st.floats(0.05, 20.0))
def test_hard_assignment_dp_alloc_is_log_p_z(seed, n, K, gamma):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, size=n)
    R = np.eye(K)[z]
    N = R.sum(axis=0)
    lp = ref.log_p_z_hard(z, K, gamma)
    assert close(ref.dp_elbo_alloc(N, gamma), lp, 1e-9)
    assert close(log_p_z_chain_rule(z, gamma), lp, 1e-9)


# ----------------------------------------------------------------------------------------------
# (7) Monte Carlo: E_q[log F] and KL(q || p)  (P1)
# ----------------------------------------------------------------------------------------------


def sample_phi(kind, p, M, rng):
    """Draw M parameters from the conjugate density with parameter dict p (scipy samplers)."""
    if kind in ("gauss", "zero_mean_gauss"):
        D = p["B"].shape[0]
        Lam = stats.wishart(df=p["nu"], scale=np.linalg.inv(p["B"])).rvs(size=M, random_state=rng)
        Lam = np.asarray(Lam).reshape(M, D, D)
        if kind == "zero_mean_gauss":
            return {"Lam": Lam}
        cov = np.linalg.inv(p["kappa"] * Lam)
        mu = p["m"] + np.einsum("mij,mj->mi", np.linalg.cholesky(cov), rng.standard_normal((M, D)))
        return {"Lam": Lam, "mu": mu}
    if kind == "diag_gauss":
        D = len(p["m"])
        lam = rng.gamma(shape=p["nu"] / 2.0, scale=2.0 / p["beta"], size=(M, D))
        mu = p["m"] + rng.standard_normal((M, D)) / np.sqrt(p["kappa"] * lam)
        return {"lam": lam, "mu": mu}
    if kind == "mult":
        return {"beta": rng.dirichlet(p["lam"], size=M)}
    return {"theta": rng.beta(p["lam1"], p["lam0"], size=(M, len(p["lam1"])))}


def log_lik_samples(kind, phi, x):
    """log F(x | phi_m) for every draw m (scipy densities)."""
    if kind in ("gauss", "zero_mean_gauss"):
        Lam = phi["Lam"]
        diff = x[None, :] - phi["mu"] if kind == "gauss" else np.broadcast_to(x, (Lam.shape[0], len(x)))
        _, logdet = np.linalg.slogdet(Lam)
        quad = np.einsum("mi,mij,mj->m", diff, Lam, diff)
        return -0.5 * len(x) * np.log(2 * np.pi) + 0.5 * logdet - 0.5 * quad
    if kind == "diag_gauss":
        return stats.norm.logpdf(x[None, :], loc=phi["mu"], scale=1.0 / np.sqrt(phi["lam"])).sum(axis=1)
    if kind == "mult":
        return (x[None, :] * np.log(phi["beta"])).sum(axis=1)
    return stats.bernoulli.logpmf(x[None, :], phi["theta"]).sum(axis=1)


def log_prior_samples(kind, p, phi):
    """log P(phi_m | p) for every draw m (scipy densities)."""
    if kind in ("gauss", "zero_mean_gauss"):
        Lam = phi["Lam"]
        logw = stats.wishart(df=p["nu"], scale=np.linalg.inv(p["B"])).logpdf(np.moveaxis(Lam, 0, -1))
        logw = np.atleast_1d(logw)
        if kind == "zero_mean_gauss":
            return logw
        D = Lam.shape[1]
        diff = phi["mu"] - p["m"]
        _, logdet = np.linalg.slogdet(p["kappa"] * Lam)
        quad = p["kappa"] * np.einsum("mi,mij,mj->m", diff, Lam, diff)
        return logw - 0.5 * D * np.log(2 * np.pi) + 0.5 * logdet - 0.5 * quad
    if kind == "diag_gauss":
        lam = phi["lam"]
        out = stats.gamma.logpdf(lam, a=p["nu"] / 2.0, scale=2.0 / p["beta"])
        out += stats.norm.logpdf(phi["mu"], loc=p["m"], scale=1.0 / np.sqrt(p["kappa"] * lam))
        return out.sum(axis=1)
    if kind == "mult":
        return np.array([stats.dirichlet.logpdf(b, p["lam"]) for b in phi["beta"]])
    return stats.beta.logpdf(phi["theta"], p["lam1"], p["lam0"]).sum(axis=1)


@pytest.mark.parametrize("kind", KINDS)
def test_monte_carlo_e_log_lik_and_kl(kind):
    rng = np.random.default_rng(12345)
    D = 3
    prior = make_prior(kind, rng, D)
    X = make_data(kind, rng, 8, D)
    N, S = ref.summarize(kind, X, make_resp(rng, 8, 2))
    post = ref.posterior(kind, prior, N, S)[0]
    M = 20000 if kind != "mult" else 4000
    phi = sample_phi(kind, post, M, rng)
    # E_q[log F(x | phi)] for two rows
    C = ref.e_log_lik(kind, prior, N, S, X[:2])
    for i in range(2):
        draws = log_lik_samples(kind, phi, X[i])
        se = draws.std() / np.sqrt(M)
        assert abs(draws.mean() - C[i, 0]) <= 5 * se + 1e-12, (draws.mean(), C[i, 0], se)
    # KL(q || p) = E_q[log q - log p]
    draws = log_prior_samples(kind, post, phi) - log_prior_samples(kind, prior, phi)
    se = draws.std() / np.sqrt(M)
    kl = ref.kl_posterior(kind, prior, post)
    assert abs(draws.mean() - kl) <= 5 * se + 1e-12, (draws.mean(), kl, se)


# ----------------------------------------------------------------------------------------------
# local and global step optimality  (P13, P15)
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, kind=kinds, alloc=allocs, n=sizes, K=n_comps)
def test_local_step_is_optimal_for_fixed_globals(seed, kind, alloc, n, K):
    rng, prior, X, R, gamma = make_case(kind, seed, n, K)
    N_post, S_post = ref.summarize(kind, X, make_resp(rng, n, K))
    R_star = ref.local_step(kind, prior, alloc, gamma, N_post, S_post, X)
    assert np.all(R_star >= 0)
    assert close(R_star.sum(axis=1), np.ones(n), 1e-12)
    best = ref.raw_elbo(kind, prior, alloc, gamma, X, R_star, N_post=N_post, S_post=S_post)
    other = ref.raw_elbo(kind, prior, alloc, gamma, X, R, N_post=N_post, S_post=S_post)
    assert other <= best + 1e-9 * max(1.0, abs(best))


@SETTINGS
@given(seed=seeds, kind=kinds, alloc=allocs, n=sizes, K=n_comps)
def test_global_step_is_optimal_for_fixed_resp(seed, kind, alloc, n, K):
    rng, prior, X, R, gamma = make_case(kind, seed, n, K)
    best = ref.raw_elbo(kind, prior, alloc, gamma, X, R)
    N_post, S_post = ref.summarize(kind, X, make_resp(rng, n, K))
    other = ref.raw_elbo(kind, prior, alloc, gamma, X, R, N_post=N_post, S_post=S_post)
    assert other <= best + 1e-9 * max(1.0, abs(best))


# ----------------------------------------------------------------------------------------------
# merge entropies and restricted (proposal) steps
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, kind=kinds, n=sizes, K=st.integers(2, 5), J=st.integers(1, 4))
def test_pair_entropy_and_proposal_summaries(seed, kind, n, K, J):
    rng, _prior, X, R, _ = make_case(kind, seed, n, K)
    # pair entropy == entropy of the explicitly merged column
    merged = R[:, 0] + R[:, K - 1]
    assert close(ref.pair_entropy(R, [(0, K - 1)])[0], ref.entropy(merged[:, None])[0], 1e-12)
    # restricted step == summaries of the explicit r'
    src = [0] if K == 2 else [0, K - 1]
    dest_W = rng.standard_normal((n, J)) * 3.0
    P = np.exp(dest_W - dest_W.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    a = R[:, src].sum(axis=1)
    # every row spread by the softmax (min_mass=0), then half the rows below the threshold: their
    # whole mass on the first destination column; rows still sum to a_n
    for min_mass in (0.0, float(np.median(a))):
        N_new, S_new, H_new = ref.proposal_summaries(kind, X, R, src, dest_W, min_mass=min_mass)
        low = a <= min_mass
        R_new = a[:, None] * np.where(low[:, None], np.eye(J)[0][None, :], P)
        assert np.allclose(R_new.sum(axis=1), a, rtol=1e-12, atol=0)
        N_exp, S_exp = ref.summarize(kind, X, R_new)
        assert close(N_new, N_exp, 1e-12)
        assert close(S_new, S_exp, 1e-12)
        assert close(H_new, ref.entropy(R_new), 1e-12)


# ----------------------------------------------------------------------------------------------
# allocation helpers
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, K=n_comps, gamma=st.floats(0.05, 20.0))
def test_allocation_helpers(seed, K, gamma):
    rng = np.random.default_rng(seed)
    N = rng.uniform(0.0, 20.0, size=K)
    eta1, eta0 = ref.dp_eta(N, gamma)
    assert eta0[-1] == gamma  # P16
    assert close(eta0[:-1], gamma + np.cumsum(N[::-1])[::-1][1:], 1e-12)
    e_pi = ref.dp_e_pi(eta1, eta0)
    assert e_pi.sum() < 1.0
    assert np.all(np.exp(ref.dp_e_log_pi(eta1, eta0)) <= e_pi + 1e-15)  # Jensen (P11)
    # prior sticks: E[pi_k] = gamma^(k-1)/(1+gamma)^k
    k = np.arange(1, K + 1)
    prior_e_pi = ref.dp_e_pi(np.ones(K), np.full(K, gamma))
    assert close(prior_e_pi, gamma ** (k - 1) / (1.0 + gamma) ** k, 1e-12)
    for alloc in ALLOCS:
        w = ref.weights(alloc, N, gamma)
        assert close(w.sum(), 1.0, 1e-12) and np.all(w > 0)
    # empty clusters (nested truncation, P17): appending one leaves the DP term unchanged
    assert close(ref.dp_elbo_alloc(np.append(N, 0.0), gamma), ref.dp_elbo_alloc(N, gamma), 1e-12)
    # finite mixture, K = 1: allocation term is 0
    assert abs(ref.finite_elbo_alloc(N[:1], gamma)) < 1e-12
    # the general forms are maximised at the optimal allocation parameters
    assert ref.dp_elbo_alloc(N, gamma, eta1 * 1.1, eta0 + 0.3) <= ref.dp_elbo_alloc(N, gamma) + 1e-12
    theta = ref.finite_theta(N, gamma)
    assert ref.finite_elbo_alloc(N, gamma, theta * 1.2 + 0.1) <= ref.finite_elbo_alloc(N, gamma) + 1e-12


# ----------------------------------------------------------------------------------------------
# point estimates, plug-in densities, held-out score
# ----------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=seeds, kind=kinds, n=sizes, K=n_comps)
def test_point_estimates_and_score_samples(seed, kind, n, K):
    _, prior, X, R, gamma = make_case(kind, seed, n, K)
    N, S = ref.summarize(kind, X, R)
    pe = ref.point_estimates(kind, prior, N, S)
    D = X.shape[1]
    posts = ref.posterior(kind, prior, N, S)
    log_f = ref.log_density(kind, pe, X)
    assert log_f.shape == (n, K)
    for k in range(K):
        if kind == "gauss":
            cov = posts[k]["B"] / (posts[k]["nu"] - D - 1)
            expected = stats.multivariate_normal(posts[k]["m"], cov).logpdf(X)
        elif kind == "diag_gauss":
            sd = np.sqrt(posts[k]["beta"] / (posts[k]["nu"] - 2))
            expected = stats.norm.logpdf(X, posts[k]["m"], sd).sum(axis=1)
        elif kind == "zero_mean_gauss":
            cov = posts[k]["B"] / (posts[k]["nu"] - D - 1)
            expected = stats.multivariate_normal(np.zeros(D), cov).logpdf(X)
        elif kind == "mult":
            expected = X @ np.log(posts[k]["lam"] / posts[k]["lam"].sum())
        else:
            theta = posts[k]["lam1"] / (posts[k]["lam1"] + posts[k]["lam0"])
            expected = stats.bernoulli.logpmf(X, theta).sum(axis=1)
        assert close(log_f[:, k], np.atleast_1d(expected), 1e-9)
    w = ref.weights("dp", N, gamma)
    score = ref.score_samples(kind, w, pe, X)
    if kind == "mult":  # the probability of the count vectors: scipy's multinomial, coefficient included
        n = X.sum(axis=1).astype(int)
        beta = [posts[k]["lam"] / posts[k]["lam"].sum() for k in range(len(posts))]
        want = np.log(sum(w[k] * stats.multinomial.pmf(X, n, beta[k]) for k in range(len(posts))))
    else:
        want = np.log(np.exp(log_f) @ w)
    assert close(score, want, 1e-9)


def test_unknown_kind_raises():
    with pytest.raises(ValueError):
        ref.h_sum("poisson", np.zeros((2, 2)))
    with pytest.raises(ValueError):
        ref.weights("hdp", np.ones(2), 1.0)
