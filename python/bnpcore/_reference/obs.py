"""Reference (numpy/scipy) implementation of the five conjugate observation models.

This module is the test oracle for the Rust observation-model kernels (Hughes thesis §2.2, §3.6). It is written
for readability, not speed: explicit loops over clusters (and over rows where that is clearer).

Conventions (``docs/internals.md``):

* ``kind`` is one of ``"gauss"``, ``"diag_gauss"``, ``"zero_mean_gauss"``, ``"mult"``, ``"bern"``.
* ``prior`` is a dict: gauss ``{nu, kappa, m (D,), B (D, D)}``; diag_gauss ``{nu, kappa, m (D,),
  beta (D,)}``; zero_mean_gauss ``{nu, B (D, D)}``; mult ``{lam (V,)}``; bern ``{lam1 (D,), lam0 (D,)}``.
  ``B`` is the *inverse* scale matrix of the Wishart, ``E[Lambda] = nu B^{-1}``; ``beta`` are Gamma
  rates with ``lambda_d ~ Gamma(shape nu/2, rate beta_d/2)``.
* Summaries: ``N`` of shape (K,), ``S`` of shape (K, stat_dim) with the row layout
  gauss ``[Sx (D), Sxx.ravel() (D*D, row-major)]``; diag_gauss ``[Sx (D), Sx2 (D)]``;
  zero_mean_gauss ``Sxx.ravel()``; mult word counts (V); bern ``Sx`` (D).
* c-functions are log *normalizing constants* (not log-partitions):
  log P(phi | lam) = c(lam) + <lam, t(phi)> + b(phi).
"""

import numpy as np
from scipy import stats
from scipy.special import digamma, gammaln, multigammaln

KINDS = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")

LOG_2PI = np.log(2.0 * np.pi)


# ----------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"unknown observation model kind {kind!r}; expected one of {KINDS}")


def _logdet_spd(A):
    """ln|A| for a symmetric positive-definite matrix A (ValueError otherwise)."""
    sign, logdet = np.linalg.slogdet(A)
    if sign <= 0:
        raise ValueError("matrix is not positive definite")
    return float(logdet)


