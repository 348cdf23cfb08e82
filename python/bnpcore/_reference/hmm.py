"""Reference (numpy/scipy) implementation of the hidden-Markov-model kernels: forward-backward,
Viterbi, brute-force enumeration of state paths, and the allocation math of the (sticky) HDP-HMM
and the finite HMM (Hughes thesis §6.2-§6.3; Hughes, Stephenson & Sudderth, NIPS 2015).

Conventions: ``log_lik`` is ``C`` (T_total x K, all sequences concatenated), ``seq_range`` the
offsets (n_seqs + 1), ``log_start`` = ``P0`` (K), ``log_trans`` = ``P`` (K x K). The potentials are
sub-normalised and used as given. Everything here works in log space with ``logsumexp``; it is slow
and meant to be read.
"""

import itertools

import numpy as np
from scipy.special import digamma, gammaln, logsumexp


def _xlogx(x):
    """x ln x elementwise with 0 ln 0 = 0."""
    x = np.asarray(x, dtype=float)
    out = np.zeros(x.shape)
    m = x > 0
    out[m] = x[m] * np.log(x[m])
    return out


def _seqs(seq_range):
    sr = np.asarray(seq_range, dtype=np.int64)
    return [(int(a), int(b)) for a, b in zip(sr[:-1], sr[1:])]


def forward_backward_seq(C, log_start, log_trans):
    """Log-space forward-backward of one sequence, normalised at every step.

    Formulas: la_1 = P0 + C_1; la_t(k) = logsumexp_j(la_{t-1}(j) + P_jk) + C_tk, then
    lz_t = logsumexp_k la_t(k) and la_t -= lz_t (so la_t is the log filtering distribution and
    log Z = sum_t lz_t); lb_T = 0; lb_t(j) = logsumexp_k(P_jk + C_{t+1,k} + lb_{t+1}(k)) - lz_{t+1};
    r_t = exp(la_t + lb_t) (renormalised); s_tjk = exp(la_t(j) + P_jk + C_{t+1,k} + lb_{t+1}(k) - lz_{t+1}).
    The per-step normalisation keeps every log quantity at the scale of one step (an unnormalised
    recursion carries log-weights of size |log Z| and loses digits to cancellation).

    Returns
    -------
    log_z : float
    resp : ndarray of shape (T, K)
    pair : ndarray of shape (T - 1, K, K), the pairwise marginals s_t
    """
    C = np.asarray(C, dtype=float)
    T, K = C.shape
    la = np.zeros((T, K))
    lz = np.zeros(T)
    for t in range(T):
        la[t] = (log_start if t == 0 else logsumexp(la[t - 1][:, None] + log_trans, axis=0)) + C[t]
        lz[t] = logsumexp(la[t])
        la[t] -= lz[t]
    lb = np.zeros((T, K))
    for t in range(T - 2, -1, -1):
        lb[t] = logsumexp(log_trans + (C[t + 1] + lb[t + 1])[None, :], axis=1) - lz[t + 1]
    log_z = float(lz.sum())
    resp = np.exp(la + lb)
    resp /= resp.sum(axis=1, keepdims=True)
    pair = np.zeros((max(T - 1, 0), K, K))
    for t in range(T - 1):
        pair[t] = np.exp(la[t][:, None] + log_trans + (C[t + 1] + lb[t + 1])[None, :] - lz[t + 1])
    return log_z, resp, pair


