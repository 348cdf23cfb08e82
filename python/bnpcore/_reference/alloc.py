"""Reference (numpy/scipy) implementation of the allocation models (Hughes thesis §3.3–3.4, §2.5).

Two allocation kinds:

* ``"dp"``: stick-breaking DP mixture, q(u_k) = Beta(eta1_k, eta0_k), optimal eta1_k = 1 + N_k,
  eta0_k = gamma + N^>_k with N^>_k = sum_{l>k} N_l.
* ``"finite"``: finite mixture, q(pi) = Dir(theta), optimal theta_k = gamma/K + N_k.
"""

import numpy as np
from scipy.special import betaln, digamma

from .obs import c_beta, c_dir

ALLOCS = ("dp", "finite")


def _check_alloc(alloc):
    if alloc not in ALLOCS:
        raise ValueError(f"unknown allocation model {alloc!r}; expected one of {ALLOCS}")


def _n_greater(N):
    """N^>_k = sum_{l>k} N_l (reverse exclusive cumulative sum), tiny negative round-off clamped to 0."""
    N = np.asarray(N, dtype=float)
    out = np.zeros(len(N))
    for k in range(len(N)):
        out[k] = max(0.0, float(np.sum(N[k + 1:])))
    return out


# ----------------------------------------------------------------------------------------------
# DP (stick-breaking) allocation
# ----------------------------------------------------------------------------------------------


def dp_eta(N, gamma):
    """Optimal stick posteriors: eta1_k = 1 + N_k, eta0_k = gamma + sum_{l>k} N_l.

    Returns
    -------
    eta1, eta0 : ndarrays of shape (n_components,)
    """
    N = np.atleast_1d(np.asarray(N, dtype=float))
    return 1.0 + N, gamma + _n_greater(N)


def dp_e_log_pi(eta1, eta0):
    """E[ln pi_k] = E[ln u_k] + sum_{l<k} E[ln(1 - u_l)], with
    E[ln u] = psi(eta1) - psi(eta1 + eta0), E[ln(1 - u)] = psi(eta0) - psi(eta1 + eta0).

    Returns
    -------
    ndarray of shape (n_components,)
    """
    eta1 = np.atleast_1d(np.asarray(eta1, dtype=float))
    eta0 = np.atleast_1d(np.asarray(eta0, dtype=float))
    e_log_u = digamma(eta1) - digamma(eta1 + eta0)
    e_log_1mu = digamma(eta0) - digamma(eta1 + eta0)
    out = np.zeros(len(eta1))
    for k in range(len(eta1)):
        out[k] = e_log_u[k] + np.sum(e_log_1mu[:k])
    return out


def dp_e_pi(eta1, eta0):
    """E[pi_k] = u_hat_k prod_{l<k} (1 - u_hat_l), u_hat = eta1/(eta1 + eta0).

    The entries sum to 1 - prod_k (1 - u_hat_k) < 1 (the rest is the tail's mass).
    """
    eta1 = np.atleast_1d(np.asarray(eta1, dtype=float))
    eta0 = np.atleast_1d(np.asarray(eta0, dtype=float))
    u_hat = eta1 / (eta1 + eta0)
    out = np.zeros(len(eta1))
    for k in range(len(eta1)):
        out[k] = u_hat[k] * np.prod(1.0 - u_hat[:k])
    return out


def dp_elbo_alloc(N, gamma, eta1=None, eta0=None):
    """DP allocation term of the ELBO, general form (Hughes thesis eqs. 3.24–3.36):

    L_DP-alloc = sum_k [ c_Beta(1, gamma) - c_Beta(eta1_k, eta0_k)
                         + (1 + N_k - eta1_k) E[ln u_k] + (gamma + N^>_k - eta0_k) E[ln(1 - u_k)] ],
    c_Beta(a, b) = lnGamma(a + b) - lnGamma(a) - lnGamma(b). eta1/eta0 default to the optimal values
    of dp_eta(N, gamma), where the last two terms vanish.
    """
    N = np.atleast_1d(np.asarray(N, dtype=float))
    opt1, opt0 = dp_eta(N, gamma)
    eta1 = opt1 if eta1 is None else np.atleast_1d(np.asarray(eta1, dtype=float))
    eta0 = opt0 if eta0 is None else np.atleast_1d(np.asarray(eta0, dtype=float))
    e_log_u = digamma(eta1) - digamma(eta1 + eta0)
    e_log_1mu = digamma(eta0) - digamma(eta1 + eta0)
    total = 0.0
    for k in range(len(N)):
        total += (
            c_beta(1.0, gamma)
            - c_beta(eta1[k], eta0[k])
            + (opt1[k] - eta1[k]) * e_log_u[k]
            + (opt0[k] - eta0[k]) * e_log_1mu[k]
        )
    return float(total)


def dp_kl_sticks(eta1, eta0, gamma):
    """sum_k KL(Beta(eta1_k, eta0_k) || Beta(1, gamma)), each in closed form:
    KL(Beta(a, b) || Beta(a0, b0)) = c_Beta(a, b) - c_Beta(a0, b0)
        + (a - a0)(psi(a) - psi(a + b)) + (b - b0)(psi(b) - psi(a + b))."""
    eta1 = np.atleast_1d(np.asarray(eta1, dtype=float))
    eta0 = np.atleast_1d(np.asarray(eta0, dtype=float))
    total = 0.0
    for a, b in zip(eta1, eta0):
        total += (
            c_beta(a, b)
            - c_beta(1.0, gamma)
            + (a - 1.0) * (digamma(a) - digamma(a + b))
            + (b - gamma) * (digamma(b) - digamma(a + b))
        )
    return float(total)


