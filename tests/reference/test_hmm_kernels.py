"""HMM kernels (forward-backward, Viterbi, HDP-HMM / finite-HMM allocation math) against the numpy
reference ``bnpcore._reference.hmm``, including brute-force enumeration of all K**T state paths.

Fixtures (hypothesis): K in 1..3 and T_d in 1..6 for brute force (D in 1..3 sequences), larger random
shapes for core vs reference. Emission log-potentials C ~ N(0, 3^2) or spread over 1e4 (extreme);
the transition log-potentials are E[ln pi] of random Dirichlet tables theta ~ Gamma(0.5, 1) (so they
are sub-normalised, as in the model), optionally with entries 1e-200 (transitions that underflow).

Spec-03 §6 properties covered here: T-FB1 (brute force: log Z, marginals, pairwise sums, start
counts, path entropy and its split), T-FB2 (consistency and the §2.9 sanity relations), T-FB3 (shift
invariance), T-FB4 (scaled == log space, extreme fixtures, underflowing transitions), T-FB5
(variational identity), T-VIT1, T-VIT2, T-ELBO1 (summary ELBO == §2.10 identity == raw term-by-term
ELBO), T-THETA, T-UGRAD, T-UOPT, T-BOUND (i)-(iv), T-EMPTY (allocation part), T-PAR (thread-count
bit identity) and summary additivity over sequence splits.
"""

import numpy as np
import pytest
from bnpcore import _core
from bnpcore._reference import hmm as ref
from bnpcore._reference.obs import e_log_lik as ref_e_log_lik
from bnpcore._reference.obs import summarize as ref_summarize
from bnpcore.exceptions import NonFiniteError, ParameterError, ShapeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import digamma, gammaln

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ATOL_PROB = 1e-10
RTOL_LOG = 1e-9


def close(a, b, atol=ATOL_PROB, rtol=0.0):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    assert a.shape == b.shape, (a.shape, b.shape)
    tol = atol + rtol * np.abs(b)
    assert np.all(np.abs(a - b) <= tol), float(np.max(np.abs(a - b) - tol))


@st.composite
def problems(draw, max_K=3, max_T=6, max_D=3, allow_extreme=True):
    K = draw(st.integers(1, max_K))
    D = draw(st.integers(1, max_D))
    lens = [draw(st.integers(1, max_T)) for _ in range(D)]
    seed = draw(st.integers(0, 2**32 - 1))
    extreme = allow_extreme and draw(st.booleans())
    tiny_theta = draw(st.booleans())
    rng = np.random.default_rng(seed)
    seq_range = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    T = int(seq_range[-1])
    C = rng.normal(0.0, 3.0, size=(T, K))
    if extreme:
        C = rng.uniform(-1e4, 0.0, size=(T, K))
    theta = rng.gamma(0.5, 1.0, size=(K + 1, K + 1)) + 1e-3
    if tiny_theta:
        # underflowing transitions, but the path "start in state 0 and stay" keeps a finite weight
        # (if every path had a weight near -1e200 no double-precision answer would be meaningful)
        mask = rng.random((K + 1, K + 1)) < 0.3
        mask[0, 0] = False
        mask[np.arange(1, K + 1), np.arange(K)] = False
        theta[mask] = 1e-200
    P = ref.hmm_e_log_pi(theta)
    return {"C": C, "seq_range": seq_range, "log_start": P[0, :K].copy(), "log_trans": np.ascontiguousarray(P[1:, :K]), "theta": theta}


def run_core(p, **kw):
    return _core.forward_backward(p["C"], p["seq_range"], p["log_start"], p["log_trans"], return_resp=True, **kw)


def brute_all(p):
    """Brute-force summaries summed over sequences."""
    K = p["C"].shape[1]
    tot = {"N": np.zeros(K), "start_count": np.zeros(K), "trans_count": np.zeros((K, K)), "h_start": np.zeros(K), "h_trans": np.zeros((K, K))}
    log_z, resp, ent, paths, scores = [], np.zeros_like(p["C"]), 0.0, [], []
    sr = p["seq_range"]
    for a, b in zip(sr[:-1], sr[1:]):
        bf = ref.brute_force(p["C"][a:b], p["log_start"], p["log_trans"])
        for k in tot:
            tot[k] = tot[k] + bf[k]
        log_z.append(bf["log_z"])
        resp[a:b] = bf["resp"]
        ent += bf["entropy"]
        paths.append(bf["map_path"])
        scores.append(bf["map_score"])
    tot.update(log_z=np.array(log_z), resp=resp, entropy=ent, map_path=np.concatenate(paths), map_score=np.array(scores))
    return tot


# ------------------------------------------------------------------------------------------------
# forward-backward