def chain_summaries(resp, pair):
    """Summaries of one sequence from its marginals r (T x K) and pairwise marginals s (T-1 x K x K).

    N_k = sum_t r_tk; M0_k = r_1k; M_jk = sum_t s_tjk; H^start_k = -r_1k ln r_1k;
    H_jk = -sum_t s_tjk ln(s_tjk / sum_m s_tjm) (0 ln 0 = 0).
    """
    K = resp.shape[1]
    rows = pair.sum(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(pair > 0, pair / np.where(rows > 0, rows, 1.0), 1.0)
    h_trans = -(pair * np.log(cond)).sum(axis=0) if len(pair) else np.zeros((K, K))
    return {
        "N": resp.sum(axis=0),
        "start_count": resp[0].copy(),
        "trans_count": pair.sum(axis=0) if len(pair) else np.zeros((K, K)),
        "h_start": -_xlogx(resp[0]),
        "h_trans": h_trans,
    }


def forward_backward(log_lik, seq_range, log_start, log_trans):
    """Forward-backward over every sequence; the summaries are sums over sequences.

    Returns
    -------
    dict with ``N`` (K), ``start_count`` (K), ``trans_count`` (K x K), ``h_start`` (K),
    ``h_trans`` (K x K), ``log_z`` (n_seqs), ``log_z_sum``, ``resp`` (T_total x K) and ``pair``
    (list of per-sequence pairwise arrays).
    """
    C = np.asarray(log_lik, dtype=float)
    K = C.shape[1]
    out = {
        "N": np.zeros(K),
        "start_count": np.zeros(K),
        "trans_count": np.zeros((K, K)),
        "h_start": np.zeros(K),
        "h_trans": np.zeros((K, K)),
    }
    log_z, resp, pairs = [], np.zeros_like(C), []
    for a, b in _seqs(seq_range):
        lz, r, s = forward_backward_seq(C[a:b], log_start, log_trans)
        for key, v in chain_summaries(r, s).items():
            out[key] = out[key] + v
        log_z.append(lz)
        resp[a:b] = r
        pairs.append(s)
    out["log_z"] = np.array(log_z)
    out["log_z_sum"] = float(np.sum(log_z))
    out["resp"] = resp
    out["pair"] = pairs
    return out


def path_log_weight(z, C, log_start, log_trans):
    """log-weight of a path: P0[z_1] + sum_t C[t, z_t] + sum_{t>=2} P[z_{t-1}, z_t]."""
    z = np.asarray(z)
    w = log_start[z[0]] + C[np.arange(len(z)), z].sum()
    return float(w + log_trans[z[:-1], z[1:]].sum())


def brute_force(C, log_start, log_trans):
    """Enumerate all K**T paths of one sequence (tiny T and K only).

    Returns the exact ``log_z`` (logsumexp of the path log-weights), marginals ``resp``, pairwise
    marginals ``pair``, the summaries of :func:`chain_summaries`, the entropy ``entropy`` of the
    normalised path distribution, and the MAP path ``map_path`` with its log-weight ``map_score``.
    """
    C = np.asarray(C, dtype=float)
    T, K = C.shape
    paths = np.array(list(itertools.product(range(K), repeat=T)))
    w = np.array([path_log_weight(z, C, log_start, log_trans) for z in paths])
    log_z = float(logsumexp(w))
    q = np.exp(w - log_z)
    resp = np.zeros((T, K))
    pair = np.zeros((max(T - 1, 0), K, K))
    for z, qz in zip(paths, q):
        resp[np.arange(T), z] += qz
        for t in range(T - 1):
            pair[t, z[t], z[t + 1]] += qz
    out = chain_summaries(resp, pair)
    out.update(
        log_z=log_z,
        resp=resp,
        pair=pair,
        entropy=float(-_xlogx(q).sum()),
        map_path=paths[int(np.argmax(w))],
        map_score=float(w.max()),
    )
    return out


def viterbi(log_lik, seq_range, log_start, log_trans):
    """MAP paths: V_1 = P0 + C_1; V_tk = C_tk + max_j(V_{t-1,j} + P_jk) (ties: smallest j);
    z_T = argmax V_T; back-tracking.

    Returns
    -------
    states : ndarray of shape (T_total,), int64
    score : ndarray of shape (n_seqs,), the log-weight of each MAP path
    """
    C = np.asarray(log_lik, dtype=float)
    states = np.zeros(C.shape[0], dtype=np.int64)
    scores = []
    for a, b in _seqs(seq_range):
        Cd = C[a:b]
        T = b - a
        V = log_start + Cd[0]
        ptr = np.zeros((T, C.shape[1]), dtype=np.int64)
        for t in range(1, T):
            cand = V[:, None] + log_trans
            ptr[t] = np.argmax(cand, axis=0)
            V = cand.max(axis=0) + Cd[t]
        z = np.zeros(T, dtype=np.int64)
        z[-1] = int(np.argmax(V))
        for t in range(T - 1, 0, -1):
            z[t - 1] = ptr[t, z[t]]
        states[a:b] = z
        scores.append(float(V.max()))
    return states, np.array(scores)


# ----------------------------------------------------------------------------------------------
# allocation math


def stick_pi(u):
    """beta_k = u_k prod_{m<k}(1 - u_m) (k = 1..K) and the remainder beta_{K+1} = prod_m (1 - u_m)."""
    u = np.asarray(u, dtype=float)
    rest = np.concatenate([[1.0], np.cumprod(1.0 - u)])
    return np.concatenate([u * rest[:-1], rest[-1:]])


def hmm_prior_table(u, alpha, start_alpha, kappa):
    """Prior Dirichlet parameters ((K+1) x (K+1)): row 0 = alpha_0 beta; row j >= 1 =
    alpha beta + kappa delta_j (no kappa on the start row)."""
    beta = stick_pi(u)
    K = len(beta) - 1
    prior = np.vstack([start_alpha * beta] + [alpha * beta] * K)
    prior[1:, :K] += kappa * np.eye(K)
    return prior


def _count_table(start_count, trans_count):
    """(K+1) x (K+1) counts: row 0 = M0, rows 1..K = M, remainder column 0; negatives clamped."""
    K = len(start_count)
    M = np.zeros((K + 1, K + 1))
    M[0, :K] = start_count
    M[1:, :K] = trans_count
    return np.maximum(M, 0.0)


def hmm_theta(start_count, trans_count, u, alpha, start_alpha, kappa, gamma):
    """theta_jl = M_jl + alpha_j beta_l(u) + kappa [j >= 1] delta_jl (thesis Eq. 6.39-6.40)."""
    del gamma
    return _count_table(start_count, trans_count) + hmm_prior_table(u, alpha, start_alpha, kappa)


def hmm_e_log_pi(theta):
    """P_jl = psi(theta_jl) - psi(sum_m theta_jm)."""
    theta = np.asarray(theta, dtype=float)
    return digamma(theta) - digamma(theta.sum(axis=1, keepdims=True))


def top_coefs(K, kappa, gamma):
    """(a1, a0): kappa = 0: a1 = K + 2, a0_k = (K+1)(K+1-k) + gamma; kappa > 0: a1 = K + 1,
    a0_k = K(K+1-k) + 1 + gamma (k = 1..K; the +1 is the start row's, corrected Eq. 6.33)."""
    k = np.arange(1, K + 1)
    if kappa > 0:
        return np.full(K, K + 1.0), K * (K + 1.0 - k) + 1.0 + gamma
    return np.full(K, K + 2.0), (K + 1.0) * (K + 1.0 - k) + gamma


def _c_beta(a, b):
    return gammaln(a + b) - gammaln(a) - gammaln(b)


def _c_dir(lam):
    return gammaln(np.sum(lam)) - np.sum(gammaln(lam))


def hmm_top_objective(u, omega, e_log_pi, alpha, start_alpha, kappa, gamma):
    """f(u, omega) = sum_k [-c_Beta(a_k, b_k) + A_k (psi(a_k) - psi(omega_k)) + B_k (psi(b_k) - psi(omega_k))]
    + sum_l beta_l(u) W_l, with a = u omega, b = (1-u) omega, A = a1 - a, B = a0 - b and
    W_l = alpha_0 P_0l + alpha sum_{j>=1} P_jl + (ln(alpha+kappa) - ln kappa) [kappa > 0][l <= K].

    Returns the value only (gradients are checked by finite differences of this function).
    """
    u = np.asarray(u, dtype=float)
    omega = np.asarray(omega, dtype=float)
    P = np.asarray(e_log_pi, dtype=float)
    K = len(u)
    a1, a0 = top_coefs(K, kappa, gamma)
    a, b = u * omega, (1 - u) * omega
    f = np.sum(-_c_beta(a, b) + (a1 - a) * (digamma(a) - digamma(omega)) + (a0 - b) * (digamma(b) - digamma(omega)))
    W = start_alpha * P[0] + alpha * P[1:].sum(axis=0)
    if kappa > 0:
        W[:K] += np.log(alpha + kappa) - np.log(kappa)
    return float(f + stick_pi(u) @ W)


def hmm_top_surrogate(u, omega, alpha, start_alpha, kappa, gamma):
    """L_top = K ln alpha_0 + K^2 ln alpha + [kappa > 0](K (ln kappa - ln(alpha+kappa))
    + (ln(alpha+kappa) - ln kappa) sum_{k<=K} beta_k)
    + sum_k [c_Beta(1, gamma) - c_Beta(a_k, b_k) + (a1_k - a_k) E ln u_k + (a0_k - b_k) E ln(1-u_k)]."""
    u = np.asarray(u, dtype=float)
    omega = np.asarray(omega, dtype=float)
    K = len(u)
    a1, a0 = top_coefs(K, kappa, gamma)
    a, b = u * omega, (1 - u) * omega
    e_log_u = digamma(a) - digamma(omega)
    e_log_1mu = digamma(b) - digamma(omega)
    top = K * np.log(start_alpha) + K * K * np.log(alpha)
    if kappa > 0:
        d = np.log(alpha + kappa) - np.log(kappa)
        top += -K * d + d * stick_pi(u)[:K].sum()
    top += np.sum(_c_beta(1.0, gamma) - _c_beta(a, b) + (a1 - a) * e_log_u + (a0 - b) * e_log_1mu)
    return float(top)


def hmm_trans_term(start_count, trans_count, theta, u, alpha, start_alpha, kappa):
    """L_HDP-trans = sum_{j=0}^K [-c_Dir(theta_j) + sum_l (M_jl + prior_jl - theta_jl) P_jl]."""
    theta = np.asarray(theta, dtype=float)
    P = hmm_e_log_pi(theta)
    slack = _count_table(start_count, trans_count) + hmm_prior_table(u, alpha, start_alpha, kappa) - theta
    return float(sum(-_c_dir(theta[j]) for j in range(len(theta))) + np.sum(slack * P))


def hmm_elbo_alloc(start_count, trans_count, h_start, h_trans, theta, u, omega, alpha, start_alpha, kappa, gamma):
    """Allocation part of the objective from summaries: entropy (sum h_start + sum h_trans)
    + transition term + top-level surrogate. Returns a dict with the three terms and ``total``."""
    entropy = float(np.sum(h_start) + np.sum(h_trans))
    trans = hmm_trans_term(start_count, trans_count, theta, u, alpha, start_alpha, kappa)
    top = hmm_top_surrogate(u, omega, alpha, start_alpha, kappa, gamma)
    return {"entropy": entropy, "trans": trans, "top": top, "total": entropy + trans + top}


def finite_hmm_prior(K, alpha, start_alpha, kappa):
    """(K+1) x K: row 0 = alpha_0 / K, rows j >= 1 = alpha / K + kappa delta_j."""
    prior = np.vstack([np.full(K, start_alpha / K)] + [np.full(K, alpha / K)] * K)
    prior[1:] += kappa * np.eye(K)
    return prior


def finite_hmm_theta(start_count, trans_count, alpha, start_alpha, kappa):
    """theta = prior + [M0; M] (negatives clamped)."""
    K = len(start_count)
    return finite_hmm_prior(K, alpha, start_alpha, kappa) + np.maximum(np.vstack([start_count, trans_count]), 0.0)


def finite_hmm_elbo_alloc(start_count, trans_count, h_start, h_trans, theta, alpha, start_alpha, kappa):
    """entropy + sum_j [c_Dir(prior_j) - c_Dir(theta_j) + sum_l (prior_jl + M_jl - theta_jl) P_jl]."""
    K = len(start_count)
    theta = np.asarray(theta, dtype=float)
    prior = finite_hmm_prior(K, alpha, start_alpha, kappa)
    P = hmm_e_log_pi(theta)
    counts = np.maximum(np.vstack([start_count, trans_count]), 0.0)
    trans = sum(_c_dir(prior[j]) - _c_dir(theta[j]) for j in range(K + 1)) + np.sum((prior + counts - theta) * P)
    entropy = float(np.sum(h_start) + np.sum(h_trans))
    return {"entropy": entropy, "trans": float(trans), "top": 0.0, "total": entropy + float(trans)}


def raw_elbo_hmm(log_lik, resp, pairs, seq_range, theta, u, omega, alpha, start_alpha, kappa, gamma):
    """The objective term by term from raw local parameters (not from summaries), with the
    emission log-potentials C standing for the data term:

    sum_{t,k} r_tk C_tk + sum_d [sum_k r_d1k P_0k + sum_t sum_jk s_dtjk P_jk]        (E log p(x, z | .))
    - sum_d [sum_k r_d1k ln r_d1k + sum_t sum_jk s_dtjk ln(s_dtjk / r_dtj)]          (entropy of q(z))
    + sum_j [-c_Dir(theta_j) + sum_l (prior_jl - theta_jl) P_jl] + L_top(u, omega).

    ``pairs`` is the list of per-sequence pairwise arrays (T_d - 1, K, K).
    """
    C = np.asarray(log_lik, dtype=float)
    K = C.shape[1]
    P = hmm_e_log_pi(theta)
    val = float(np.sum(resp * C))
    ent = 0.0
    for (a, b), s in zip(_seqs(seq_range), pairs):
        val += float(resp[a] @ P[0, :K])
        val += float(np.sum(s * P[None, 1:, :K]))
        ent -= float(_xlogx(resp[a]).sum())
        for t in range(b - a - 1):
            rt = resp[a + t][:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                cond = np.where(s[t] > 0, s[t] / np.where(rt > 0, rt, 1.0), 1.0)
            ent -= float(np.sum(s[t] * np.log(cond)))
    prior = hmm_prior_table(u, alpha, start_alpha, kappa)
    glob = sum(-_c_dir(theta[j]) for j in range(K + 1)) + float(np.sum((prior - theta) * P))
    return val + ent + glob + hmm_top_surrogate(u, omega, alpha, start_alpha, kappa, gamma)


def merge_pair_tables(resp, pairs, seq_range, i, j):
    """Entropy tables of the candidate that merges state j into state i, computed by explicitly
    merging the local parameters (thesis §6.5.1): r'_t = r_t with column j added to column i and
    removed, s'_t = s_t with index j summed into i along both axes, then :func:`chain_summaries`.

    Returns
    -------
    h_start : ndarray of shape (K - 1,)
    h_trans : ndarray of shape (K - 1, K - 1)
        The merged tables, in the state order of the merged model (indices > j shift down by one).
    """
    K = resp.shape[1]
    keep = [k for k in range(K) if k != j]
    h_start = np.zeros(K - 1)
    h_trans = np.zeros((K - 1, K - 1))
    for (a, b), s in zip(_seqs(seq_range), pairs):
        r = resp[a:b].copy()
        r[:, i] += r[:, j]
        r = r[:, keep]
        s2 = s.copy()
        s2[:, i, :] += s2[:, j, :]
        s2[:, :, i] += s2[:, :, j]
        s2 = s2[:, keep][:, :, keep]
        out = chain_summaries(r, s2)
        h_start += out["h_start"]
        h_trans += out["h_trans"]
    return h_start, h_trans