def log_p_z_hard(z, K, gamma):
    """log p(z) of hard labels z in {0..K-1} under the stick-breaking prior:

    log p(z) = sum_k ln[ B(1 + N_k, gamma + N^>_k) / B(1, gamma) ], N_k = #{n : z_n = k},
    B = Beta function (p(z) = prod_k E_{u_k ~ Beta(1, gamma)}[u_k^{N_k} (1 - u_k)^{N^>_k}]).
    """
    z = np.asarray(z, dtype=int)
    N = np.array([np.sum(z == k) for k in range(K)], dtype=float)
    N_gt = _n_greater(N)
    total = 0.0
    for k in range(K):
        total += betaln(1.0 + N[k], gamma + N_gt[k]) - betaln(1.0, gamma)
    return float(total)


# ----------------------------------------------------------------------------------------------
# finite (Dirichlet) allocation
# ----------------------------------------------------------------------------------------------


def finite_theta(N, gamma):
    """Optimal Dirichlet posterior theta_k = gamma/K + N_k."""
    N = np.atleast_1d(np.asarray(N, dtype=float))
    return gamma / len(N) + N


def finite_e_log_pi(theta):
    """E[ln pi_k] = psi(theta_k) - psi(sum_l theta_l) under Dir(theta)."""
    theta = np.atleast_1d(np.asarray(theta, dtype=float))
    return digamma(theta) - digamma(theta.sum())


def finite_elbo_alloc(N, gamma, theta=None):
    """Dirichlet allocation term of the ELBO (Hughes thesis §2.5):

    L_Dir-alloc = c_Dir(gamma/K * 1_K) - c_Dir(theta) + sum_k (N_k + gamma/K - theta_k) E[ln pi_k],
    with c_Dir(gamma/K * 1_K) counted ONCE; theta defaults to the optimum gamma/K + N.
    """
    N = np.atleast_1d(np.asarray(N, dtype=float))
    K = len(N)
    opt = finite_theta(N, gamma)
    theta = opt if theta is None else np.atleast_1d(np.asarray(theta, dtype=float))
    e_log_pi = finite_e_log_pi(theta)
    return float(c_dir(np.full(K, gamma / K)) - c_dir(theta) + np.sum((opt - theta) * e_log_pi))


def finite_kl(theta, gamma):
    """KL(Dir(theta) || Dir(gamma/K * 1_K)) = c_Dir(theta) - c_Dir(gamma/K 1)
    + sum_k (theta_k - gamma/K)(psi(theta_k) - psi(sum theta))."""
    theta = np.atleast_1d(np.asarray(theta, dtype=float))
    K = len(theta)
    prior = np.full(K, gamma / K)
    return float(c_dir(theta) - c_dir(prior) + np.sum((theta - prior) * finite_e_log_pi(theta)))


# ----------------------------------------------------------------------------------------------
# weights
# ----------------------------------------------------------------------------------------------


def weights(kind, N, gamma):
    """Mixture weights reported to users (``weights_``).

    dp: w_k = E[pi_k] / sum_l E[pi_l] with E[pi] from the optimal sticks of N (tail mass dropped);
    finite: w_k = theta_k / sum_l theta_l, theta = gamma/K + N.
    """
    _check_alloc(kind)
    if kind == "dp":
        e_pi = dp_e_pi(*dp_eta(N, gamma))
        return e_pi / e_pi.sum()
    theta = finite_theta(N, gamma)
    return theta / theta.sum()


# ----------------------------------------------------------------------------------------------
# dispatch by kind: expected weights, ELBO term, merge change
# ----------------------------------------------------------------------------------------------


def e_pi(kind, N, gamma):
    """Expected weights E[pi_k] at the optimal allocation posterior of counts N.

    dp: u_hat_k prod_{l<k} (1 - u_hat_l) with the optimal sticks (sums to < 1);
    finite: theta_k / sum_l theta_l, theta = gamma/K + N.
    """
    _check_alloc(kind)
    if kind == "dp":
        return dp_e_pi(*dp_eta(N, gamma))
    theta = finite_theta(N, gamma)
    return theta / theta.sum()


def elbo_alloc(kind, N, gamma):
    """Allocation term of the ELBO at the optimal allocation posterior of counts N
    (dp_elbo_alloc or finite_elbo_alloc)."""
    _check_alloc(kind)
    if kind == "dp":
        return dp_elbo_alloc(N, gamma)
    return finite_elbo_alloc(N, gamma)


def merge_delta(kind, N, gamma):
    """Exact change of the allocation ELBO term when clusters i < j merge, for every pair, by its
    definition:

    Delta[i, j] = elbo_alloc(N') - elbo_alloc(N),  N' = N with N'_i = N_i + N_j and entry j removed
    (finite: the merged model has K - 1 clusters, so its prior is Dir(gamma/(K-1))).

    Entries with i >= j are -inf. Costs O(K^3); the Rust kernel gets the same numbers in O(K^2).
    """
    _check_alloc(kind)
    N = np.atleast_1d(np.asarray(N, dtype=float))
    K = len(N)
    out = np.full((K, K), -np.inf)
    base = elbo_alloc(kind, N, gamma)
    for i in range(K):
        for j in range(i + 1, K):
            merged = N.copy()
            merged[i] += merged[j]
            merged = np.delete(merged, j)
            out[i, j] = elbo_alloc(kind, merged, gamma) - base
    return out
