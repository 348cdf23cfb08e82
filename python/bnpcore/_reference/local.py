"""Reference (numpy/scipy) implementation of the local step and the entropy statistics
(Hughes thesis §3.4.2; restricted steps of §4.1–4.3)."""

import numpy as np
from scipy.special import logsumexp

from .alloc import _check_alloc, dp_e_log_pi, dp_eta, finite_e_log_pi, finite_theta
from .obs import e_log_lik, summarize


def _neg_xlogx(r):
    """-r ln r elementwise with 0 ln 0 = 0."""
    r = np.asarray(r, dtype=float)
    out = np.zeros(r.shape)
    mask = r > 0
    out[mask] = -r[mask] * np.log(r[mask])
    return out


def _softmax_rows(W):
    """r_nk = exp(W_nk - lse_n), lse_n = max_k W_nk + ln sum_k exp(W_nk - max_k W_nk)."""
    W = np.atleast_2d(np.asarray(W, dtype=float))
    lse = logsumexp(W, axis=1, keepdims=True)
    return np.exp(W - lse)


def e_log_pi(alloc, N_post, gamma):
    """E[ln pi_k] of the allocation posterior at its optimum for the counts N_post.

    dp: dp_e_log_pi(1 + N_post, gamma + N_post^>) (Hughes thesis eqs. 3.17–3.18);
    finite: psi(theta_k) - psi(sum theta), theta = gamma/K + N_post (Hughes thesis §2.5).
    """
    _check_alloc(alloc)
    if alloc == "dp":
        return dp_e_log_pi(*dp_eta(N_post, gamma))
    return finite_e_log_pi(finite_theta(N_post, gamma))


def local_step(kind, prior, alloc, gamma, N_post, S_post, X):
    """Dense local step (Hughes thesis §3.4.2).

    W_nk = E_q[log F(x_n | phi_k)] + E[ln pi_k] with globals from (N_post, S_post);
    r_nk = exp(W_nk - lse_n), lse_n = log sum_k exp(W_nk) (computed stably).

    Returns
    -------
    R : ndarray of shape (n_samples, n_components), rows on the simplex.
    """
    W = e_log_lik(kind, prior, N_post, S_post, X) + e_log_pi(alloc, N_post, gamma)[None, :]
    return _softmax_rows(W)


def entropy(R):
    """Per-cluster assignment entropy H_k = -sum_n r_nk ln r_nk (0 ln 0 = 0).

    Returns
    -------
    ndarray of shape (n_components,)
    """
    R = np.atleast_2d(np.asarray(R, dtype=float))
    return _neg_xlogx(R).sum(axis=0)


def pair_entropy(R, pairs):
    """Merge entropies H^merge_ab = -sum_n (r_na + r_nb) ln(r_na + r_nb) for each pair (a, b).

    Returns
    -------
    ndarray of shape (n_pairs,)
    """
    R = np.atleast_2d(np.asarray(R, dtype=float))
    out = np.zeros(len(pairs))
    for m, (a, b) in enumerate(pairs):
        out[m] = _neg_xlogx(R[:, a] + R[:, b]).sum()
    return out


#: source mass at or below which a dense restricted step gives the whole mass to the first
#: destination column (the Rust core's ``PROPOSAL_MIN_MASS``)
PROPOSAL_MIN_MASS = 1e-10


def _carried(R, R_new, carry, min_mass):
    """Rows a proposal with ``carry = (anchor, cols)`` leaves alone: without anchor mass they
    keep r'_nj = r_{n,cols[j]}; with anchor mass 0 < m_n <= min_mass (``None``: never) they keep
    it too, destination 0 taking m_n. Returns R_new with those rows set."""
    anchor, cols = carry
    m = R[:, list(anchor)].sum(axis=1)
    low = m <= (0.0 if min_mass is None else min_mass)
    R_new = R_new.copy()
    R_new[low] = R[np.ix_(low, list(cols))]
    R_new[low, 0] += m[low]
    return R_new


def restricted_resp(R, src_cols, dest_W, min_mass=PROPOSAL_MIN_MASS, carry=None):
    """Destination columns r' of a dense restricted step (birth/delete proposals).

    a_n = sum_{k in src_cols} r_nk (mass to be redistributed);
    r'_nj = a_n softmax_j(dest_W_n)_j if a_n > min_mass, else r'_n0 = a_n and r'_nj = 0 (j > 0).
    With ``carry = (anchor, cols)`` (src = anchor ∪ cols; a delete) only rows with anchor mass
    m_n > min_mass are re-spread; the others keep r_{n,cols[j]}, destination 0 taking m_n.

    Returns
    -------
    ndarray of shape (n_samples, n_dest)
    """
    R = np.atleast_2d(np.asarray(R, dtype=float))
    dest_W = np.atleast_2d(np.asarray(dest_W, dtype=float))
    a = R[:, list(src_cols)].sum(axis=1)
    # a row whose destinations are all impossible (-inf) is spread uniformly
    dead = ~np.isfinite(dest_W.max(axis=1))
    P = np.full(dest_W.shape, 1.0 / dest_W.shape[1])
    P[~dead] = _softmax_rows(dest_W[~dead])
    low = a <= min_mass
    P[low] = 0.0
    P[low, 0] = 1.0
    out = a[:, None] * P
    return out if carry is None else _carried(R, out, carry, min_mass)