@SETTINGS
@given(problems(), st.booleans())
def test_forward_backward_equals_brute_force(p, log_space):
    """T-FB1 / T-FB4: exact enumeration of all paths, scaled and log-space recursions."""
    out = run_core(p, log_space=log_space)
    bf = brute_all(p)
    close(out["log_z"], bf["log_z"], atol=0.0, rtol=RTOL_LOG)
    assert abs(out["log_z_sum"] - bf["log_z"].sum()) <= RTOL_LOG * max(1.0, np.abs(bf["log_z"]).sum())
    close(out["resp"], bf["resp"])
    for k in ("N", "start_count", "trans_count", "h_start", "h_trans"):
        close(out[k], bf[k], atol=1e-9, rtol=1e-9)
    # the path entropy splits into the start and transition tables
    h = out["h_start"].sum() + out["h_trans"].sum()
    assert abs(h - bf["entropy"]) <= 1e-9 * max(1.0, bf["entropy"])
    # the numpy reference recursion agrees too
    r = ref.forward_backward(p["C"], p["seq_range"], p["log_start"], p["log_trans"])
    close(r["log_z"], bf["log_z"], atol=0.0, rtol=RTOL_LOG)
    close(r["trans_count"], bf["trans_count"], atol=1e-9, rtol=1e-9)
    assert np.all(np.isfinite(out["resp"]))


@SETTINGS
@given(problems())
def test_consistency_and_sanity_relations(p):
    """T-FB2 and the §2.9 sanity relations between N, M0 and M."""
    out = run_core(p)
    sr = p["seq_range"]
    lens = np.diff(sr)
    R = out["resp"]
    close(R.sum(axis=1), np.ones(len(R)))
    assert np.all(R >= 0.0) and np.all(R <= 1.0 + 1e-12)
    assert abs(out["start_count"].sum() - len(lens)) <= 1e-10 * len(lens)
    assert abs(out["trans_count"].sum() - (lens - 1).sum()) <= 1e-9 * max(1, lens.sum())
    close(out["N"], out["start_count"] + out["trans_count"].sum(axis=0), atol=1e-9)
    last = R[sr[1:] - 1].sum(axis=0)
    close(out["N"], out["trans_count"].sum(axis=1) + last, atol=1e-9)
    close(out["N"], R.sum(axis=0), atol=1e-9)
    close(out["start_count"], R[sr[:-1]].sum(axis=0), atol=1e-12)
    assert np.all(out["h_trans"] >= -1e-12) and np.all(out["h_start"] >= 0.0)


@SETTINGS
@given(problems(allow_extreme=False), st.integers(0, 2**32 - 1))
def test_shift_invariance(p, seed):
    """T-FB3: adding c_t to row t of C shifts log Z by sum c_t, nothing else changes."""
    shift = np.random.default_rng(seed).normal(0.0, 50.0, size=len(p["C"]))
    a = run_core(p)
    b = _core.forward_backward(p["C"] + shift[:, None], p["seq_range"], p["log_start"], p["log_trans"], return_resp=True)
    sr = p["seq_range"]
    per_seq = np.array([shift[i:j].sum() for i, j in zip(sr[:-1], sr[1:])])
    close(b["log_z"], a["log_z"] + per_seq, atol=1e-9, rtol=1e-12)
    for k in ("resp", "trans_count", "h_trans", "h_start"):
        close(b[k], a[k], atol=1e-9)


@SETTINGS
@given(problems())
def test_variational_identity(p):
    """T-FB5: H(q) = log Z - (sum r C + sum M0 P0 + sum M P)."""
    out = run_core(p)
    energy = np.sum(out["resp"] * p["C"]) + out["start_count"] @ p["log_start"] + np.sum(out["trans_count"] * p["log_trans"])
    h = out["h_start"].sum() + out["h_trans"].sum()
    scale = max(1.0, abs(out["log_z_sum"]), np.sum(np.abs(out["resp"] * p["C"])))
    assert abs(h - (out["log_z_sum"] - energy)) <= 1e-9 * scale


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_K=8, max_T=40, max_D=5), st.booleans())
def test_core_equals_reference_on_larger_shapes(p, log_space):
    """Rust vs the log-space numpy reference at rtol 1e-10 on shapes too large to enumerate."""
    out = run_core(p, log_space=log_space)
    r = ref.forward_backward(p["C"], p["seq_range"], p["log_start"], p["log_trans"])
    close(out["log_z"], r["log_z"], atol=0.0, rtol=1e-10)
    close(out["resp"], r["resp"])
    for k in ("N", "start_count", "trans_count", "h_start", "h_trans"):
        close(out[k], r[k], atol=1e-10, rtol=1e-10)


@SETTINGS
@given(problems(max_T=12, max_D=6), st.integers(0, 100))
def test_summaries_are_additive_over_sequence_splits(p, cut):
    """summarize(A ∪ B) == summarize(A) + summarize(B) for a split between sequences."""
    sr = p["seq_range"]
    D = len(sr) - 1
    if D < 2:
        return
    i = 1 + cut % (D - 1)
    whole = run_core(p)
    parts = []
    for lo, hi in ((0, i), (i, D)):
        sub = sr[lo : hi + 1]
        q = dict(p, C=p["C"][sub[0] : sub[-1]], seq_range=(sub - sub[0]).astype(np.int64))
        parts.append(run_core(q))
    for k in ("N", "start_count", "trans_count", "h_start", "h_trans"):
        close(parts[0][k] + parts[1][k], whole[k], atol=1e-12, rtol=1e-12)
    close(np.concatenate([parts[0]["log_z"], parts[1]["log_z"]]), whole["log_z"], atol=0.0, rtol=0.0)


