"""Slow numpy/scipy reference of the topic-model kernels (HDP topic model and LDA).

Independent of the compiled core: everything here is written from the formulas of Hughes'
thesis ch. 5 (eq. 5.21-5.39, 5.47-5.48, Alg. 5.1-5.2), ch. 7 (Alg. 7.4) and Hughes & Sudderth
(2016, App. C-D), in the log domain and one document at a time.

Notation: ``C[v, k] = E[ln phi_kv]`` (V x K), document prior ``a_k`` (HDP: ``alpha beta_k``; LDA:
``alpha / K``) and ``a_rem`` (HDP: ``alpha beta_{>K}``; LDA: ``None``). For a document with word
types ``v_u`` and counts ``c_u``: ``r_uk = softmax_k(C[v_u, k] + P_k)``, ``N_k = sum_u c_u r_uk``,
``theta_k = N_k + a_k``, ``theta_rem = a_rem``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, polygamma

__all__ = [
    "beta_from_rho",
    "doc_objective",
    "doc_topic_step",
    "elbo_from_summaries",
    "elbo_raw",
    "hdp_elbo_doc",
    "hdp_elbo_top",
    "hdp_elbo_top_direct",
    "hdp_omega",
    "hdp_rho_init",
    "hdp_rho_objective",
    "lda_elbo_doc",
    "lda_elbo_raw",
    "topic_word_table",
]


def _c_dir(a):
    """Log normaliser ``c_Dir(a) = ln Gamma(sum a) - sum ln Gamma(a)``."""
    a = np.asarray(a, dtype=float)
    return gammaln(a.sum()) - gammaln(a).sum()


def _c_beta(a, b):
    """``c_B(a, b) = ln Gamma(a + b) - ln Gamma(a) - ln Gamma(b)``."""
    return gammaln(a + b) - gammaln(a) - gammaln(b)


def topic_word_table(lam):
    """``exp(E[ln phi_kv]) = exp(psi(lam_kv) - psi(sum_v lam_kv))``, returned V x K."""
    lam = np.asarray(lam, dtype=float)
    return np.exp(digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))).T.copy()


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def _softmax(w):
    """Row softmax of log weights; rows of ``-inf`` become uniform."""
    m = w.max(axis=-1, keepdims=True)
    bad = ~np.isfinite(m)
    m = np.where(bad, 0.0, m)
    e = np.exp(w - m)
    e = np.where(bad, 1.0, e)
    return e / e.sum(axis=-1, keepdims=True)


def doc_objective(C_d, c, r, N, a, a_rem):
    """Per-document objective at a consistent state (thesis eq. 5.26-5.28 for one document).

    ``L_d = sum_u c_u sum_k r_uk (C_uk - ln r_uk) - c_Dir([theta, theta_rem])`` with
    ``theta = N + a`` (the slack terms ``(N + a - theta) E[ln pi]`` vanish); ``0 ln 0 = 0``.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(r > 0, r * (C_d - np.log(np.where(r > 0, r, 1.0))), 0.0)
    theta = N + a
    full = theta if a_rem is None else np.append(theta, a_rem)
    return float(c @ t.sum(axis=1)) - _c_dir(full)


def _dense_doc(C_d, c, a, a_rem, opts, counters, init=None):
    """Dense document step (thesis Alg. 5.1) + restart proposals (Alg. 5.2); ``init`` (K counts)
    warm-starts the first pass from ``N = init`` instead of the prior."""
    U, K = C_d.shape
    if U == 0:
        return np.zeros((0, K)), np.zeros(K)
    # cold start: W = C + ln a; warm start: W = C + psi(init + a)
    r = _softmax(C_d + (np.log(a) if init is None else digamma(init + a)))
    N = c @ r
    for _ in range(opts["max_iter"]):
        r = _softmax(C_d + digamma(N + a))
        N_new = c @ r
        delta = np.max(np.abs(N_new - N))
        N = N_new
        counters["n_iter"] += 1
        if delta < opts["tol"]:
            break
    if not opts["restarts"]:
        return r, N
    lo = opts["restart_min_mass"]
    L_cur = doc_objective(C_d, c, r, N, a, a_rem)
    cand = [k for k in range(K) if N[k] > lo]
    if len(cand) < 2:
        return r, N
    cand = sorted(cand, key=lambda k: (N[k], k))[: min(opts["restart_max_trials"], len(cand) - 1)]
    for j in cand:
        if N[j] <= lo:
            continue
        Np = N.copy()
        Np[j] = 0.0
        for _ in range(opts["restart_iters"]):
            rp = _softmax(C_d + digamma(Np + a))
            Np = c @ rp
        counters["restarts_tried"] += 1
        Lp = doc_objective(C_d, c, rp, Np, a, a_rem)
        if Lp > L_cur:
            r, N, L_cur = rp, Np, Lp
            counters["restarts_accepted"] += 1
        if np.count_nonzero(lo < N) < 2:
            break
    return r, N


