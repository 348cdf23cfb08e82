"""Reference implementation of the fresh-cluster fit of a birth (Hughes & Sudderth 2013, §3;
Hughes thesis, birth proposals), the oracle of the Rust kernel ``bnpcore._core.fit_fresh_clusters``.

Written on the numpy reference only: Bregman k-means++ seeding with :func:`smoothed_divergence`,
summaries with :func:`summarize`, the weighted local step from :func:`e_log_lik` and
:func:`e_log_pi` (softmax rows, entropies), and every ELBO comparison with :func:`elbo`. It calls
neither ``bnpcore._core`` nor the production ``Model``/``SuffStats`` code, and is never used at
run time.
"""

import numpy as np
from scipy.special import digamma, logsumexp

from .elbo import elbo
from .local import _neg_xlogx, e_log_pi
from .obs import LOG_2PI, _expect_log_det_wishart, posterior, smoothed_divergence, summarize

__all__ = ["TIE_RTOL", "e_log_lik_rows", "fit_fresh_clusters", "grown_seeds", "kmeanspp"]

#: relative tolerance under which two log weights count as tied in a hard (k-means) step
TIE_RTOL = 1e-9


def e_log_lik_rows(kind, prior, N_post, S_post, X):
    """C_nk = E_q[log F(x_n | phi_k)], the formulas of :func:`bnpcore._reference.e_log_lik`
    evaluated for all rows at once (one component at a time; the same numbers up to round-off):

    gauss: -D/2 ln 2pi + 1/2 E ln|Lambda_k| - 1/2 (D/kappa_k + nu_k (x - m_k)^T B_k^{-1} (x - m_k));
    diag_gauss: sum_d [-1/2 ln 2pi + 1/2 (psi(nu/2) - ln(beta_d/2)) - 1/2 (1/kappa + nu/beta_d (x_d - m_d)^2)];
    zero_mean_gauss: -D/2 ln 2pi + 1/2 E ln|Lambda_k| - 1/2 nu_k x^T B_k^{-1} x;
    mult: sum_v x_v (psi(lam_v) - psi(sum lam));
    bern: sum_d [x_d (psi(lam1) - psi(lam1 + lam0)) + (1 - x_d) (psi(lam0) - psi(lam1 + lam0))].

    Returns
    -------
    ndarray of shape (n_samples, n_components)
    """
    X = np.atleast_2d(np.asarray(X, dtype=float))
    posts = posterior(kind, prior, N_post, S_post)
    C = np.zeros((X.shape[0], len(posts)))
    D = X.shape[1]
    for k, p in enumerate(posts):
        if kind in ("gauss", "zero_mean_gauss"):
            diff = X - p["m"][None, :] if kind == "gauss" else X
            maha = np.einsum("nd,nd->n", diff, np.linalg.solve(p["B"], diff.T).T)
            C[:, k] = -0.5 * D * LOG_2PI + 0.5 * _expect_log_det_wishart(p["nu"], p["B"]) - 0.5 * p["nu"] * maha
            if kind == "gauss":
                C[:, k] -= 0.5 * D / p["kappa"]
        elif kind == "diag_gauss":
            nu, kappa, m, beta = p["nu"], p["kappa"], p["m"], p["beta"]
            e_log_lam = digamma(nu / 2.0) - np.log(beta / 2.0)
            C[:, k] = np.sum(-0.5 * LOG_2PI + 0.5 * e_log_lam - 0.5 * (1.0 / kappa + nu / beta * (X - m) ** 2), axis=1)
        elif kind == "mult":
            C[:, k] = X @ (digamma(p["lam"]) - digamma(p["lam"].sum()))
        else:
            lam1, lam0 = p["lam1"], p["lam0"]
            tot = digamma(lam1 + lam0)
            C[:, k] = X @ (digamma(lam1) - tot) + (1.0 - X) @ (digamma(lam0) - tot)
    return C


def kmeanspp(kind, prior, X, uniforms):
    """Bregman k-means++ seeding (the rule documented for ``ObsModel.kmeanspp``): the first row
    is floor(u_0 n); then row i with probability min_l D(x_i, c_l) / total, by the inverse CDF at
    u_j * total over the rows not yet chosen (sums in row order), or uniformly among the free rows
    if every divergence is zero. D is :func:`smoothed_divergence`.

    Returns
    -------
    list of int, one row index per uniform.
    """
    n = X.shape[0]
    chosen = [min(int(uniforms[0] * n), n - 1)]
    dist = np.maximum(smoothed_divergence(kind, prior, X, chosen[0]), 0.0)
    for u in uniforms[1:]:
        dist[chosen] = 0.0
        total = float(sum(dist.tolist()))
        free = np.ones(n, bool)
        free[chosen] = False
        if total > 0:
            acc = np.cumsum(dist)
            nxt = int(np.flatnonzero((acc > u * total) & free)[0])
        else:
            rows = np.flatnonzero(free)
            nxt = int(rows[min(int(u * rows.size), rows.size - 1)])
        chosen.append(nxt)
        dist = np.minimum(dist, np.maximum(smoothed_divergence(kind, prior, X, nxt), 0.0))
    return chosen


