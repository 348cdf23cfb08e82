"""Reference (numpy/scipy) implementation of the ELBO (Hughes thesis eqs. 3.24–3.51, §2.5) and of the plug-in
held-out score."""

import numpy as np
from scipy.special import gammaln, logsumexp

from .alloc import (
    _check_alloc,
    dp_elbo_alloc,
    dp_eta,
    dp_kl_sticks,
    finite_elbo_alloc,
    finite_kl,
    finite_theta,
)
from .local import e_log_pi
from .obs import e_log_lik, elbo_data, kl_posterior, log_density, posterior, summarize


def elbo(kind, prior, alloc, gamma, N, S, H, h):
    """ELBO at optimal global parameters, from summaries only (Hughes thesis eqs. 3.42, 3.44, 3.51; §2.5 for the finite mixture):

    L = h + sum_k [c(prior) - c(prior (+) (N_k, S_k))] + sum_k H_k + L_alloc,
    L_alloc (dp) = sum_k [c_Beta(1, gamma) - c_Beta(1 + N_k, gamma + N^>_k)],
    L_alloc (finite) = c_Dir(gamma/K 1_K) - c_Dir(gamma/K + N).
    """
    _check_alloc(alloc)
    H = np.atleast_1d(np.asarray(H, dtype=float))
    total = elbo_data(kind, prior, N, S, h) + float(H.sum())
    if alloc == "dp":
        total += dp_elbo_alloc(N, gamma)
    else:
        total += finite_elbo_alloc(N, gamma)
    return float(total)


def raw_elbo(kind, prior, alloc, gamma, X, R, N_post=None, S_post=None):
    """ELBO in "raw" form evaluated on the data (Hughes thesis eqs. 3.24–3.36), valid for any globals:

    L = sum_{n,k} r_nk (W_nk - ln r_nk) - sum_k KL(q(phi_k) || p(phi)) - KL_alloc,
    W_nk = E_q[log F(x_n | phi_k)] + E_q[ln pi_k],
    KL_alloc (dp) = sum_k KL(Beta(eta1_k, eta0_k) || Beta(1, gamma)),
    KL_alloc (finite) = KL(Dir(theta) || Dir(gamma/K 1_K)),
    where q(phi_k) = posterior(prior, N_post, S_post), (eta1, eta0) = dp_eta(N_post, gamma),
    theta = gamma/K + N_post, and (N_post, S_post) default to summarize(X, R) (optimal globals).
    Terms with r_nk = 0 contribute 0.
    """
    _check_alloc(alloc)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    R = np.atleast_2d(np.asarray(R, dtype=float))
    if N_post is None or S_post is None:
        N_post, S_post = summarize(kind, X, R)
    W = e_log_lik(kind, prior, N_post, S_post, X) + e_log_pi(alloc, N_post, gamma)[None, :]
    total = 0.0
    for i in range(R.shape[0]):
        for k in range(R.shape[1]):
            r = R[i, k]
            if r > 0:
                total += r * (W[i, k] - np.log(r))
    for post in posterior(kind, prior, N_post, S_post):
        total -= kl_posterior(kind, prior, post)
    if alloc == "dp":
        total -= dp_kl_sticks(*dp_eta(N_post, gamma), gamma)
    else:
        total -= finite_kl(finite_theta(N_post, gamma), gamma)
    return float(total)


def score_samples(kind, weights, point_estimates_dict, X):
    """Plug-in mixture log density: log sum_k w_k F(x_n | phi_hat_k).

    For mult, F is the multinomial probability of the counts: log_density (sum_v x_v ln beta_kv)
    plus the multinomial coefficient ln(n!/prod_v x_v!), n = sum_v x_v, which does not depend on k.

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    w = np.asarray(weights, dtype=float)
    log_f = log_density(kind, point_estimates_dict, X)
    with np.errstate(divide="ignore"):
        log_w = np.log(w)
    out = logsumexp(log_f + log_w[None, :], axis=1)
    if kind == "mult":
        X = np.atleast_2d(np.asarray(X, dtype=float))
        out = out + gammaln(X.sum(axis=1) + 1.0) - gammaln(X + 1.0).sum(axis=1)
    return out