def _xlogy(x, y):
    """x * ln(y) with the convention 0 * ln(anything) = 0."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    out = np.zeros(np.broadcast(x, y).shape)
    mask = np.broadcast_to(x != 0, out.shape)
    xb = np.broadcast_to(x, out.shape)
    yb = np.broadcast_to(y, out.shape)
    out[mask] = xb[mask] * np.log(yb[mask])
    return out


def c_beta(a, b):
    """Log normalizer of Beta(a, b): c_Beta(a, b) = lnGamma(a + b) - lnGamma(a) - lnGamma(b)."""
    return gammaln(a + b) - gammaln(a) - gammaln(b)


def c_dir(lam):
    """Log normalizer of Dir(lam): c_Dir(lam) = lnGamma(sum_v lam_v) - sum_v lnGamma(lam_v)."""
    lam = np.asarray(lam, dtype=float)
    return float(gammaln(lam.sum()) - gammaln(lam).sum())


def _dim(kind, prior):
    """Data dimension D (or vocabulary size V) implied by the prior."""
    if kind in ("gauss", "diag_gauss"):
        return len(prior["m"])
    if kind == "zero_mean_gauss":
        return np.asarray(prior["B"]).shape[0]
    if kind == "mult":
        return len(prior["lam"])
    return len(prior["lam1"])


def stat_dim(kind, D):
    """Size of one summary row S[k] for data dimension D (docs/internals.md table)."""
    _check_kind(kind)
    return {"gauss": D + D * D, "diag_gauss": 2 * D, "zero_mean_gauss": D * D, "mult": D, "bern": D}[kind]


def _split_stats(kind, D, s_row):
    """Unpack one summary row into named statistics (docs/internals.md layout)."""
    s_row = np.asarray(s_row, dtype=float)
    if kind == "gauss":
        return {"Sx": s_row[:D], "Sxx": s_row[D:].reshape(D, D)}
    if kind == "diag_gauss":
        return {"Sx": s_row[:D], "Sx2": s_row[D:]}
    if kind == "zero_mean_gauss":
        return {"Sxx": s_row.reshape(D, D)}
    if kind == "mult":
        return {"Sx": s_row}
    return {"Sx": s_row}


def _expect_log_det_wishart(nu, B):
    """E[ln|Lambda|] for Lambda ~ W(nu, B^{-1}):
    sum_{d=1..D} psi((nu + 1 - d)/2) + D ln 2 - ln|B|."""
    D = B.shape[0]
    d = np.arange(1, D + 1)
    return float(np.sum(digamma((nu + 1.0 - d) / 2.0)) + D * np.log(2.0) - _logdet_spd(B))


# ----------------------------------------------------------------------------------------------
# summaries
# ----------------------------------------------------------------------------------------------


def summarize(kind, X, R):
    """Weighted summaries of data X under responsibilities R.

    Formula: N_k = sum_n r_nk;  S_k = sum_n r_nk s(x_n) with s(x) =
    gauss [x, (x x^T).ravel()], diag_gauss [x, x^2], zero_mean_gauss (x x^T).ravel(),
    mult x (word counts), bern x.

    Returns
    -------
    N : ndarray of shape (n_components,)
    S : ndarray of shape (n_components, stat_dim)
    """
    _check_kind(kind)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    R = np.atleast_2d(np.asarray(R, dtype=float))
    n, D = X.shape
    K = R.shape[1]
    N = np.zeros(K)
    S = np.zeros((K, stat_dim(kind, D)))
    for k in range(K):
        for i in range(n):
            r = R[i, k]
            x = X[i]
            N[k] += r
            if kind == "gauss":
                S[k] += r * np.concatenate([x, np.outer(x, x).ravel()])
            elif kind == "diag_gauss":
                S[k] += r * np.concatenate([x, x * x])
            elif kind == "zero_mean_gauss":
                S[k] += r * np.outer(x, x).ravel()
            else:  # mult, bern
                S[k] += r * x
    return N, S


def h_sum(kind, X):
    """Sum of the log reference measure: sum_n h(x_n).

    Formula: gaussians h(x) = -D/2 ln(2 pi), so the sum is -n D/2 ln(2 pi); mult (no multinomial
    coefficient) and bern: h = 0.
    """
    _check_kind(kind)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    n, D = X.shape
    if kind in ("gauss", "diag_gauss", "zero_mean_gauss"):
        return -0.5 * n * D * LOG_2PI
    return 0.0


# ----------------------------------------------------------------------------------------------
# posterior (global step) and c-functions
# ----------------------------------------------------------------------------------------------


def _posterior_one(kind, prior, Nk, s_row):
    D = _dim(kind, prior)
    st = _split_stats(kind, D, s_row)
    if kind == "gauss":
        nu0, kappa0 = float(prior["nu"]), float(prior["kappa"])
        m0, B0 = np.asarray(prior["m"], float), np.asarray(prior["B"], float)
        kappa = kappa0 + Nk
        nu = nu0 + Nk
        m = (kappa0 * m0 + st["Sx"]) / kappa
        B = B0 + st["Sxx"] + kappa0 * np.outer(m0, m0) - kappa * np.outer(m, m)
        B = 0.5 * (B + B.T)
        return {"nu": nu, "kappa": kappa, "m": m, "B": B}
    if kind == "diag_gauss":
        nu0, kappa0 = float(prior["nu"]), float(prior["kappa"])
        m0, beta0 = np.asarray(prior["m"], float), np.asarray(prior["beta"], float)
        kappa = kappa0 + Nk
        nu = nu0 + Nk
        m = (kappa0 * m0 + st["Sx"]) / kappa
        beta = beta0 + st["Sx2"] + kappa0 * m0 ** 2 - kappa * m ** 2
        return {"nu": nu, "kappa": kappa, "m": m, "beta": beta}
    if kind == "zero_mean_gauss":
        nu0, B0 = float(prior["nu"]), np.asarray(prior["B"], float)
        B = B0 + st["Sxx"]
        B = 0.5 * (B + B.T)
        return {"nu": nu0 + Nk, "B": B}
    if kind == "mult":
        return {"lam": np.asarray(prior["lam"], float) + st["Sx"]}
    # bern
    return {
        "lam1": np.asarray(prior["lam1"], float) + st["Sx"],
        "lam0": np.asarray(prior["lam0"], float) + Nk - st["Sx"],
    }


def posterior(kind, prior, N, S):
    """Global step: posterior parameters lam_hat_k = prior (+) (N_k, S_k) for every cluster k.

    Formulas (Hughes thesis §2.2, §3.6; Bishop 2006 §2.3.6, §10.2 for the Gaussians):
    gauss: kappa = kappa0 + N, nu = nu0 + N, m = (kappa0 m0 + Sx)/kappa,
           B = B0 + Sxx + kappa0 m0 m0^T - kappa m m^T (then symmetrized);
    diag_gauss: same per dimension with beta = beta0 + Sx2 + kappa0 m0^2 - kappa m^2;
    zero_mean_gauss: nu = nu0 + N, B = B0 + Sxx;
    mult: lam = lam0 + S;  bern: lam1 = lam1_0 + Sx, lam0 = lam0_0 + N - Sx.

    Returns
    -------
    list of n_components dicts with the same keys as the prior.
    """
    _check_kind(kind)
    N = np.atleast_1d(np.asarray(N, dtype=float))
    S = np.atleast_2d(np.asarray(S, dtype=float))
    return [_posterior_one(kind, prior, float(N[k]), S[k]) for k in range(len(N))]


def c_func(kind, params):
    """Log normalizing constant c(lam) of the conjugate prior/posterior density (Hughes thesis §2.2).

    Formulas:
    gauss (Normal-Wishart):  c = -D/2 ln 2pi + D/2 ln kappa + nu/2 ln|B| - nu D/2 ln 2 - lnGamma_D(nu/2)
    diag_gauss (Normal-Gamma): c = sum_d [-1/2 ln 2pi + 1/2 ln kappa + nu/2 ln(beta_d/2) - lnGamma(nu/2)]
    zero_mean_gauss (Wishart): c = nu/2 ln|B| - nu D/2 ln 2 - lnGamma_D(nu/2)
    mult (Dirichlet): c = lnGamma(sum_v lam_v) - sum_v lnGamma(lam_v)
    bern (Beta per dim): c = sum_d [lnGamma(lam1_d + lam0_d) - lnGamma(lam1_d) - lnGamma(lam0_d)]
    """
    _check_kind(kind)
    if kind == "gauss":
        nu, kappa, B = float(params["nu"]), float(params["kappa"]), np.asarray(params["B"], float)
        D = B.shape[0]
        return float(
            -0.5 * D * LOG_2PI
            + 0.5 * D * np.log(kappa)
            + 0.5 * nu * _logdet_spd(B)
            - 0.5 * nu * D * np.log(2.0)
            - multigammaln(0.5 * nu, D)
        )
    if kind == "diag_gauss":
        nu, kappa = float(params["nu"]), float(params["kappa"])
        beta = np.asarray(params["beta"], float)
        total = 0.0
        for d in range(len(beta)):
            total += (
                -0.5 * LOG_2PI
                + 0.5 * np.log(kappa)
                + 0.5 * nu * np.log(beta[d] / 2.0)
                - gammaln(0.5 * nu)
            )
        return float(total)
    if kind == "zero_mean_gauss":
        nu, B = float(params["nu"]), np.asarray(params["B"], float)
        D = B.shape[0]
        return float(
            0.5 * nu * _logdet_spd(B) - 0.5 * nu * D * np.log(2.0) - multigammaln(0.5 * nu, D)
        )
    if kind == "mult":
        return c_dir(params["lam"])
    lam1, lam0 = np.asarray(params["lam1"], float), np.asarray(params["lam0"], float)
    return float(np.sum(c_beta(lam1, lam0)))


def elbo_data(kind, prior, N, S, h):
    """ELBO data term at the optimal posterior (Hughes thesis §2.5.3).

    Formula: L_data = h + sum_k [ c(prior) - c(prior (+) (N_k, S_k)) ], h = sum_n h(x_n).
    """
    _check_kind(kind)
    c_prior = c_func(kind, prior)
    total = float(h)
    for post in posterior(kind, prior, N, S):
        total += c_prior - c_func(kind, post)
    return total


# ----------------------------------------------------------------------------------------------
# expected log-likelihood (local step) and its summary form
# ----------------------------------------------------------------------------------------------


def _e_log_lik_one(kind, post, x):
    """E_q[log F(x | phi)] for one row x and one posterior dict."""
    if kind == "gauss":
        nu, kappa, m, B = post["nu"], post["kappa"], post["m"], post["B"]
        D = len(m)
        diff = x - m
        maha = diff @ np.linalg.solve(B, diff)
        return (
            -0.5 * D * LOG_2PI
            + 0.5 * _expect_log_det_wishart(nu, B)
            - 0.5 * (D / kappa + nu * maha)
        )
    if kind == "diag_gauss":
        nu, kappa, m, beta = post["nu"], post["kappa"], post["m"], post["beta"]
        total = 0.0
        for d in range(len(m)):
            e_lam = nu / beta[d]
            e_log_lam = digamma(nu / 2.0) - np.log(beta[d] / 2.0)
            total += -0.5 * LOG_2PI + 0.5 * e_log_lam - 0.5 * (1.0 / kappa + e_lam * (x[d] - m[d]) ** 2)
        return total
    if kind == "zero_mean_gauss":
        nu, B = post["nu"], post["B"]
        D = B.shape[0]
        return -0.5 * D * LOG_2PI + 0.5 * _expect_log_det_wishart(nu, B) - 0.5 * nu * (x @ np.linalg.solve(B, x))
    if kind == "mult":
        lam = post["lam"]
        e_log_beta = digamma(lam) - digamma(lam.sum())
        return float(np.sum(x * e_log_beta))
    lam1, lam0 = post["lam1"], post["lam0"]
    e_log_theta = digamma(lam1) - digamma(lam1 + lam0)
    e_log_1m_theta = digamma(lam0) - digamma(lam1 + lam0)
    return float(np.sum(x * e_log_theta + (1.0 - x) * e_log_1m_theta))


def e_log_lik(kind, prior, N_post, S_post, X):
    """Expected log-likelihood matrix C_nk = E_q[log F(x_n | phi_k)], q = posterior(prior, N_post, S_post).

    Formulas (Hughes thesis §2.2, §3.6; Bishop 2006 §2.3.6, §10.2 for the Gaussians):
    gauss: -D/2 ln 2pi + 1/2 E ln|Lambda_k| - 1/2 (D/kappa_k + nu_k (x - m_k)^T B_k^{-1} (x - m_k)),
           E ln|Lambda| = sum_{d=1..D} psi((nu + 1 - d)/2) + D ln 2 - ln|B|;
    diag_gauss: sum_d [-1/2 ln 2pi + 1/2 E ln lambda_kd - 1/2 (1/kappa_k + E lambda_kd (x_d - m_kd)^2)],
           E lambda = nu/beta, E ln lambda = psi(nu/2) - ln(beta/2);
    zero_mean_gauss: -D/2 ln 2pi + 1/2 E ln|Lambda_k| - 1/2 nu_k x^T B_k^{-1} x;
    mult: sum_v x_v (psi(lam_kv) - psi(sum_w lam_kw));
    bern: sum_d [x_d (psi(lam1) - psi(lam1 + lam0)) + (1 - x_d)(psi(lam0) - psi(lam1 + lam0))].

    Returns
    -------
    ndarray of shape (n_samples, n_components)
    """
    _check_kind(kind)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    posts = posterior(kind, prior, N_post, S_post)
    C = np.zeros((X.shape[0], len(posts)))
    for k, post in enumerate(posts):
        for i in range(X.shape[0]):
            C[i, k] = _e_log_lik_one(kind, post, X[i])
    return C


def e_log_lik_sum_from_stats(kind, prior, N_post, S_post, N, S):
    """sum_n r_nk E_q[log F(x_n | phi_k)] from the summaries (N, S) of r.

    The posterior q is computed from (N_post, S_post). Formulas (Hughes thesis §2.2, §3.6; Bishop 2006 §2.3.6, §10.2 for the Gaussians):
    gauss: N_k (-D/2 ln 2pi + 1/2 E ln|Lambda_k| - D/(2 kappa_k))
           - nu_k/2 tr(B_k^{-1} (Sxx - Sx m^T - m Sx^T + N_k m m^T));
    diag_gauss: sum_d [N_k (-1/2 ln 2pi + 1/2 E ln lambda_kd - 1/(2 kappa_k))
           - 1/2 E lambda_kd (Sx2_d - 2 m_d Sx_d + N_k m_d^2)];
    zero_mean_gauss: N_k (-D/2 ln 2pi + 1/2 E ln|Lambda_k|) - 1/2 nu_k tr(B_k^{-1} Sxx);
    mult: sum_v S_kv E ln beta_kv;
    bern: sum_d [S_kd E ln theta_kd + (N_k - S_kd) E ln(1 - theta_kd)].

    Returns
    -------
    ndarray of shape (n_components,)
    """
    _check_kind(kind)
    posts = posterior(kind, prior, N_post, S_post)
    N = np.atleast_1d(np.asarray(N, dtype=float))
    S = np.atleast_2d(np.asarray(S, dtype=float))
    D = _dim(kind, prior)
    out = np.zeros(len(posts))
    for k, post in enumerate(posts):
        st = _split_stats(kind, D, S[k])
        Nk = N[k]
        if kind == "gauss":
            nu, kappa, m, B = post["nu"], post["kappa"], post["m"], post["B"]
            scatter = st["Sxx"] - np.outer(st["Sx"], m) - np.outer(m, st["Sx"]) + Nk * np.outer(m, m)
            out[k] = Nk * (-0.5 * D * LOG_2PI + 0.5 * _expect_log_det_wishart(nu, B) - 0.5 * D / kappa) - 0.5 * nu * np.trace(
                np.linalg.solve(B, scatter)
            )
        elif kind == "diag_gauss":
            nu, kappa, m, beta = post["nu"], post["kappa"], post["m"], post["beta"]
            total = 0.0
            for d in range(D):
                e_lam = nu / beta[d]
                e_log_lam = digamma(nu / 2.0) - np.log(beta[d] / 2.0)
                total += Nk * (-0.5 * LOG_2PI + 0.5 * e_log_lam - 0.5 / kappa) - 0.5 * e_lam * (
                    st["Sx2"][d] - 2.0 * m[d] * st["Sx"][d] + Nk * m[d] ** 2
                )
            out[k] = total
        elif kind == "zero_mean_gauss":
            nu, B = post["nu"], post["B"]
            out[k] = Nk * (-0.5 * D * LOG_2PI + 0.5 * _expect_log_det_wishart(nu, B)) - 0.5 * nu * np.trace(
                np.linalg.solve(B, st["Sxx"])
            )
        elif kind == "mult":
            lam = post["lam"]
            out[k] = np.sum(st["Sx"] * (digamma(lam) - digamma(lam.sum())))
        else:
            lam1, lam0 = post["lam1"], post["lam0"]
            e_log_theta = digamma(lam1) - digamma(lam1 + lam0)
            e_log_1m_theta = digamma(lam0) - digamma(lam1 + lam0)
            out[k] = np.sum(st["Sx"] * e_log_theta + (Nk - st["Sx"]) * e_log_1m_theta)
    return out


# ----------------------------------------------------------------------------------------------
# point estimates, plug-in densities, Bregman divergences
# ----------------------------------------------------------------------------------------------


def point_estimates(kind, prior, N, S):
    """Posterior-mean point estimates of every cluster.

    Formulas: gauss means = m_k, covariances = B_k/(nu_k - D - 1) (K, D, D);
    diag_gauss means = m_k, covariances = beta_kd/(nu_k - 2) (K, D);
    zero_mean_gauss covariances = B_k/(nu_k - D - 1); mult means = lam_kv/sum_w lam_kw;
    bern means = lam1_kd/(lam1_kd + lam0_kd).

    Returns
    -------
    dict with keys ``means`` and/or ``covariances`` (see above).
    """
    _check_kind(kind)
    posts = posterior(kind, prior, N, S)
    if kind == "gauss":
        D = len(prior["m"])
        return {
            "means": np.array([p["m"] for p in posts]),
            "covariances": np.array([p["B"] / (p["nu"] - D - 1.0) for p in posts]),
        }
    if kind == "diag_gauss":
        return {
            "means": np.array([p["m"] for p in posts]),
            "covariances": np.array([p["beta"] / (p["nu"] - 2.0) for p in posts]),
        }
    if kind == "zero_mean_gauss":
        D = np.asarray(prior["B"]).shape[0]
        return {"covariances": np.array([p["B"] / (p["nu"] - D - 1.0) for p in posts])}
    if kind == "mult":
        return {"means": np.array([p["lam"] / p["lam"].sum() for p in posts])}
    return {"means": np.array([p["lam1"] / (p["lam1"] + p["lam0"]) for p in posts])}


def _gauss_logpdf(x, mean, cov):
    """ln N(x | mean, cov) = -D/2 ln 2pi - 1/2 ln|cov| - 1/2 (x - mean)^T cov^{-1} (x - mean)."""
    D = len(x)
    diff = x - mean
    return -0.5 * D * LOG_2PI - 0.5 * _logdet_spd(cov) - 0.5 * diff @ np.linalg.solve(cov, diff)


def log_density(kind, point_estimates_dict, X):
    """Plug-in log-likelihood log F(x_n | phi_hat_k) with the point estimates of point_estimates().

    Formulas: gauss ln N(x | mean_k, cov_k); diag_gauss sum_d ln N(x_d | mean_kd, var_kd);
    zero_mean_gauss ln N(x | 0, cov_k); mult sum_v x_v ln beta_kv (no multinomial coefficient);
    bern sum_d [x_d ln theta_kd + (1 - x_d) ln(1 - theta_kd)].

    Returns
    -------
    ndarray of shape (n_samples, n_components)
    """
    _check_kind(kind)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    pe = point_estimates_dict
    if kind == "zero_mean_gauss":
        K = len(pe["covariances"])
    else:
        K = len(pe["means"])
    out = np.zeros((X.shape[0], K))
    for k in range(K):
        for i in range(X.shape[0]):
            x = X[i]
            if kind == "gauss":
                out[i, k] = _gauss_logpdf(x, pe["means"][k], pe["covariances"][k])
            elif kind == "diag_gauss":
                var = pe["covariances"][k]
                mu = pe["means"][k]
                out[i, k] = np.sum(-0.5 * LOG_2PI - 0.5 * np.log(var) - 0.5 * (x - mu) ** 2 / var)
            elif kind == "zero_mean_gauss":
                out[i, k] = _gauss_logpdf(x, np.zeros(len(x)), pe["covariances"][k])
            elif kind == "mult":
                out[i, k] = np.sum(_xlogy(x, pe["means"][k]))
            else:
                theta = pe["means"][k]
                out[i, k] = np.sum(_xlogy(x, theta) + _xlogy(1.0 - x, 1.0 - theta))
    return out


def _kl_bern(a, b):
    """KL(Bern(a) || Bern(b)) = a ln(a/b) + (1 - a) ln((1 - a)/(1 - b)), elementwise."""
    return _xlogy(a, a) - _xlogy(a, b) + _xlogy(1.0 - a, 1.0 - a) - _xlogy(1.0 - a, 1.0 - b)


def _kl_zero_mean_gauss(Sa, Sb):
    """KL(N(0, Sa) || N(0, Sb)) = 1/2 [tr(Sb^{-1} Sa) - D - ln|Sa| + ln|Sb|]."""
    D = Sa.shape[0]
    return 0.5 * (np.trace(np.linalg.solve(Sb, Sa)) - D - _logdet_spd(Sa) + _logdet_spd(Sb))


def smoothed_divergence(kind, prior, X, i):
    """Bregman divergence D(smoothed atom of row n, smoothed atom of row i) for every row n.

    Used by Bregman k-means++ (Hughes thesis §2.4.2, Alg. 2.2; per-model choices):
    gauss / diag_gauss: 1/2 (x_n - x_i)^T Sigma0^{-1} (x_n - x_i), Sigma0 = prior E[Sigma]
        (gauss B/(nu - D - 1); diag_gauss diag(beta/(nu - 2)));
    zero_mean_gauss: KL(N(0, S_n) || N(0, S_i)), S_n = (x_n x_n^T + Sigma0)/2, Sigma0 = B/(nu - D - 1),
        KL = 1/2 [tr(S_i^{-1} S_n) - D - ln|S_n| + ln|S_i|];
    mult: C_n KL(bt_n || bt_i), bt_n = (x_n + lam)/(C_n + sum lam), C_n = sum_v x_nv;
    bern: sum_d KL_Bern(tt_nd || tt_id), tt_n = (x_n + lam1)/(1 + lam1 + lam0).

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    _check_kind(kind)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    n, D = X.shape
    out = np.zeros(n)
    if kind == "gauss":
        sigma0 = np.asarray(prior["B"], float) / (float(prior["nu"]) - D - 1.0)
        for j in range(n):
            diff = X[j] - X[i]
            out[j] = 0.5 * diff @ np.linalg.solve(sigma0, diff)
    elif kind == "diag_gauss":
        var0 = np.asarray(prior["beta"], float) / (float(prior["nu"]) - 2.0)
        for j in range(n):
            diff = X[j] - X[i]
            out[j] = 0.5 * np.sum(diff ** 2 / var0)
    elif kind == "zero_mean_gauss":
        sigma0 = np.asarray(prior["B"], float) / (float(prior["nu"]) - D - 1.0)
        S_i = 0.5 * (np.outer(X[i], X[i]) + sigma0)
        for j in range(n):
            S_j = 0.5 * (np.outer(X[j], X[j]) + sigma0)
            out[j] = _kl_zero_mean_gauss(S_j, S_i)
    elif kind == "mult":
        lam = np.asarray(prior["lam"], float)
        beta_i = (X[i] + lam) / (X[i].sum() + lam.sum())
        for j in range(n):
            C_j = X[j].sum()
            beta_j = (X[j] + lam) / (C_j + lam.sum())
            out[j] = C_j * np.sum(beta_j * np.log(beta_j / beta_i))
    else:
        lam1, lam0 = np.asarray(prior["lam1"], float), np.asarray(prior["lam0"], float)
        theta_i = (X[i] + lam1) / (1.0 + lam1 + lam0)
        for j in range(n):
            theta_j = (X[j] + lam1) / (1.0 + lam1 + lam0)
            out[j] = np.sum(_kl_bern(theta_j, theta_i))
    return out