def _weighted_step(kind, prior, alloc, gamma, X, w, N, S, pairs=()):
    """One weighted local step and its summaries: r_n = softmax(C_n + E ln pi),
    (N', S') = summarize(X, w r), H'_k = sum_n w_n (-r_nk ln r_nk),
    pair_H_ab = sum_n w_n (-(r_na + r_nb) ln(r_na + r_nb))."""
    W = e_log_lik_rows(kind, prior, N, S, X) + e_log_pi(alloc, N, gamma)[None, :]
    R = np.exp(W - logsumexp(W, axis=1, keepdims=True))
    N_new, S_new = summarize(kind, X, w[:, None] * R)
    H = (w[:, None] * _neg_xlogx(R)).sum(axis=0)
    pair_H = np.array([(w * _neg_xlogx(R[:, a] + R[:, b])).sum() for a, b in pairs])
    return N_new, S_new, H, pair_H


def _tidy(N, S):
    """Clusters by decreasing mass (stable), those with mass below one atom dropped."""
    order = np.argsort(-N, kind="stable")
    N, S = N[order], S[order]
    keep = N >= 1.0
    return np.ascontiguousarray(N[keep]), np.ascontiguousarray(S[keep])


def grown_seeds(kind, prior, X, idx, g):
    """Initial clusters from seed rows ``idx``: cluster j sums (unweighted) the g rows of smallest
    :func:`smoothed_divergence` to row ``idx[j]`` (stable order: ties by row index, non-finite
    values last)."""
    R = np.zeros((X.shape[0], len(idx)))
    for j, i in enumerate(idx):
        d = smoothed_divergence(kind, prior, X, i)
        d = np.where(np.isfinite(d), d, np.inf)
        R[np.argsort(d, kind="stable")[:g], j] = 1.0
    return summarize(kind, X, R)