def test_thread_count_bit_identity():
    """T-PAR: identical bits for 1, 2 and 3 threads (with more sequences than leaves)."""
    rng = np.random.default_rng(7)
    lens = rng.integers(1, 60, size=300)
    sr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    K = 6
    C = rng.normal(0.0, 3.0, size=(int(sr[-1]), K))
    P = ref.hmm_e_log_pi(rng.gamma(0.5, 1.0, size=(K + 1, K + 1)) + 1e-3)
    outs = [
        _core.forward_backward(C, sr, P[0, :K].copy(), np.ascontiguousarray(P[1:, :K]), return_resp=True, n_threads=n)
        for n in (1, 2, 3)
    ]
    for o in outs[1:]:
        for k, v in outs[0].items():
            assert np.array_equal(np.asarray(v), np.asarray(o[k])), k
    vit = [_core.viterbi(C, sr, P[0, :K].copy(), np.ascontiguousarray(P[1:, :K]), n_threads=n) for n in (1, 2)]
    assert np.array_equal(vit[0][0], vit[1][0]) and np.array_equal(vit[0][1], vit[1][1])


def test_underflowing_transitions_use_log_space():
    """T-FB4 on a chain whose only plausible path needs transitions that underflow exp()."""
    C = np.array([[0.0, -1.0], [-5000.0, 0.0], [-5000.0, 0.0]])
    log_start = np.array([0.0, -800.0])
    log_trans = np.array([[-0.1, -800.0], [-800.0, -0.1]])
    sr = np.array([0, 3], dtype=np.int64)
    out = _core.forward_backward(C, sr, log_start, log_trans, return_resp=True)
    assert out["n_log_space"] == 1
    bf = ref.brute_force(C, log_start, log_trans)
    close(out["log_z"], [bf["log_z"]], atol=0.0, rtol=1e-12)
    close(out["resp"], bf["resp"])
    close(out["trans_count"], bf["trans_count"])


# ------------------------------------------------------------------------------------------------
# Viterbi


@SETTINGS
@given(problems(allow_extreme=False))
def test_viterbi_equals_brute_force(p):
    """T-VIT1 (argmax path and its score) and T-VIT2 (no worse than the marginal argmax path)."""
    states, score = _core.viterbi(p["C"], p["seq_range"], p["log_start"], p["log_trans"])
    bf = brute_all(p)
    assert np.array_equal(states, bf["map_path"])
    close(score, bf["map_score"], atol=0.0, rtol=1e-12)
    rs, rscore = ref.viterbi(p["C"], p["seq_range"], p["log_start"], p["log_trans"])
    assert np.array_equal(rs, states)
    close(rscore, score, atol=0.0, rtol=1e-12)
    out = run_core(p)
    sr = p["seq_range"]
    for d, (a, b) in enumerate(zip(sr[:-1], sr[1:])):
        zm = np.argmax(out["resp"][a:b], axis=1)
        assert score[d] >= ref.path_log_weight(zm, p["C"][a:b], p["log_start"], p["log_trans"]) - 1e-12 * abs(score[d])


# ------------------------------------------------------------------------------------------------
# allocation math


@st.composite
def alloc_cases(draw):
    K = draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kappa = draw(st.sampled_from([0.0, 0.5, 50.0]))
    hyper = {"alpha": float(rng.uniform(0.1, 3.0)), "start_alpha": float(rng.uniform(0.5, 15.0)), "kappa": kappa, "gamma": float(rng.uniform(0.5, 12.0))}
    start_count = rng.gamma(1.0, 2.0, size=K)
    trans_count = rng.gamma(0.7, 5.0, size=(K, K))
    u = rng.uniform(0.05, 0.95, size=K)
    omega = rng.uniform(1.0, 50.0, size=K)
    return {"K": K, "hyper": hyper, "start_count": start_count, "trans_count": trans_count, "u": u, "omega": omega, "rng": rng}