def proposal_summaries(kind, X, R, src_cols, dest_W, min_mass=PROPOSAL_MIN_MASS, carry=None):
    """Summaries of the restricted responsibilities used by birth/delete proposals:
    r' = :func:`restricted_resp`; returns N'_j = sum_n r'_nj, S'_j = sum_n r'_nj s(x_n),
    H'_j = -sum_n r'_nj ln r'_nj.

    Returns
    -------
    N : ndarray of shape (n_dest,)
    S : ndarray of shape (n_dest, stat_dim)
    H : ndarray of shape (n_dest,)
    """
    R_new = restricted_resp(R, src_cols, dest_W, min_mass, carry=carry)
    N, S = summarize(kind, X, R_new)
    return N, S, entropy(R_new)


def top_l_resp(W, top_l):
    """L-sparse responsibilities from log weights (Hughes thesis eqs. 7.2, 7.4, Algs. 7.1–7.2), by a full sort per row.

    T_n = indices of the top_l largest W_nk under the order (larger value first, then smaller
    index first); entries equal to -inf are dropped unless the whole row is -inf.
    r_nk = exp(W_nk - lse_n^(L)) for k in T_n, lse_n^(L) = log sum_{k in T_n} exp(W_nk); 0 elsewhere.
    top_l >= K gives the dense softmax.

    Returns
    -------
    R : ndarray of shape (n_samples, n_components) with at most top_l non-zeros per row.
    """
    W = np.atleast_2d(np.asarray(W, dtype=float))
    n, K = W.shape
    R = np.zeros((n, K))
    for i in range(n):
        w = W[i]
        order = sorted(range(K), key=lambda k: (-w[k], k))[: min(top_l, K)]
        if np.isfinite(w[order]).any():
            order = [k for k in order if w[k] > -np.inf]
        sel = np.sort(np.asarray(order, dtype=int))
        R[i, sel] = _softmax_rows(w[sel][None, :])[0]
    return R


def top_l_local_step(kind, prior, alloc, gamma, N_post, S_post, X, top_l):
    """L-sparse local step (Hughes & Sudderth 2016 §3; Hughes thesis §7.1): W_nk as in :func:`local_step`, then
    :func:`top_l_resp` (keep the top_l largest W_nk per row and renormalise over them).

    Returns
    -------
    R : ndarray of shape (n_samples, n_components), rows on the simplex with <= top_l non-zeros.
    """
    W = e_log_lik(kind, prior, N_post, S_post, X) + e_log_pi(alloc, N_post, gamma)[None, :]
    return top_l_resp(W, top_l)


def top_l_proposal_summaries(kind, X, R, W_dest, src_cols, top_l, dest_cols=None, carry=None):
    """Restricted-step summaries with L-sparse rows and slot budgets (Hughes thesis §4.2–4.3 with L-sparse rows).

    For each row n with mass a_n = sum_{k in src_cols} r_nk > 0: the destinations already
    held by the row outside the source (only for existing ``dest_cols``) are always kept, plus the
    ``f_n = |src ∩ T_n| + (top_l - nnz_n)`` best remaining destinations by W_dest (ties: smaller
    position); p_n = softmax of W_dest over that support; r'_nj = a_n p_nj. Rows without source
    mass get r' = 0. The budget applies for every top_l (also top_l >= K, where the rows themselves
    are dense): an accepted proposal must stay in the family "at most top_l entries per row" that
    later local steps optimise over. With ``carry = (anchor, cols)`` (a delete) only rows holding
    some anchor mass are re-spread; the others keep r'_nj = r_{n,cols[j]}. Returns N', S', H' of
    r' (as :func:`proposal_summaries`).
    """
    R = np.atleast_2d(np.asarray(R, dtype=float))
    W_dest = np.atleast_2d(np.asarray(W_dest, dtype=float))
    n, J = W_dest.shape
    src = list(src_cols)
    R_new = np.zeros((n, J))
    for i in range(n):
        a = R[i, src].sum()
        if not a > 0:
            continue
        nnz = int(np.count_nonzero(R[i]))
        n_src = int(np.count_nonzero(R[i, src]))
        present = []
        if dest_cols is not None:
            present = [j for j, c in enumerate(dest_cols) if R[i, c] > 0 and c not in src]
        rest = [j for j in range(J) if j not in present]
        rest = sorted(rest, key=lambda j: (-W_dest[i, j], j))[: n_src + top_l - nnz]
        sel = np.sort(np.asarray(present + rest, dtype=int))
        R_new[i, sel] = a * _softmax_rows(W_dest[i, sel][None, :])[0]
    if carry is not None:
        R_new = _carried(R, R_new, carry, None)
    N, S = summarize(kind, X, R_new)
    return N, S, entropy(R_new)