def fit_fresh_clusters(kind, prior, alloc, gamma, X, w, n_fresh, rng, *, n_seeds=None, iters=20, kmeans_iters=10, seed_rows=1,
                       abandon_loss=None, abandon_after=0):
    r"""Fit fresh clusters to a weighted subsample: the reference algorithm.

    ``n_seeds`` (default ``n_fresh``) k-means++ seeds (:func:`kmeanspp`, uniforms
    ``rng.random(J)`` with J = min(max(n_fresh, n_seeds), m // 2)), each grown to its
    min(seed_rows, m // J) nearest rows if ``seed_rows`` > 1 (:func:`grown_seeds`), ``kmeans_iters`` weighted
    hard-assignment (Bregman k-means) iterations (each row to the first cluster whose log weight
    is within :data:`TIE_RTOL` relative of its largest), then ``iters`` VB iterations of the
    mixture on ``X`` with row weights ``w``, dropping clusters with mass below one atom, then
    greedy merges of fresh pairs while the weighted ELBO rises (or while more than ``n_fresh``
    clusters remain, never below two). The weighted-subsample ELBO is :func:`elbo` of the
    summaries with sum_n h(x_n) left out (it is the same for every candidate). With
    ``abandon_loss`` the fit stops after ``abandon_after`` VB iterations when one more soft step,
    and every pairwise merge of its clusters, gains less than ``-abandon_loss * sum(w)`` over one
    cluster, and returns that step's clusters with the best of these gains.

    Parameters
    ----------
    kind, prior : str, dict
        Observation model and its prior (as in :func:`bnpcore._reference.posterior`).
    alloc, gamma : str, float
        Allocation model ("dp" or "finite") and its concentration.
    X : ndarray of shape (n_samples, n_features)
    w : ndarray of shape (n_samples,)
        Row weights (>= 0).
    n_fresh : int
    rng : numpy Generator (only ``rng.random(J)`` is drawn)

    Returns
    -------
    N, S : ndarray
        Effective summaries of the fresh clusters (sorted by decreasing mass), or ``None`` if
        fewer than two clusters survive.
    gain : float
        Weighted-subsample ELBO of the fit minus that of a single cluster (``-inf`` with
        ``None``).
    """
    X = np.asarray(X, dtype=float)
    w = np.asarray(w, dtype=float)
    m = X.shape[0]
    n_seeds = max(int(n_fresh), int(n_seeds or 0))
    J = int(min(n_seeds, m // 2))
    if J < 2:
        return None, None, -np.inf
    idx = kmeanspp(kind, prior, X, rng.random(J))
    if seed_rows <= 1:
        N, S = summarize(kind, X[idx], np.eye(J))
    else:
        N, S = grown_seeds(kind, prior, X, idx, max(1, min(int(seed_rows), m // J)))

    def sub_elbo(N, S, H):
        return elbo(kind, prior, alloc, gamma, N, S, H, 0.0)

    def all_pairs(J):
        return [(a, b) for a in range(J) for b in range(a + 1, J)]

    def merged_elbos(N, S, H, pair_H, pairs):
        """sub_elbo with each pair (a, b) merged into a (its entropy: the pair's)."""
        out = []
        for i, (a, b) in enumerate(pairs):
            keep = np.arange(N.shape[0]) != b
            Nm, Sm, Hm = N.copy(), S.copy(), H.copy()
            Nm[a] += Nm[b]
            Sm[a] += Sm[b]
            Hm[a] = pair_H[i]
            out.append(sub_elbo(Nm[keep], Sm[keep], Hm[keep]))
        return out

    def run_vb(N, S, n_iter, settled=None):
        for _ in range(n_iter):
            if N.shape[0] < 2:  # nothing to split any more: the fit returns None
                break
            N_new, S_new = _tidy(*_weighted_step(kind, prior, alloc, gamma, X, w, N, S)[:2])
            done = N_new.shape[0] == N.shape[0] and np.max(np.abs(N_new - N)) < 1e-3 * max(1.0, float(N.sum())) * 1e-2
            N, S = N_new, S_new
            if N.shape[0] < 2 or done:
                if settled is not None:
                    settled.append(True)
                break
        return N, S

    # Bregman k-means (hard assignments) before the soft iterations
    for _ in range(int(kmeans_iters)):
        W = e_log_lik_rows(kind, prior, N, S, X) + e_log_pi(alloc, N, gamma)[None, :]
        top = W.max(axis=1, keepdims=True)
        z = np.argmax(top - TIE_RTOL * np.maximum(1.0, np.abs(top)) <= W, axis=1)
        hard = np.zeros_like(W)
        hard[np.arange(m), z] = w
        N_new, S_new = _tidy(*summarize(kind, X, hard))
        same = N_new.shape == N.shape and np.array_equal(N_new, N)
        N, S = N_new, S_new
        if same or N.shape[0] < 2:
            break
    if N.shape[0] < 2:
        return None, None, -np.inf
    N1, S1 = summarize(kind, X, w[:, None])
    one = sub_elbo(N1, S1, np.zeros(1))
    left = int(iters)
    if abandon_loss is not None:
        # after the first VB iterations, one more soft step: a fit this far below one cluster stops
        first = min(int(abandon_after), int(iters))
        settled = []
        N, S = run_vb(N, S, first, settled)
        left = 0 if settled else int(iters) - first
        if N.shape[0] < 2:
            return None, None, -np.inf
        pairs = all_pairs(N.shape[0]) if N.shape[0] >= 3 else []  # never below two clusters
        Ns, Ss, Hs, pair_H = _weighted_step(kind, prior, alloc, gamma, X, w, N, S, pairs)
        # and every pairwise merge of its clusters
        interim = max([sub_elbo(Ns, Ss, Hs), *merged_elbos(Ns, Ss, Hs, pair_H, pairs)]) - one
        if interim < -float(abandon_loss) * float(np.sum(w)):
            Nt, St = _tidy(Ns, Ss)
            return (None, None, -np.inf) if Nt.shape[0] < 2 else (Nt, St, interim)
    N, S = run_vb(N, S, left)
    # greedy merges among the fresh clusters, judged by the weighted subsample ELBO
    while N.shape[0] >= 3:
        J = N.shape[0]
        pairs = all_pairs(J)
        N1, S1, H1, pair_H = _weighted_step(kind, prior, alloc, gamma, X, w, N, S, pairs)
        L0 = sub_elbo(N1, S1, H1)
        gains = [e - L0 for e in merged_elbos(N1, S1, H1, pair_H, pairs)]
        best = int(np.argmax(gains))
        if not gains[best] > 0 and n_fresh >= J:
            N, S = _tidy(N1, S1)
            break
        a, b = pairs[best]
        keep = np.arange(J) != b
        Nm, Sm = N1.copy(), S1.copy()
        Nm[a] += Nm[b]
        Sm[a] += Sm[b]
        N, S = run_vb(*_tidy(Nm[keep], Sm[keep]), max(1, int(iters) // 4))
    if N.shape[0] < 2:
        return None, None, -np.inf
    fit = sub_elbo(*_weighted_step(kind, prior, alloc, gamma, X, w, N, S)[:3])
    return N, S, fit - one