def _select(W, active, L):
    """Top-L responsibilities of each row of log weights ``W`` among the ``active`` topics.

    The L largest weights (ties: smaller index first) are kept and normalised; returns the
    dense U x K responsibilities (zeros elsewhere) and the boolean support (selected entries).
    """
    U, K = W.shape
    r = np.zeros((U, K))
    sel = np.zeros((U, K), dtype=bool)
    for u in range(U):
        w = W[u, active]
        order = np.argsort(-w, kind="stable")[: min(L, active.size)]
        idx = np.sort(active[order])
        r[u, idx] = _softmax(W[u, idx][None, :])[0]
        sel[u, idx] = True
    return r, sel


def _reweight(W, sel, active, L, rows):
    """Reweight the selected entries of ``rows``, reselect every other row (and rows whose
    support has no finite weight left)."""
    r, new_sel = _select(W, active, L)
    Wr = np.where(sel, W, -np.inf)
    keep = rows & np.isfinite(Wr.max(axis=1))
    r[keep] = np.where(sel[keep], _softmax(Wr[keep]), 0.0)
    new_sel[keep] = sel[keep]
    return r, new_sel


def _prune(active, N, eps):
    keep = active[N[active] > eps]
    if keep.size == 0:
        keep = active[[int(np.argmax(N[active]))]]
    return keep


def _weights(C_d, P, active):
    W = np.full(C_d.shape, -np.inf)
    W[:, active] = C_d[:, active] + P[active]
    return W


def _sparse_doc(C_d, c, a, a_rem, L, opts, counters, init=None):
    """L-sparse document step (thesis Alg. 7.4) + restarts restricted to the active set.

    Full reselection on iterations 1-5 and every 10th, otherwise reweighting on the current
    support; active set ``A = {k : N_k > eps}``, pruned after every pass. A restart proposal
    for topic ``j`` removes ``j`` from ``A``, reselects the rows whose support contains ``j``
    in its first pass and reweights all rows in later passes.
    """
    U, K = C_d.shape
    if U == 0:
        return np.zeros((0, K)), np.zeros(K)
    eps = opts["sparse_eps"]
    active = np.arange(K)
    P = np.log(a) if init is None else digamma(init + a)  # cold: the prior; warm: from init
    r, sel = _select(C_d + P, active, L)
    N = c @ r
    active = _prune(active, N, eps)
    for it in range(1, opts["max_iter"] + 1):
        old = N
        P = P.copy()
        P[active] = digamma(N[active] + a[active])
        W = _weights(C_d, P, active)
        if it <= 5 or it % 10 == 0:
            r, sel = _select(W, active, L)
        else:
            r, sel = _reweight(W, sel, active, L, np.ones(U, dtype=bool))
        N = c @ r
        counters["n_iter"] += 1
        done = np.max(np.abs(N - old)) < opts["tol"]
        active = _prune(active, N, eps)
        if done:
            break
    if not opts["restarts"]:
        return r, N
    lo = opts["restart_min_mass"]
    L_cur = doc_objective(C_d, c, r, N, a, a_rem)
    cand = [k for k in range(K) if N[k] > lo]
    if len(cand) < 2:
        return r, N
    cand = sorted(cand, key=lambda k: (N[k], k))[: min(opts["restart_max_trials"], len(cand) - 1)]
    for j in cand:
        if N[j] <= lo:
            continue
        Np = N.copy()
        Np[j] = 0.0
        act = active[active != j]
        if act.size == 0:
            continue
        Pp, selp = P.copy(), sel
        for t in range(opts["restart_iters"]):
            Pp[act] = digamma(Np[act] + a[act])
            rows = ~selp[:, j] if t == 0 else np.ones(U, dtype=bool)
            rp, selp = _reweight(_weights(C_d, Pp, act), selp, act, L, rows)
            Np = c @ rp
            act = _prune(act, Np, eps)
        counters["restarts_tried"] += 1
        Lp = doc_objective(C_d, c, rp, Np, a, a_rem)
        if Lp > L_cur:
            r, N, L_cur, active, sel, P = rp, Np, Lp, act, selp, Pp
            counters["restarts_accepted"] += 1
        if np.count_nonzero(lo < N) < 2:
            break
    return r, N


