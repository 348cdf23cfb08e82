"""Reference (numpy/scipy) first-order auto-regressive Gaussian with a Matrix-Normal-Wishart prior
(Hughes thesis Eq. 6.3; Fox et al. 2014).

Model: x_t | state k ~ N(A_k p_t, Lambda_k^{-1}) with covariate p_t = x_{t-1}; prior
Lambda ~ Wishart(nu, B^{-1}) (E[Lambda] = nu B^{-1}), A | Lambda ~ MN(M, Lambda^{-1}, V^{-1}).
Data rows are y = [x, p] (F + E columns). ``prior`` is a dict with ``nu``, ``B`` (F x F),
``M`` (F x E) and ``V`` (E x E).
"""

import numpy as np
from scipy.special import digamma, multigammaln


def summarize(Y, R, F):
    """N_k = sum_t r_tk; S_k = vec(sum_t r_tk y_t y_t^T) (row-major), y = [x, p]."""
    Y = np.asarray(Y, dtype=float)
    N = R.sum(axis=0)
    S = np.stack([(Y * R[:, [k]]).T @ Y for k in range(R.shape[1])]).reshape(R.shape[1], -1)
    return N, S


def posterior(prior, N, S, F):
    """nu' = nu + N; V' = V + Spp; M' = (Sxp + M V) V'^{-1}; B' = B + Sxx + M V M^T - M' V' M'^T."""
    nu, B, M, V = prior["nu"], prior["B"], prior["M"], prior["V"]
    D = int(round(np.sqrt(S.shape[1])))
    out = []
    for k in range(len(N)):
        Syy = S[k].reshape(D, D)
        Sxx, Sxp, Spp = Syy[:F, :F], Syy[:F, F:], Syy[F:, F:]
        Vp = V + Spp
        Mp = np.linalg.solve(Vp.T, (Sxp + M @ V).T).T
        Bp = B + Sxx + M @ V @ M.T - Mp @ Vp @ Mp.T
        out.append({"nu": nu + N[k], "M": Mp, "B": (Bp + Bp.T) / 2, "V": (Vp + Vp.T) / 2})
    return out


def c_func(p, F):
    """Log normaliser c = nu/2 ln|B| - nu F/2 ln 2 - ln Gamma_F(nu/2) + F/2 ln|V|."""
    return (
        0.5 * p["nu"] * np.linalg.slogdet(p["B"])[1]
        - 0.5 * p["nu"] * F * np.log(2)
        - multigammaln(0.5 * p["nu"], F)
        + 0.5 * F * np.linalg.slogdet(p["V"])[1]
    )


def e_log_lik(prior, N_post, S_post, Y, F):
    """C_tk = -F/2 ln 2 pi + 1/2 E ln|Lambda_k| - 1/2 [nu' (x - M' p)^T B'^{-1} (x - M' p) + F p^T V'^{-1} p],
    E ln|Lambda| = sum_i psi((nu' + 1 - i)/2) + F ln 2 - ln|B'|."""
    Y = np.asarray(Y, dtype=float)
    X, P = Y[:, :F], Y[:, F:]
    out = np.zeros((len(Y), len(N_post)))
    for k, p in enumerate(posterior(prior, N_post, S_post, F)):
        e_logdet = digamma((p["nu"] + 1 - np.arange(1, F + 1)) / 2).sum() + F * np.log(2) - np.linalg.slogdet(p["B"])[1]
        R = X - P @ p["M"].T
        maha = np.einsum("ti,ij,tj->t", R, np.linalg.inv(p["B"]), R)
        quad = np.einsum("ti,ij,tj->t", P, np.linalg.inv(p["V"]), P)
        out[:, k] = -0.5 * F * np.log(2 * np.pi) + 0.5 * e_logdet - 0.5 * (p["nu"] * maha + F * quad)
    return out


def elbo_data(prior, N, S, F):
    """At the optimal posterior: sum_t h(x_t) + sum_k [c(prior) - c(post_k)], h = -F/2 ln 2 pi."""
    c0 = c_func(prior, F)
    return -0.5 * np.sum(N) * F * np.log(2 * np.pi) + sum(c0 - c_func(p, F) for p in posterior(prior, N, S, F))