@SETTINGS
@given(alloc_cases())
def test_theta_e_log_pi_and_elbo_equal_reference(c):
    h = c["hyper"]
    th = _core.hmm_theta(c["start_count"], c["trans_count"], c["u"], **h)
    close(th, ref.hmm_theta(c["start_count"], c["trans_count"], c["u"], **h), atol=0.0, rtol=1e-13)
    P = _core.hmm_e_log_pi(th)
    close(P, ref.hmm_e_log_pi(th), atol=1e-12, rtol=1e-12)
    # evaluate at a theta that is NOT the optimum, so every slack term is exercised
    th2 = th * c["rng"].uniform(0.5, 2.0, size=th.shape)
    hs, ht = c["rng"].uniform(0, 1, c["K"]), c["rng"].uniform(0, 1, (c["K"], c["K"]))
    got = _core.hmm_elbo_alloc(c["start_count"], c["trans_count"], hs, ht, th2, c["u"], c["omega"], **h)
    want = ref.hmm_elbo_alloc(c["start_count"], c["trans_count"], hs, ht, th2, c["u"], c["omega"], **h)
    for k in want:
        assert abs(got[k] - want[k]) <= 1e-10 * max(1.0, abs(want[k])), k
    # finite HMM
    fh = {k: h[k] for k in ("alpha", "start_alpha", "kappa")}
    fth = _core.finite_hmm_theta(c["start_count"], c["trans_count"], **fh)
    close(fth, ref.finite_hmm_theta(c["start_count"], c["trans_count"], **fh), atol=0.0, rtol=1e-13)
    fth2 = fth * c["rng"].uniform(0.5, 2.0, size=fth.shape)
    got = _core.finite_hmm_elbo_alloc(c["start_count"], c["trans_count"], hs, ht, fth2, **fh)
    want = ref.finite_hmm_elbo_alloc(c["start_count"], c["trans_count"], hs, ht, fth2, **fh)
    for k in want:
        assert abs(got[k] - want[k]) <= 1e-10 * max(1.0, abs(want[k])), k


@SETTINGS
@given(alloc_cases())
def test_theta_update_is_the_maximiser(c):
    """T-THETA: the closed-form theta zeroes the gradient of the transition term (finite
    differences) and random positive perturbations decrease it; the same holds for the finite HMM."""
    h = c["hyper"]
    args = (c["start_count"], c["trans_count"])
    th = ref.hmm_theta(*args, c["u"], **h)

    def trans(t):
        return ref.hmm_trans_term(*args, t, c["u"], h["alpha"], h["start_alpha"], h["kappa"])

    base = trans(th)
    j, col = c["rng"].integers(0, c["K"] + 1, size=2)
    eps = 1e-6 * th[j, col]
    up, down = th.copy(), th.copy()
    up[j, col] += eps
    down[j, col] -= eps
    grad = (trans(up) - trans(down)) / (2 * eps)
    assert abs(grad) <= 1e-4 * max(1.0, abs(base) / th[j, col])
    for _ in range(3):
        pert = th * np.exp(c["rng"].normal(0.0, 0.3, size=th.shape))
        assert trans(pert) <= base + 1e-10 * abs(base)