# ----------------------------------------------------------------------------------------------
# independent oracles: exact marginal likelihood (chain rule) and KL(q || p)
# ----------------------------------------------------------------------------------------------


def log_marginal_likelihood(kind, prior, X):
    """Exact log p(x_1, ..., x_n) of the single-cluster conjugate model, by the chain rule
    log p(x) = sum_n log p(x_n | x_1, ..., x_{n-1}) of posterior-predictive densities.

    Deliberately independent of c_func and posterior() (an independent oracle):
    gauss: p(x | lam) = multivariate Student-t with dof nu - D + 1, location m,
           shape B (kappa + 1)/(kappa (nu - D + 1)); rank-one update
           kappa += 1, nu += 1, m = (kappa m + x)/(kappa + 1), B += kappa/(kappa + 1) (x - m)(x - m)^T;
    diag_gauss: product over d of univariate Student-t with dof nu, location m_d,
           scale^2 beta_d (kappa + 1)/(kappa nu); same per-dimension update with beta_d += kappa/(kappa+1)(x_d - m_d)^2;
    zero_mean_gauss: multivariate t with dof nu - D + 1, location 0, shape B/(nu - D + 1);
           update nu += 1, B += x x^T;
    mult: Polya urn over the tokens of the documents (sequence probability, no multinomial coefficient):
           p(next token = v) = (lam_v + c_v)/(sum lam + c), counts updated token by token
           (x must hold non-negative integers);
    bern: Beta-Bernoulli urn per dimension: p(x_d = 1) = (lam1_d + c1_d)/(lam1_d + lam0_d + n_seen).
    """
    _check_kind(kind)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    n, D = X.shape
    total = 0.0
    if kind == "gauss":
        nu, kappa = float(prior["nu"]), float(prior["kappa"])
        m, B = np.array(prior["m"], float), np.array(prior["B"], float)
        for j in range(n):
            x = X[j]
            dof = nu - D + 1.0
            shape = B * (kappa + 1.0) / (kappa * dof)
            total += stats.multivariate_t.logpdf(x, loc=m, shape=shape, df=dof)
            B = B + kappa / (kappa + 1.0) * np.outer(x - m, x - m)
            m = (kappa * m + x) / (kappa + 1.0)
            kappa += 1.0
            nu += 1.0
    elif kind == "diag_gauss":
        nu, kappa = float(prior["nu"]), float(prior["kappa"])
        m, beta = np.array(prior["m"], float), np.array(prior["beta"], float)
        for j in range(n):
            x = X[j]
            for d in range(D):
                scale = np.sqrt(beta[d] * (kappa + 1.0) / (kappa * nu))
                total += stats.t.logpdf(x[d], df=nu, loc=m[d], scale=scale)
            beta = beta + kappa / (kappa + 1.0) * (x - m) ** 2
            m = (kappa * m + x) / (kappa + 1.0)
            kappa += 1.0
            nu += 1.0
    elif kind == "zero_mean_gauss":
        nu, B = float(prior["nu"]), np.array(prior["B"], float)
        for j in range(n):
            x = X[j]
            dof = nu - D + 1.0
            total += stats.multivariate_t.logpdf(x, loc=np.zeros(D), shape=B / dof, df=dof)
            B = B + np.outer(x, x)
            nu += 1.0
    elif kind == "mult":
        lam = np.array(prior["lam"], float)
        counts = np.zeros(D)
        seen = 0.0
        for j in range(n):
            for v in range(D):
                n_tokens = int(round(X[j, v]))
                if abs(n_tokens - X[j, v]) > 1e-12 or n_tokens < 0:
                    raise ValueError("mult data must hold non-negative integer counts")
                for _ in range(n_tokens):
                    total += np.log(lam[v] + counts[v]) - np.log(lam.sum() + seen)
                    counts[v] += 1.0
                    seen += 1.0
    else:
        lam1, lam0 = np.array(prior["lam1"], float), np.array(prior["lam0"], float)
        ones = np.zeros(D)
        for j in range(n):
            for d in range(D):
                p_one = (lam1[d] + ones[d]) / (lam1[d] + lam0[d] + j)
                if X[j, d] == 1:
                    total += np.log(p_one)
                    ones[d] += 1.0
                elif X[j, d] == 0:
                    total += np.log(1.0 - p_one)
                else:
                    raise ValueError("bern data must be 0/1")
    return float(total)