def doc_topic_step(
    indptr,
    indices,
    data,
    exp_elog_phi,
    alpha_beta,
    *,
    alpha_beta_rem=None,
    max_iter=100,
    tol=0.05,
    restarts=True,
    restart_mask=None,
    cold_mask=None,
    restart_max_trials=25,
    restart_iters=2,
    restart_min_mass=0.1,
    top_l=None,
    sparse_eps=1e-3,
    merge_pairs=None,
    usage_threshold=0.01,
    return_doc_topic=False,
    return_local=False,
    init_doc_topic=None,
):
    """Document local step of a CSR batch and its summaries (thesis eq. 5.47-5.48).

    Per document ``d`` (after the step): ``theta_dk = N_dk + a_k``, ``theta_d. = sum theta +
    a_rem``, ``ell_dk = psi(theta_dk) - psi(theta_d.)``. Summaries: ``N_k = sum_d N_dk``,
    ``S_kv = sum c r [v_du = v]``, ``H_k = -sum c r ln r``, ``P_k = sum_d ell_dk``,
    ``P_rem = sum_d ell_d,rem``, ``Q0 = -sum_d ln Gamma(theta_d.)``,
    ``Q_k = sum_d [ln Gamma(theta_dk) + (N_dk - theta_dk) ell_dk]``,
    ``Q_rem = sum_d [ln Gamma(a_rem) - a_rem ell_d,rem]``, ``doc_usage_k = #{d: N_dk > thr}``,
    and per merge pair ``(i, j)``: ``H = -sum c r~ ln r~`` (``r~ = r_i + r_j``),
    ``P = sum_d psi(theta~) - psi(theta_d.)``, ``Q = sum_d ln Gamma(theta~) + (N_i + N_j -
    theta~)(psi(theta~) - psi(theta_d.))`` with ``theta~ = theta_i + theta_j``.
    With ``return_local``, ``local`` is a list of per-document ``(r, theta)`` (``r`` dense U x K).
    ``init_doc_topic`` (D x K) warm-starts document ``d`` from ``N = init[d]``;
    ``restart_mask`` (D booleans) tries restarts only in the documents it marks; ``cold_mask``
    (D booleans) starts the documents it marks from the prior despite ``init_doc_topic``.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    data = np.asarray(data, dtype=float)
    E = np.asarray(exp_elog_phi, dtype=float)
    a = np.asarray(alpha_beta, dtype=float)
    V, K = E.shape
    C = _log(E)
    pairs = list(merge_pairs or [])
    opts = dict(
        max_iter=max_iter,
        tol=tol,
        restarts=restarts,
        restart_max_trials=restart_max_trials,
        restart_iters=restart_iters,
        restart_min_mass=restart_min_mass,
        sparse_eps=sparse_eps,
    )
    counters = dict(n_iter=0, restarts_tried=0, restarts_accepted=0)
    D = indptr.size - 1
    out = dict(
        n_docs=D,
        N=np.zeros(K),
        S=np.zeros((K, V)),
        H=np.zeros(K),
        P=np.zeros(K),
        P_rem=0.0,
        Q0=0.0,
        Q=np.zeros(K),
        Q_rem=0.0,
        doc_usage=np.zeros(K),
        merge_H=np.zeros(len(pairs)),
        merge_P=np.zeros(len(pairs)),
        merge_Q=np.zeros(len(pairs)),
    )
    doc_topic = np.zeros((D, K))
    local = []
    init = None if init_doc_topic is None else np.asarray(init_doc_topic, dtype=float)
    for d in range(D):
        w = indices[indptr[d] : indptr[d + 1]]
        c = data[indptr[d] : indptr[d + 1]]
        o = opts if restart_mask is None or restart_mask[d] else dict(opts, restarts=False)
        init_d = None if init is None or (cold_mask is not None and cold_mask[d]) else init[d]
        if top_l is None or top_l >= K:
            r, N = _dense_doc(C[w], c, a, alpha_beta_rem, o, counters, init_d)
        else:
            r, N = _sparse_doc(C[w], c, a, alpha_beta_rem, int(top_l), o, counters, init_d)
        theta = N + a
        tot = theta.sum() + (0.0 if alpha_beta_rem is None else alpha_beta_rem)
        ell = digamma(theta) - digamma(tot)
        out["N"] += N
        np.add.at(out["S"].T, w, c[:, None] * r)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["H"] -= (c[:, None] * np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)).sum(axis=0)
        out["P"] += ell
        out["Q0"] -= gammaln(tot)
        out["Q"] += gammaln(theta) + (N - theta) * ell
        if alpha_beta_rem is not None:
            ell_rem = digamma(alpha_beta_rem) - digamma(tot)
            out["P_rem"] += ell_rem
            out["Q_rem"] += gammaln(alpha_beta_rem) - alpha_beta_rem * ell_rem
        out["doc_usage"] += usage_threshold < N
        for m, (i, j) in enumerate(pairs):
            rt = r[:, i] + r[:, j]
            with np.errstate(divide="ignore", invalid="ignore"):
                out["merge_H"][m] -= float(c @ np.where(rt > 0, rt * np.log(np.where(rt > 0, rt, 1.0)), 0.0))
            tt = theta[i] + theta[j]
            lt = digamma(tt) - digamma(tot)
            out["merge_P"][m] += lt
            out["merge_Q"][m] += gammaln(tt) + (N[i] + N[j] - tt) * lt
        doc_topic[d] = N
        if return_local:
            local.append((r, theta))
    out.update(counters)
    if return_doc_topic:
        out["doc_topic"] = doc_topic
    if return_local:
        out["local"] = local
    return out


def beta_from_rho(rho):
    """``beta_k = rho_k prod_{l<k} (1 - rho_l)`` and ``beta_rem = prod_l (1 - rho_l)``."""
    rho = np.asarray(rho, dtype=float)
    rest = np.concatenate([[1.0], np.cumprod(1.0 - rho)])
    return rho * rest[:-1], float(rest[-1])


def hdp_omega(n_docs, n_components, gamma):
    """``omega_k = D (K + 1 - k) + D + 1 + gamma`` (thesis eq. 5.39), ``k = 1..K``."""
    k = np.arange(1, n_components + 1)
    return n_docs * (n_components + 1 - k) + n_docs + 1.0 + gamma


def hdp_rho_init(n_docs, n_components, gamma):
    """``rho_k = (D + 1) / (D + 1 + D (K + 1 - k) + gamma)``."""
    k = np.arange(1, n_components + 1)
    return (n_docs + 1.0) / (n_docs + 1.0 + n_docs * (n_components + 1 - k) + gamma)


def _e_log_u(rho, omega):
    e1, e0 = rho * omega, (1.0 - rho) * omega
    return digamma(e1) - digamma(omega), digamma(e0) - digamma(omega)


def hdp_elbo_top(rho, omega, n_docs, alpha, gamma):
    """Surrogate top term (thesis eq. 5.25).

    ``D K ln alpha + sum_k [c_B(1, gamma) - c_B(eta1, eta0) + (D + 1 - eta1) E ln u_k
    + (D (K + 1 - k) + gamma - eta0) E ln(1 - u_k)]``.
    """
    rho, omega = np.asarray(rho, float), np.asarray(omega, float)
    K = rho.size
    k = np.arange(1, K + 1)
    e1, e0 = rho * omega, (1.0 - rho) * omega
    lu, l1u = _e_log_u(rho, omega)
    return float(
        n_docs * K * np.log(alpha)
        + np.sum(_c_beta(1.0, gamma) - _c_beta(e1, e0) + (n_docs + 1 - e1) * lu + (n_docs * (K + 1 - k) + gamma - e0) * l1u)
    )


def hdp_elbo_top_direct(rho, omega, n_docs, alpha, gamma):
    """Top term written the other way: ``sum_k E ln [p(u_k) / q(u_k)]`` plus ``D`` times the
    expected surrogate bound ``K ln alpha + sum_k E ln u_k + sum_k (K + 1 - k) E ln(1 - u_k)``.

    ``E ln p(u_k) = ln gamma + (gamma - 1) E ln(1 - u_k)``,
    ``E ln q(u_k) = c_B(eta1, eta0) + (eta1 - 1) E ln u_k + (eta0 - 1) E ln(1 - u_k)``.
    """
    rho, omega = np.asarray(rho, float), np.asarray(omega, float)
    K = rho.size
    e1, e0 = rho * omega, (1.0 - rho) * omega
    lu, l1u = _e_log_u(rho, omega)
    log_p = np.log(gamma) + (gamma - 1.0) * l1u
    log_q = _c_beta(e1, e0) + (e1 - 1.0) * lu + (e0 - 1.0) * l1u
    bound = K * np.log(alpha) + lu.sum() + np.sum((K + 1 - np.arange(1, K + 1)) * l1u)
    return float(np.sum(log_p - log_q) + n_docs * bound)


def hdp_elbo_doc(q0, q, q_rem, p, p_rem, alpha, beta, beta_rem):
    """``L_doc = Q0 + sum Q + Q_rem + alpha sum beta P + alpha beta_rem P_rem``."""
    return float(q0 + np.sum(q) + q_rem + alpha * np.dot(beta, p) + alpha * beta_rem * p_rem)


def lda_elbo_doc(n_docs, alpha, q0, q, p):
    """LDA document term: ``D c_Dir(alpha/K 1_K) + Q0 + sum Q + (alpha/K) sum P``."""
    K = len(q)
    return float(n_docs * _c_dir(np.full(K, alpha / K)) + q0 + np.sum(q) + alpha / K * np.sum(p))


def hdp_rho_objective(rho, p, p_rem, n_docs, alpha, gamma, omega=None):
    """``f(rho)`` of thesis eq. 5.37 and its gradient, written term by term.

    ``f = sum_k [-c_B(eta1, eta0) + (D + 1 - eta1)(psi(eta1) - psi(omega))
    + (D (K + 1 - k) + gamma - eta0)(psi(eta0) - psi(omega))] + alpha sum_k beta_k P_k
    + alpha beta_rem P_rem``. The gradient differentiates each piece separately: the Beta part
    by the chain rule through ``eta1 = rho omega``, ``eta0 = (1 - rho) omega`` (with
    ``d c_B / d eta`` and ``d psi / d eta = psi'``), and the ``beta`` part through the Jacobian
    ``d beta_j / d rho_k`` (``beta_k / rho_k`` for ``j = k``, ``-beta_j / (1 - rho_k)`` for
    ``j > k``; ``d beta_rem / d rho_k = -beta_rem / (1 - rho_k)``).
    """
    rho, p = np.asarray(rho, float), np.asarray(p, float)
    K = rho.size
    k = np.arange(1, K + 1)
    omega = hdp_omega(n_docs, K, gamma) if omega is None else np.asarray(omega, float)
    e1, e0 = rho * omega, (1.0 - rho) * omega
    on, off = n_docs + 1.0 - e1, n_docs * (K + 1 - k) + gamma - e0
    pw = digamma(omega)
    beta, beta_rem = beta_from_rho(rho)
    f = np.sum(-_c_beta(e1, e0) + on * (digamma(e1) - pw) + off * (digamma(e0) - pw))
    f += alpha * (beta @ p + beta_rem * p_rem)
    # d/d eta1 and d/d eta0 of the Beta part
    d1 = -(digamma(e1 + e0) - digamma(e1)) - (digamma(e1) - pw) + on * polygamma(1, e1)
    d0 = -(digamma(e1 + e0) - digamma(e0)) - (digamma(e0) - pw) + off * polygamma(1, e0)
    grad = omega * (d1 - d0)
    jac = np.zeros((K, K))  # jac[j, k] = d beta_j / d rho_k
    for kk in range(K):
        jac[kk, kk] = beta[kk] / rho[kk]
        jac[kk + 1 :, kk] = -beta[kk + 1 :] / (1.0 - rho[kk])
    grad = grad + alpha * (jac.T @ p - beta_rem / (1.0 - rho) * p_rem)
    return float(f), grad


def _data_term(S, lam, lam_bar):
    """``sum_k [c_Dir(lam_bar 1) - c_Dir(lam_k)] + sum_kv (S + lam_bar - lam) E[ln phi]``."""
    V = lam.shape[1]
    elog = digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))
    c_prior = gammaln(V * lam_bar) - V * gammaln(lam_bar)
    c_post = gammaln(lam.sum(axis=1)) - gammaln(lam).sum(axis=1)
    return float(np.sum(c_prior - c_post) + np.sum((S + lam_bar - lam) * elog))


def elbo_raw(indptr, indices, data, local, lam, lam_bar, rho, omega, alpha, gamma, theta_rem=None):
    """HDP objective term by term from raw data and local/global parameters (thesis §5.2).

    ``local`` is a list of per-document ``(r, theta)`` (``r`` U_d x K, ``theta`` K); every
    document has ``theta_rem = theta_rem`` (default ``alpha beta_rem``). Returns a dict with
    ``data``, ``ent``, ``doc``, ``top`` and ``total``:
    ``data`` as in :func:`_data_term` with ``S`` rebuilt from ``r``;
    ``ent = -sum_d sum_u c_du sum_k r ln r``;
    ``doc = sum_d [-c_Dir(theta_d) + sum_k (N_dk + alpha beta_k - theta_dk) ell_dk
    + (alpha beta_rem - theta_rem) ell_rem]``;
    ``top`` from :func:`hdp_elbo_top_direct`.
    """
    indptr, indices, data = np.asarray(indptr), np.asarray(indices), np.asarray(data, float)
    lam = np.asarray(lam, float)
    K, V = lam.shape
    beta, beta_rem = beta_from_rho(rho)
    t_rem = alpha * beta_rem if theta_rem is None else theta_rem
    S = np.zeros((K, V))
    ent = 0.0
    doc = 0.0
    for d, (r, theta) in enumerate(local):
        w = indices[indptr[d] : indptr[d + 1]]
        c = data[indptr[d] : indptr[d + 1]]
        for u in range(w.size):
            S[:, w[u]] += c[u] * r[u]
            nz = r[u] > 0
            ent -= c[u] * np.sum(r[u, nz] * np.log(r[u, nz]))
        N = c @ r if w.size else np.zeros(K)
        tot = theta.sum() + t_rem
        ell = digamma(theta) - digamma(tot)
        ell_rem = digamma(t_rem) - digamma(tot)
        doc += -_c_dir(np.append(theta, t_rem)) + np.sum((N + alpha * beta - theta) * ell) + (alpha * beta_rem - t_rem) * ell_rem
    n_docs = len(local)
    terms = dict(
        data=_data_term(S, lam, lam_bar),
        ent=float(ent),
        doc=float(doc),
        top=hdp_elbo_top_direct(rho, omega, n_docs, alpha, gamma),
    )
    terms["total"] = sum(terms.values())
    return terms


def elbo_from_summaries(summ, lam, lam_bar, rho, omega, alpha, gamma):
    """HDP objective from batch summaries only (thesis eq. 5.47-5.48, corrected signs).

    ``L = L_data(S, lam) + sum H + [Q0 + sum Q + Q_rem + alpha sum beta P + alpha beta_rem
    P_rem] + L_top^sur(rho, omega; D, K)``.
    """
    beta, beta_rem = beta_from_rho(rho)
    terms = dict(
        data=_data_term(summ["S"], np.asarray(lam, float), lam_bar),
        ent=float(np.sum(summ["H"])),
        doc=hdp_elbo_doc(summ["Q0"], summ["Q"], summ["Q_rem"], summ["P"], summ["P_rem"], alpha, beta, beta_rem),
        top=hdp_elbo_top(rho, omega, summ["n_docs"], alpha, gamma),
    )
    terms["total"] = sum(terms.values())
    return terms


def lda_elbo_raw(indptr, indices, data, local, lam, lam_bar, alpha):
    """LDA objective (Hughes & Sudderth 2016, eq. 47-49) term by term from raw data.

    ``L = L_data + L_ent + sum_d [c_Dir(alpha/K 1) - c_Dir(theta_d)
    + sum_k (N_dk + alpha/K - theta_dk)(psi(theta_dk) - psi(sum theta_d))]``.
    """
    indptr, indices, data = np.asarray(indptr), np.asarray(indices), np.asarray(data, float)
    lam = np.asarray(lam, float)
    K, V = lam.shape
    S = np.zeros((K, V))
    ent = 0.0
    doc = 0.0
    for d, (r, theta) in enumerate(local):
        w = indices[indptr[d] : indptr[d + 1]]
        c = data[indptr[d] : indptr[d + 1]]
        np.add.at(S.T, w, c[:, None] * r)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent -= float(c @ np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0).sum(axis=1)) if w.size else 0.0
        N = c @ r if w.size else np.zeros(K)
        ell = digamma(theta) - digamma(theta.sum())
        doc += _c_dir(np.full(K, alpha / K)) - _c_dir(theta) + np.sum((N + alpha / K - theta) * ell)
    terms = dict(data=_data_term(S, lam, lam_bar), ent=float(ent), doc=float(doc))
    terms["total"] = sum(terms.values())
    return terms