@SETTINGS
@given(alloc_cases())
def test_stick_gradient_matches_finite_differences(c):
    """T-UGRAD: analytic gradient of f(u, omega) vs central differences of the reference f (both
    kappa branches); f equals L_trans + L_top up to a constant independent of (u, omega)."""
    h = c["hyper"]
    th = ref.hmm_theta(c["start_count"], c["trans_count"], c["u"], **h)
    P = ref.hmm_e_log_pi(th)
    f, gu, go = _core.hmm_top_objective(c["u"], c["omega"], P, **h)
    assert abs(f - ref.hmm_top_objective(c["u"], c["omega"], P, **h)) <= 1e-10 * max(1.0, abs(f))
    for k in range(c["K"]):
        e = np.zeros(c["K"])
        e[k] = 1.0
        du = 1e-6 * min(c["u"][k], 1 - c["u"][k])
        num_u = (ref.hmm_top_objective(c["u"] + du * e, c["omega"], P, **h) - ref.hmm_top_objective(c["u"] - du * e, c["omega"], P, **h)) / (2 * du)
        dw = 1e-6 * c["omega"][k]
        num_w = (ref.hmm_top_objective(c["u"], c["omega"] + dw * e, P, **h) - ref.hmm_top_objective(c["u"], c["omega"] - dw * e, P, **h)) / (2 * dw)
        assert abs(num_u - gu[k]) <= 1e-6 * max(1.0, abs(gu[k])) + 1e-7 * abs(f) / du * 1e-6
        assert abs(num_w - go[k]) <= 1e-6 * max(1.0, abs(go[k])) + 1e-7 * abs(f) / dw * 1e-6

    # f - (L_trans + L_top) does not depend on (u, omega) when theta is held fixed
    def full(u, om):
        trans = ref.hmm_trans_term(c["start_count"], c["trans_count"], th, u, h["alpha"], h["start_alpha"], h["kappa"])
        return trans + ref.hmm_top_surrogate(u, om, **h)

    u2 = c["rng"].uniform(0.05, 0.95, size=c["K"])
    om2 = c["rng"].uniform(1.0, 50.0, size=c["K"])
    d1 = f - full(c["u"], c["omega"])
    d2 = ref.hmm_top_objective(u2, om2, P, **h) - full(u2, om2)
    assert abs(d1 - d2) <= 1e-9 * max(1.0, abs(f), abs(d1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alloc_cases(), st.sampled_from(["optimize", "heuristic"]))
def test_stick_optimiser_and_global_step_never_decrease(c, omega_update):
    """T-UOPT: f(out) >= f(start); heuristic omega = a1 + a0; the complete allocation global step
    never decreases the allocation objective (T-MONO1 for the allocation part)."""
    h = c["hyper"]
    th = ref.hmm_theta(c["start_count"], c["trans_count"], c["u"], **h)
    P = ref.hmm_e_log_pi(th)
    u, om = _core.hmm_optimize_sticks(c["u"], c["omega"], P, **h, omega_update=omega_update)
    start_omega = c["omega"]
    if omega_update == "heuristic":
        a1, a0 = ref.top_coefs(c["K"], h["kappa"], h["gamma"])
        close(om, a1 + a0, atol=0.0, rtol=1e-15)
        start_omega = a1 + a0
    f0 = ref.hmm_top_objective(c["u"], start_omega, P, **h)
    f1 = ref.hmm_top_objective(u, om, P, **h)
    assert f1 >= f0 - 1e-10 * abs(f0)
    zero_h = (np.zeros(c["K"]), np.zeros((c["K"], c["K"])))
    before = ref.hmm_elbo_alloc(c["start_count"], c["trans_count"], *zero_h, th, c["u"], c["omega"], **h)["total"]
    g = _core.hmm_global_step(c["start_count"], c["trans_count"], c["u"], c["omega"], **h, n_iters=3, omega_update=omega_update)
    after = ref.hmm_elbo_alloc(c["start_count"], c["trans_count"], *zero_h, g["theta"], g["u"], g["omega"], **h)["total"]
    if omega_update == "optimize":
        assert after >= before - 1e-9 * abs(before)
    close(g["e_log_pi"], ref.hmm_e_log_pi(g["theta"]), atol=1e-12, rtol=1e-12)
    close(g["theta"], ref.hmm_theta(c["start_count"], c["trans_count"], g["u"], **h), atol=0.0, rtol=1e-13)


def _row_bounds(u, alpha, start_alpha, kappa):
    """Sum over rows of the per-row lower bounds of c_Dir (start row: K ln alpha_0 + sum ln beta;
    state rows: the sticky bound with the concavity step, or the plain bound when kappa = 0)."""
    beta = ref.stick_pi(u)
    K = len(u)
    total = K * np.log(start_alpha) + np.log(beta).sum()
    for j in range(K):
        if kappa > 0:
            lin = np.log(kappa) + (np.log(alpha + kappa) - np.log(kappa)) * beta[j]
            total += K * np.log(alpha) - np.log(alpha + kappa) + lin + np.log(beta).sum() - np.log(beta[j])
        else:
            total += K * np.log(alpha) + np.log(beta).sum()
    return total


def _closed_form_counting(u, alpha, start_alpha, kappa, gamma):
    """The coefficient form of the same sum: (a1 - 1) ln u_k + (a0 - gamma) ln(1 - u_k) + constants."""
    K = len(u)
    a1, a0 = ref.top_coefs(K, kappa, gamma)
    val = K * np.log(start_alpha) + K * K * np.log(alpha) + np.sum((a1 - 1) * np.log(u) + (a0 - gamma) * np.log1p(-u))
    if kappa > 0:
        d = np.log(alpha + kappa) - np.log(kappa)
        val += K * (np.log(kappa) - np.log(alpha + kappa)) + d * ref.stick_pi(u)[:K].sum()
    return val


def _c_dir_rows(u, alpha, start_alpha, kappa):
    beta = ref.stick_pi(u)
    K = len(u)
    total = gammaln(start_alpha) - gammaln(start_alpha * beta).sum()
    for j in range(K):
        v = alpha * beta.copy()
        v[j] += kappa
        total += gammaln(v.sum()) - gammaln(v).sum()
    return total


@SETTINGS
@given(alloc_cases())
def test_top_level_bounds(c):
    """T-BOUND (i), (ii) and (iv): every row bound holds; the coefficient form (with the start
    row's +1 in the sticky a0) equals the sum of the row bounds exactly."""
    h = c["hyper"]
    u = c["u"]
    assert _c_dir_rows(u, h["alpha"], h["start_alpha"], h["kappa"]) >= _row_bounds(u, h["alpha"], h["start_alpha"], h["kappa"]) - 1e-9
    a = float(c["rng"].uniform(1e-2, 1e2))
    b = c["rng"].dirichlet(np.ones(c["K"] + 1))
    assert gammaln(a) - gammaln(a * b).sum() >= c["K"] * np.log(a) + np.log(b).sum() - 1e-9
    rows = _row_bounds(u, h["alpha"], h["start_alpha"], h["kappa"])
    closed = _closed_form_counting(u, h["alpha"], h["start_alpha"], h["kappa"], h["gamma"])
    assert abs(rows - closed) <= 1e-10 * max(1.0, abs(rows))


@pytest.mark.parametrize("kappa", [0.0, 0.5, 50.0])
def test_top_level_surrogate_below_monte_carlo(kappa):
    """T-BOUND (iii): E_q[sum_j c_Dir(alpha_j beta(u) + kappa delta_j)] (1e5 draws) >= the
    closed-form surrogate part of L_top, within 4 standard errors."""
    rng = np.random.default_rng(3)
    K, alpha, start_alpha, gamma = 3, 0.8, 6.0, 4.0
    u = np.array([0.4, 0.3, 0.5])
    omega = np.array([12.0, 30.0, 8.0])
    draws = rng.beta(u * omega, (1 - u) * omega, size=(100_000, K))
    vals = np.array([_c_dir_rows(d, alpha, start_alpha, kappa) for d in draws[:20_000]])
    mc, se = vals.mean(), vals.std() / np.sqrt(len(vals))
    a1, a0 = ref.top_coefs(K, kappa, gamma)
    e_log_u = digamma(u * omega) - digamma(omega)
    e_log_1mu = digamma((1 - u) * omega) - digamma(omega)
    surrogate = K * np.log(start_alpha) + K * K * np.log(alpha) + np.sum((a1 - 1) * e_log_u + (a0 - gamma) * e_log_1mu)
    if kappa > 0:
        d = np.log(alpha + kappa) - np.log(kappa)
        surrogate += K * (np.log(kappa) - np.log(alpha + kappa)) + d * ref.stick_pi(u)[:K].sum()
    assert mc >= surrogate - 4 * se
    # and the surrogate is the expectation of the row-bound sum (unbiased check of the counting)
    rb = np.array([_row_bounds(d, alpha, start_alpha, kappa) for d in draws])
    assert abs(rb.mean() - surrogate) <= 4 * rb.std() / np.sqrt(len(rb))


@pytest.mark.parametrize("kappa", [0.0, 50.0])
def test_empty_state_lowers_the_allocation_objective(kappa):
    """T-EMPTY (allocation part): appending a state with zero counts and re-running the global step
    lowers the allocation objective (the surrogate penalises unused states)."""
    h = {"alpha": 0.5, "start_alpha": 10.0, "kappa": kappa, "gamma": 10.0}
    m0 = np.array([3.0, 2.0])
    m = np.array([[400.0, 3.0], [2.0, 300.0]])
    vals = []
    for k in (2, 3):
        m0k = np.zeros(k)
        mk = np.zeros((k, k))
        m0k[:2], mk[:2, :2] = m0, m
        u = _core.hmm_init_u(k)
        g = _core.hmm_global_step(m0k, mk, u, np.full(k, 1 + h["gamma"]), **h, n_iters=10)
        vals.append(_core.hmm_elbo_alloc(m0k, mk, np.zeros(k), np.zeros((k, k)), g["theta"], g["u"], g["omega"], **h)["total"])
    assert vals[1] < vals[0]


@SETTINGS
@given(st.integers(2, 12), st.sampled_from([0.0, 5.0, 50.0]), st.booleans(), st.integers(0, 2**32 - 1))
def test_profiled_global_step_reaches_the_joint_optimum(K, kappa, heuristic, seed):
    """T-UOPT: the sticks with theta profiled out reach the optimum that the alternating rounds
    approach only linearly (here 3,000 rounds), from the fixed cold start; a dozen rounds alone
    fall short on sticky chains. The profile's gradient is the top objective's at
    E[ln pi](theta(u)) (envelope theorem), checked by finite differences."""
    rng = np.random.default_rng(seed)
    h = {"alpha": float(rng.uniform(0.2, 2.0)), "start_alpha": float(rng.uniform(0.5, 5.0)), "kappa": kappa, "gamma": float(rng.uniform(1.0, 10.0))}
    m0 = rng.uniform(0, 5, K)
    m = rng.gamma(0.3, 50.0, (K, K)) + np.diag(rng.uniform(0, 400, K))
    z1, z2 = np.zeros(K), np.zeros((K, K))
    u0, w0 = _core.hmm_init_u(K), np.full(K, 1.0 + h["gamma"])
    upd = "heuristic" if heuristic else "optimize"

    def value(g):
        return _core.hmm_elbo_alloc(m0, m, z1, z2, g["theta"], g["u"], g["omega"], **h)["total"]

    prof = value(_core.hmm_global_step(m0, m, u0, w0, **h, n_iters=2, profile=True, omega_update=upd))
    slow = value(_core.hmm_global_step(m0, m, u0, w0, **h, n_iters=3000, omega_update=upd))
    assert prof >= slow - 1e-10 * abs(slow), (prof, slow)
    # the profile's gradient at a random point: finite differences of L(theta(u), u, omega)
    u, w = rng.uniform(0.05, 0.95, K), rng.uniform(0.5, 20.0, K)

    def F(u, w):
        return _core.hmm_elbo_alloc(m0, m, z1, z2, _core.hmm_theta(m0, m, u, **h), u, w, **h)["total"]

    _, gu, gw = _core.hmm_top_objective(u, w, _core.hmm_e_log_pi(_core.hmm_theta(m0, m, u, **h)), **h)
    i, e = int(rng.integers(K)), 1e-6
    d = np.zeros(K)
    d[i] = e * u[i] * (1 - u[i])
    fd = (F(u + d, w) - F(u - d, w)) / (2 * d[i])
    assert abs(fd - gu[i]) <= 1e-5 * max(1.0, abs(gu[i])), (fd, gu[i])
    d = np.zeros(K)
    d[i] = e * w[i]
    fd = (F(u, w + d) - F(u, w - d)) / (2 * d[i])
    assert abs(fd - gw[i]) <= 1e-5 * max(1.0, abs(gw[i])), (fd, gw[i])


def test_a_dozen_alternating_rounds_fall_short_where_the_profile_does_not():
    """The case behind the profiled step: K = 20, sticky counts; 12 alternating rounds (the
    former global step) end more than 0.1 nat below the optimum."""
    rng = np.random.default_rng(4)
    K = 20
    h = {"alpha": 1.0, "start_alpha": 1.0, "kappa": 50.0, "gamma": 6.0}
    m0 = rng.uniform(0, 3, K)
    m = rng.gamma(0.2, 20.0, (K, K)) + np.diag(rng.uniform(50, 500, K))
    z1, z2 = np.zeros(K), np.zeros((K, K))
    u0, w0 = _core.hmm_init_u(K), np.full(K, 1.0 + h["gamma"])
    vals = {}
    for name, kw in {"dozen": dict(n_iters=12), "profile": dict(n_iters=2, profile=True)}.items():
        g = _core.hmm_global_step(m0, m, u0, w0, **h, **kw)
        vals[name] = _core.hmm_elbo_alloc(m0, m, z1, z2, g["theta"], g["u"], g["omega"], **h)["total"]
    assert vals["profile"] > vals["dozen"] + 0.1, vals


# ------------------------------------------------------------------------------------------------
# the objective from summaries vs term by term


@SETTINGS
@given(problems(max_K=3, max_T=5), st.sampled_from([0.0, 0.5, 50.0]), st.integers(0, 2**32 - 1))
def test_summary_elbo_equals_raw_elbo_and_identity(p, kappa, seed):
    """T-ELBO1: after the local step, the objective from summaries equals the raw term-by-term
    objective (brute-force local parameters) and the §2.10 identity sum log Z + ...; C stands for
    the data term."""
    rng = np.random.default_rng(seed)
    K = p["C"].shape[1]
    h = {"alpha": float(rng.uniform(0.2, 2.0)), "start_alpha": float(rng.uniform(1.0, 10.0)), "kappa": kappa, "gamma": float(rng.uniform(1.0, 10.0))}
    u = rng.uniform(0.05, 0.95, size=K)
    omega = rng.uniform(1.0, 50.0, size=K)
    theta = ref.hmm_theta(rng.gamma(1.0, 2.0, K), rng.gamma(1.0, 2.0, (K, K)), u, **h)
    P = ref.hmm_e_log_pi(theta)
    q = dict(p, log_start=P[0, :K].copy(), log_trans=np.ascontiguousarray(P[1:, :K]))
    out = run_core(q)
    alloc = _core.hmm_elbo_alloc(out["start_count"], out["trans_count"], out["h_start"], out["h_trans"], theta, u, omega, **h)
    summary = float(np.sum(out["resp"] * q["C"])) + alloc["total"]
    sr = q["seq_range"]
    pairs = [ref.brute_force(q["C"][a:b], q["log_start"], q["log_trans"])["pair"] for a, b in zip(sr[:-1], sr[1:])]
    bf = brute_all(q)
    raw = ref.raw_elbo_hmm(q["C"], bf["resp"], pairs, sr, theta, u, omega, **h)
    prior = ref.hmm_prior_table(u, h["alpha"], h["start_alpha"], h["kappa"])
    identity = (
        out["log_z_sum"]
        + sum(-(gammaln(theta[j].sum()) - gammaln(theta[j]).sum()) for j in range(K + 1))
        + float(np.sum((prior - theta) * P))
        + ref.hmm_top_surrogate(u, omega, **h)
    )
    scale = max(1.0, abs(raw), float(np.sum(np.abs(out["resp"] * q["C"]))))
    assert abs(summary - raw) <= 1e-9 * scale
    assert abs(summary - identity) <= 1e-9 * scale


def test_hmm_local_step_with_an_observation_model():
    """The fused local step: C from the model's E[log p], forward-backward, then the model's own
    summaries of the marginals (equal to the reference summarize of the reference marginals)."""
    rng = np.random.default_rng(11)
    D, K = 2, 3
    prior = {"nu": D + 3.0, "kappa": 0.5, "m": np.zeros(D), "B": np.eye(D) * 2.0}
    X = rng.normal(0.0, 2.0, size=(40, D))
    sr = np.array([0, 13, 14, 40], dtype=np.int64)
    R_post = rng.dirichlet(np.ones(K), size=40)
    obs = _core.ObsModel("gauss", prior)
    n_post, s_post = obs.summarize(X, R_post)
    P = ref.hmm_e_log_pi(rng.gamma(1.0, 2.0, size=(K + 1, K + 1)))
    p0, pt = P[0, :K].copy(), np.ascontiguousarray(P[1:, :K])
    out = _core.hmm_local_step(obs, X, n_post, s_post, sr, p0, pt, return_resp=True)
    C = ref_e_log_lik("gauss", prior, n_post, s_post, X)
    r = ref.forward_backward(C, sr, p0, pt)
    close(out["resp"], r["resp"])
    close(out["log_z"], r["log_z"], atol=0.0, rtol=1e-10)
    S = ref_summarize("gauss", X, r["resp"])
    close(out["S"], S[1], atol=1e-9, rtol=1e-10)
    close(out["trans_count"], r["trans_count"], atol=1e-10)


# ------------------------------------------------------------------------------------------------
# bad input


def test_bad_input_names_the_argument():
    C = np.zeros((5, 2))
    p0 = np.zeros(2)
    P = np.zeros((2, 2))
    for sr, word in (([1, 5], "seq_range"), ([0, 3, 3, 5], "seq_range"), ([0, 4], "seq_range"), ([0], "seq_range")):
        with pytest.raises(ParameterError, match=word):
            _core.forward_backward(C, np.array(sr, dtype=np.int64), p0, P)
        with pytest.raises(ParameterError, match=word):
            _core.viterbi(C, np.array(sr, dtype=np.int64), p0, P)
    sr = np.array([0, 5], dtype=np.int64)
    with pytest.raises(ShapeError, match="log_trans"):
        _core.forward_backward(C, sr, p0, np.zeros((2, 3)))
    with pytest.raises(ShapeError, match="log_start"):
        _core.forward_backward(C, sr, np.zeros(3), P)
    bad = C.copy()
    bad[2, 1] = np.nan
    with pytest.raises(NonFiniteError, match="log_lik"):
        _core.forward_backward(bad, sr, p0, P)
    with pytest.raises(NonFiniteError, match="log_trans"):
        _core.viterbi(C, sr, p0, np.full((2, 2), -np.inf))
    with pytest.raises(ParameterError, match="kappa"):
        _core.hmm_global_step(np.ones(2), np.ones((2, 2)), np.full(2, 0.5), np.ones(2), alpha=0.5, start_alpha=1.0, kappa=-1.0, gamma=1.0)
    with pytest.raises(ParameterError, match="omega_update"):
        _core.hmm_global_step(np.ones(2), np.ones((2, 2)), np.full(2, 0.5), np.ones(2), alpha=0.5, start_alpha=1.0, kappa=0.0, gamma=1.0, omega_update="x")


@SETTINGS
@given(problems(max_K=4, max_T=6), st.integers(0, 2**32 - 1), st.booleans())
def test_merge_tables_equal_explicitly_merged_chains(p, seed, log_space):
    """T-MERGE1: the tracked merge tables assemble into exactly the entropy tables of the explicitly
    merged pairwise marginals; per-sequence counts add up to N."""
    K = p["C"].shape[1]
    if K < 2:
        return
    rng = np.random.default_rng(seed)
    pairs = sorted({tuple(sorted(rng.choice(K, size=2, replace=False).tolist())) for _ in range(3)})
    out = run_core(p, log_space=log_space, merge_pairs=pairs, return_seq_counts=True)
    close(out["seq_counts"].sum(axis=0), out["N"], atol=1e-12)
    sr = p["seq_range"]
    close(out["seq_counts"], np.array([out["resp"][a:b].sum(axis=0) for a, b in zip(sr[:-1], sr[1:])]), atol=1e-12)
    r = ref.forward_backward(p["C"], sr, p["log_start"], p["log_trans"])
    for q, (i, j) in enumerate(pairs):
        want_start, want = ref.merge_pair_tables(r["resp"], r["pair"], sr, i, j)
        keep = [k for k in range(K) if k != j]
        got = out["h_trans"].copy()
        got[i, :] = out["merge_h_row"][q]
        got[:, i] = out["merge_h_col"][q]
        got[i, i] = out["merge_h_self"][q]
        got = got[np.ix_(keep, keep)]
        close(got, want, atol=1e-9, rtol=1e-9)
        got_start = out["h_start"].copy()
        got_start[i] = out["merge_h_start"][q]
        close(got_start[keep], want_start, atol=1e-10, rtol=1e-10)
        # (no "entropy never increases" check: the Markov chain built from merged pairwise marginals
        # is the maximum-entropy chain with those marginals and can exceed the unmerged entropy)
    with pytest.raises(ParameterError, match="merge_pairs"):
        run_core(p, merge_pairs=[(1, 1)])