def kl_posterior(kind, prior, params):
    """KL(q(phi) || p(phi)) for one posterior parameter dict ``params`` against ``prior``, in closed form.

    Formulas (q = params, p = prior):
    gauss (Normal-Wishart) = E_q[KL(N(m_q, (kappa_q L)^{-1}) || N(m_p, (kappa_p L)^{-1}))] + KL(W_q || W_p):
        normal part 1/2 [D kappa_p/kappa_q - D + D ln(kappa_q/kappa_p) + kappa_p nu_q (m_q - m_p)^T B_q^{-1} (m_q - m_p)],
        Wishart part nu_q/2 ln|B_q| - nu_p/2 ln|B_p| - (nu_q - nu_p) D/2 ln 2 - lnGamma_D(nu_q/2) + lnGamma_D(nu_p/2)
                     + (nu_q - nu_p)/2 E_q ln|L| - 1/2 tr((B_q - B_p) nu_q B_q^{-1});
    diag_gauss: sum_d of the 1-D version (normal part with E lambda = nu_q/beta_q, plus
        KL(Gamma(a_q, b_q) || Gamma(a_p, b_p)) with a = nu/2, b = beta/2 (rates):
        (a_q - a_p) psi(a_q) - lnGamma(a_q) + lnGamma(a_p) + a_p (ln b_q - ln b_p) + a_q (b_p - b_q)/b_q);
    zero_mean_gauss: the Wishart part only;
    mult: KL(Dir(q) || Dir(p)) = lnGamma(sum q) - sum lnGamma(q) - lnGamma(sum p) + sum lnGamma(p)
        + sum_v (q_v - p_v)(psi(q_v) - psi(sum q));
    bern: sum_d KL(Beta(q1, q0) || Beta(p1, p0)), the 2-category Dirichlet formula.
    """
    _check_kind(kind)

    def wishart_kl(nu_q, B_q, nu_p, B_p):
        D = B_q.shape[0]
        e_logdet = _expect_log_det_wishart(nu_q, B_q)
        return (
            0.5 * nu_q * _logdet_spd(B_q)
            - 0.5 * nu_p * _logdet_spd(B_p)
            - 0.5 * (nu_q - nu_p) * D * np.log(2.0)
            - multigammaln(0.5 * nu_q, D)
            + multigammaln(0.5 * nu_p, D)
            + 0.5 * (nu_q - nu_p) * e_logdet
            - 0.5 * np.trace((B_q - B_p) @ (nu_q * np.linalg.inv(B_q)))
        )

    def dirichlet_kl(q, p):
        q, p = np.asarray(q, float), np.asarray(p, float)
        return (
            gammaln(q.sum())
            - gammaln(q).sum()
            - gammaln(p.sum())
            + gammaln(p).sum()
            + np.sum((q - p) * (digamma(q) - digamma(q.sum())))
        )

    if kind == "gauss":
        nu_q, kappa_q, m_q, B_q = float(params["nu"]), float(params["kappa"]), np.asarray(params["m"], float), np.asarray(params["B"], float)
        nu_p, kappa_p, m_p, B_p = float(prior["nu"]), float(prior["kappa"]), np.asarray(prior["m"], float), np.asarray(prior["B"], float)
        D = len(m_q)
        diff = m_q - m_p
        normal = 0.5 * (
            D * kappa_p / kappa_q - D + D * np.log(kappa_q / kappa_p) + kappa_p * nu_q * diff @ np.linalg.solve(B_q, diff)
        )
        return float(normal + wishart_kl(nu_q, B_q, nu_p, B_p))
    if kind == "diag_gauss":
        nu_q, kappa_q, m_q, beta_q = float(params["nu"]), float(params["kappa"]), np.asarray(params["m"], float), np.asarray(params["beta"], float)
        nu_p, kappa_p, m_p, beta_p = float(prior["nu"]), float(prior["kappa"]), np.asarray(prior["m"], float), np.asarray(prior["beta"], float)
        total = 0.0
        for d in range(len(m_q)):
            e_lam = nu_q / beta_q[d]
            normal = 0.5 * (kappa_p / kappa_q - 1.0 + np.log(kappa_q / kappa_p) + kappa_p * e_lam * (m_q[d] - m_p[d]) ** 2)
            a_q, b_q = nu_q / 2.0, beta_q[d] / 2.0
            a_p, b_p = nu_p / 2.0, beta_p[d] / 2.0
            gamma_kl = (
                (a_q - a_p) * digamma(a_q)
                - gammaln(a_q)
                + gammaln(a_p)
                + a_p * (np.log(b_q) - np.log(b_p))
                + a_q * (b_p - b_q) / b_q
            )
            total += normal + gamma_kl
        return float(total)
    if kind == "zero_mean_gauss":
        return float(wishart_kl(float(params["nu"]), np.asarray(params["B"], float), float(prior["nu"]), np.asarray(prior["B"], float)))
    if kind == "mult":
        return float(dirichlet_kl(params["lam"], prior["lam"]))
    total = 0.0
    for d in range(len(params["lam1"])):
        total += dirichlet_kl([params["lam1"][d], params["lam0"][d]], [prior["lam1"][d], prior["lam0"][d]])
    return float(total)
