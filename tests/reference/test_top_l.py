"""L-sparse (top-L) responsibilities of the fused local step (issue 5; spec 04 §1, §3, §5).

The Rust local step with ``top_l`` is checked against the numpy reference
(``_reference.local.top_l_local_step`` / ``top_l_proposal_summaries``) and against the dense step:
top_l >= K is bit-identical to dense; top_l = 1 is a hard assignment; sparse rows are on the
simplex with at most L non-zeros that are the L largest log weights; sparse summaries equal dense
summaries of the densified responsibilities; at fixed global parameters the sparse objective is
below the dense one by exactly -Σ_n log m_n (m_n = dense mass kept by row n). Spec 04 §5
properties: sparse rows are the renormalised restriction of the dense rows (same ratios inside
the kept set), their total-variation distance to the dense rows is 1 - m_n and their KL is
-log m_n, m_n and the objective grow with L, no other L-sparse rows score higher, and permuting
the clusters permutes the outputs.
"""

import warnings

import bnpcore._reference as ref
import numpy as np
import pytest
from _helpers import KINDS, close, dense_resp, fit_quietly
from bnpcore import DPMixture, FiniteMixture, _core
from bnpcore._reference.local import top_l_local_step, top_l_proposal_summaries, top_l_resp
from bnpcore.exceptions import ConvergenceWarning, NotFittedError, ParameterError
from bnpcore.obs import default_prior
from hypothesis import given, settings
from hypothesis import strategies as st

PAD = np.iinfo(np.uint32).max
SETTINGS = settings(max_examples=15, deadline=None)


def make_data(kind, n, d, rng):
    if kind == "mult":
        return rng.poisson(2.0, (n, d)).astype(float)
    if kind == "bern":
        return (rng.random((n, d)) < 0.3).astype(float)
    return rng.standard_normal((n, d)) * 2.0 + 1.5


def problem(kind, n, d, K, seed, alloc="dp"):
    """Data, prior, Rust model and random global summaries (N_post, S_post) with E[ln π]."""
    rng = np.random.default_rng(seed)
    X = make_data(kind, n, d, rng)
    prior = default_prior(kind, X)
    obs = _core.ObsModel(kind, prior)
    R0 = rng.dirichlet(np.full(K, 0.3), size=n)
    N, S = ref.summarize(kind, X, R0)
    scale = rng.uniform(0.5, 3.0)
    N, S = N * scale, S * scale
    elp = ref.e_log_pi(alloc, N, 1.0)
    return X, prior, obs, N, S, elp


def rtol_for(prior, base=1e-9):
    """Relative tolerance for quantities computed along two different floating-point routes:
    ``base``, or 64 ε κ(B̄) when the prior scale matrix is ill-conditioned (a few rows in
    several dimensions give data-scaled priors with κ ≈ 1e6, whose round-off is amplified by κ)."""
    if "B" in prior:
        return max(base, 64 * np.finfo(float).eps * np.linalg.cond(np.atleast_2d(prior["B"])))
    return base


def densify(out, K):
    """Dense rows from the value/index pairs (numpy only, not the production decoder)."""
    return dense_resp(out, K)


def weights_matrix(kind, prior, X, N, S, elp):
    """W_nk = E log F(x_n | phi_k) + E ln pi_k by the numpy reference (not the core)."""
    return ref.e_log_lik(kind, prior, N, S, X) + elp[None, :]


def reference_dense(kind, prior, X, N, S):
    """The dense responsibilities by the numpy reference (problem() uses alloc dp, gamma 1)."""
    return ref.local_step(kind, prior, "dp", 1.0, N, S, X)


CASES = st.tuples(
    st.sampled_from(KINDS),
    st.integers(1, 300),  # n
    st.integers(1, 4),  # d
    st.integers(1, 9),  # K
    st.integers(0, 2**31 - 1),  # seed
)


# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(CASES, st.integers(0, 3))
def test_top_l_at_least_k_is_bit_identical_to_dense(case, extra):
    kind, n, d, K, seed = case
    X, _prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    kw = dict(merge_pairs=[(0, K - 1)] if K > 1 else [], cooccur_col=0, collect_cols=[K - 1])
    dense = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, **kw)
    sparse = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=K + extra, **kw)
    for key in ("N", "S", "H", "pair_H", "cooccur", "cols"):
        assert np.array_equal(dense[key], sparse[key]), key
    assert dense["lse_sum"] == sparse["lse_sum"]
    assert sparse["resp_idx"].dtype == np.uint32 and sparse["resp_idx"].shape == (n, K)
    assert np.array_equal(sparse["resp_val"], dense["resp"])
    assert np.array_equal(densify(sparse, K), dense["resp"])


@SETTINGS
@given(CASES)
def test_top_l_one_is_a_hard_assignment(case):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=1)
    R = densify(out, K)
    assert np.array_equal(R.sum(axis=1), np.ones(n))
    assert set(np.unique(R)) <= {0.0, 1.0}
    W = weights_matrix(kind, prior, X, N, S, elp)
    chosen = W[np.arange(n), out["resp_idx"][:, 0].astype(np.intp)]
    assert np.all(chosen >= W.max(axis=1) - 1e-9 * np.maximum(1, np.abs(W).max(axis=1)))
    assert np.array_equal(out["H"], np.zeros(K))
    assert close(out["N"], np.bincount(out["resp_idx"][:, 0].astype(np.intp), minlength=K))


@SETTINGS
@given(CASES, st.integers(1, 9))
def test_sparse_rows_are_top_l_and_on_the_simplex(case, L):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L)
    idx, val = out["resp_idx"], out["resp_val"]
    assert idx.shape == val.shape == (n, min(L, K))
    W = weights_matrix(kind, prior, X, N, S, elp)
    for i in range(n):
        real = idx[i] != PAD
        m = int(real.sum())
        assert m <= L and np.all(real[:m]) and not np.any(real[m:])  # padding at the end
        assert np.all(val[i, m:] == 0.0)
        ks = idx[i, :m].astype(np.intp)
        assert np.all(np.diff(ks) > 0)  # distinct, ascending
        assert np.all(val[i, :m] >= 0) and abs(val[i, :m].sum() - 1.0) <= 1e-12
        others = np.setdiff1d(np.arange(K), ks)
        if others.size:
            tol = 1e-9 * max(1.0, np.abs(W[i]).max())
            assert W[i, ks].min() >= W[i, others].max() - tol
    # the same rows as the numpy reference (ties have probability zero here)
    R_ref = top_l_local_step(kind, prior, "dp", 1.0, N, S, X, L)
    assert close(densify(out, K), R_ref, 1e-9)


@SETTINGS
@given(CASES, st.integers(1, 9), st.booleans())
def test_sparse_summaries_equal_dense_summaries_of_the_densified_rows(case, L, weighted):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    rng = np.random.default_rng(seed + 1)
    w = rng.uniform(0.0, 2.0, n) if weighted else None
    pairs = [(a, b) for a in range(K) for b in range(a + 1, K)][:6]
    out = _core.local_step(
        obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L, weights=w, merge_pairs=pairs, cooccur_col=0, collect_cols=[K - 1]
    )
    R = densify(out, K)
    Rw = R if w is None else R * w[:, None]
    Nd, Sd = ref.summarize(kind, X, Rw)
    assert close(out["N"], Nd) and close(out["S"], Sd)
    Hd = ref.entropy(R) if w is None else (w[:, None] * np.where(R > 0, -R * np.log(np.where(R > 0, R, 1)), 0)).sum(0)
    assert close(out["H"], Hd)
    if w is None:
        assert close(out["pair_H"], ref.pair_entropy(R, pairs))
        assert close(out["cooccur"], R[:, 0] @ R)
        # and the reference's own sparse rows give the same summaries
        Nr, Sr = ref.summarize(kind, X, top_l_local_step(kind, prior, "dp", 1.0, N, S, X, L))
        assert close(out["N"], Nr, 1e-9) and close(out["S"], Sr, 1e-9)
    assert np.array_equal(out["cols"][:, 0], R[:, K - 1])
    # several collected columns (a birth's targets), in the order asked, from the same rows
    cols = [K - 1, 0, K // 2]
    out2 = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=L, weights=w, collect_cols=cols)
    assert out2["cols"].shape == (n, 3) and "col" not in out2
    assert np.array_equal(out2["cols"], R[:, cols])
    out3 = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, weights=w, collect_cols=cols, return_resp=True)
    assert np.array_equal(out3["cols"], out3["resp"][:, cols])


@SETTINGS
@given(CASES, st.integers(1, 9))
def test_sparse_objective_gap_at_fixed_globals_is_minus_sum_log_mass_kept(case, L):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    dense = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True)
    sparse = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L)
    R = densify(sparse, K)
    mass = (reference_dense(kind, prior, X, N, S) * (R > 0)).sum(axis=1)
    gap_expected = -np.log(mass).sum()

    def objective(out):
        # general-form ELBO at the fixed globals (N, S), up to terms that do not involve r:
        # Σ_k [Σ_n r_nk E log F(x_n|φ_k) + N_k E ln π_k] + Σ_k H_k (numpy reference)
        e_ll = ref.e_log_lik_sum_from_stats(kind, prior, N, S, out["N"], out["S"])
        return float(e_ll.sum() + out["N"] @ elp + out["H"].sum())

    f_dense, f_sparse = objective(dense), objective(sparse)
    scale = max(1.0, abs(f_dense)) * rtol_for(prior) / 1e-9
    # the per-row shortcut Σ_k r (W − ln r) = lse_n holds for both
    assert abs(f_dense - dense["lse_sum"]) <= 1e-9 * scale
    assert abs(f_sparse - sparse["lse_sum"]) <= 1e-9 * scale
    assert f_sparse <= f_dense + 1e-9 * scale
    assert abs((f_dense - f_sparse) - gap_expected) <= 1e-9 * scale
    assert abs((dense["lse_sum"] - sparse["lse_sum"]) - gap_expected) <= 1e-9 * scale


@SETTINGS
@given(CASES, st.integers(1, 5), st.integers(1, 3))
def test_sparse_restricted_steps_match_reference(case, L, n_fresh):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    rng = np.random.default_rng(seed + 2)
    # birth: the target's mass goes to fresh clusters built from a few rows
    Rf = rng.dirichlet(np.ones(n_fresh), size=n)
    fN, fS = ref.summarize(kind, X, Rf)
    fN, fS = fN + 0.5, fS + 0.5 * fS / np.maximum(fN[:, None], 1)
    f_elp = np.log(np.full(n_fresh, 1.0 / n_fresh))
    tgt = int(rng.integers(K))
    dest = sorted(set(rng.integers(0, K, size=2).tolist()) - {tgt}) or [(tgt + 1) % K]
    props = [{"src": [tgt], "fresh_N": fN, "fresh_S": fS, "fresh_e_log_pi": f_elp}]
    if K > 1:
        props.append({"src": [tgt], "dest_cols": dest})
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L, proposals=props)
    R = densify(out, K)
    W = weights_matrix(kind, prior, X, N, S, elp)
    Wf = ref.e_log_lik(kind, prior, fN, fS, X) + f_elp[None, :]
    want = [top_l_proposal_summaries(kind, X, R, Wf, [tgt], L)]
    if K > 1:
        want.append(top_l_proposal_summaries(kind, X, R, W[:, dest], [tgt], L, dest_cols=dest))
    for (gN, gS, gH), (rN, rS, rH) in zip(out["proposals"], want):
        assert close(gN, rN, 1e-9) and close(gS, rS, 1e-9) and close(gH, rH, 1e-9)
        # the redistributed mass equals the source mass
        assert abs(gN.sum() - R[:, tgt].sum()) <= 1e-9 * max(1.0, R[:, tgt].sum())


@SETTINGS
@given(CASES, st.integers(1, 5), st.booleans())
def test_sparse_carried_delete_matches_reference(case, L, fresh):
    """A delete with ``anchor``/``carry`` on L-sparse rows: only the rows holding the target are
    re-spread (slot budgets as without carry), the others keep their responsibilities on the
    absorbing set; the summaries are those of the whole absorbing columns (reference)."""
    kind, n, d, K, seed = case
    if K < 2:
        return
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    rng = np.random.default_rng(seed + 3)
    tgt = int(rng.integers(K))
    others = [k for k in range(K) if k != tgt]
    A = sorted(rng.choice(others, size=int(rng.integers(1, len(others) + 1)), replace=False).tolist())
    W = weights_matrix(kind, prior, X, N, S, elp)
    if fresh:
        fN, fS = N[A] * 1.2 + 0.5, S[A] * 1.2
        f_elp = np.log(np.full(len(A), 1.0 / len(A)))
        prop = {"src": [tgt] + A, "fresh_N": fN, "fresh_S": fS, "fresh_e_log_pi": f_elp}
        Wd, dest_cols = ref.e_log_lik(kind, prior, fN, fS, X) + f_elp[None, :], None
    else:
        prop = {"src": [tgt] + A, "dest_cols": A}
        Wd, dest_cols = W[:, A], A
    prop.update(anchor=[tgt], carry=A)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L, proposals=[prop])
    R = densify(out, K)
    rN, rS, rH = top_l_proposal_summaries(kind, X, R, Wd, [tgt] + A, L, dest_cols=dest_cols, carry=([tgt], A))
    gN, gS, gH = out["proposals"][0]
    assert close(gN, rN, 1e-9) and close(gS, rS, 1e-9) and close(gH, rH, 1e-9)
    # the absorbing set ends with its own mass and the target's
    assert abs(gN.sum() - R[:, [tgt] + A].sum()) <= 1e-9 * max(1.0, R.sum())


@SETTINGS
@given(CASES, st.integers(1, 5))
def test_cooccurring_pairs_are_those_of_the_sparse_rows(case, L):
    """``cooccur_pairs``: the pairs (a < b) that some row holds together among its selected
    clusters, sorted, without duplicates; dense rows (top_l None or >= K) return none."""
    kind, n, d, K, seed = case
    X, _prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L, cooccur_pairs=True)
    if L >= K:
        assert "co_pairs" not in out
        return
    idx = np.asarray(out["resp_idx"], dtype=np.int64)
    want = set()
    for row in idx:
        sel = sorted(int(i) for i in row if i != 2**32 - 1)
        want.update((a, b) for i, a in enumerate(sel) for b in sel[i + 1:])
    got = np.asarray(out["co_pairs"]).reshape(-1, 2)
    assert got.dtype == np.int64
    assert [tuple(p) for p in got.tolist()] == sorted(want)
    assert "co_pairs" not in _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=L)


@settings(max_examples=5, deadline=None)
@given(st.sampled_from(KINDS), st.integers(0, 2**31 - 1), st.integers(1, 4))
def test_sparse_step_is_bit_identical_for_any_thread_count(kind, seed, L):
    X, _prior, obs, N, S, elp = problem(kind, 3000, 3, 7, seed)
    a = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=L, merge_pairs=[(0, 1)], cooccur_pairs=True, n_threads=1)
    b = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=L, merge_pairs=[(0, 1)], cooccur_pairs=True, n_threads=2)
    for key in ("N", "S", "H", "pair_H") + (("co_pairs",) if L < 7 else ()):
        assert np.array_equal(a[key], b[key]), key
    assert a["lse_sum"] == b["lse_sum"]


def test_top_l_resp_reference_ties_and_padding():
    W = np.array([[1.0, 3.0, 3.0, 2.0], [-np.inf, 0.0, -np.inf, -np.inf]])
    R = top_l_resp(W, 2)
    assert np.count_nonzero(R[0]) == 2 and np.allclose(R[0, 1:3], 0.5)
    assert np.array_equal(R[1], [0.0, 1.0, 0.0, 0.0])


def test_invalid_top_l_is_a_clear_error():
    X, _prior, obs, N, S, elp = problem("gauss", 20, 2, 3, 0)
    with pytest.raises(ValueError, match="top_l"):
        _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=0)
    with pytest.raises(ParameterError, match="top_l"):
        DPMixture(top_l=0).fit(X)


# ---------------------------------------------------------------------------------------------
def _monotone(elbo):
    d = np.diff(np.asarray(elbo))
    return np.all(d >= -1e-9 * np.abs(np.asarray(elbo[1:])))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("algorithm", ["full", "memoized", "stochastic"])
def test_estimators_with_top_l_fit_and_never_decrease_the_elbo(kind, algorithm):
    rng = np.random.default_rng(3)
    X = make_data(kind, 600, 3, rng)
    for est, L, dense_laps in ((DPMixture, 2, 3), (FiniteMixture, 1, 0), (DPMixture, 1, 4)):
        # ELBODecreaseWarning stays an error (pyproject.toml); only running out of laps is expected
        m = fit_quietly(est(
            obs=kind, n_components=6, top_l=L, algorithm=algorithm, n_batches=3, max_laps=8, min_laps=8, tol=0.0,
            moves=(), random_state=0, dense_laps=dense_laps,
        ), X)
        elbo = m.history_["elbo"]
        assert len(elbo) == 8
        if algorithm != "stochastic":  # stochastic VI is not monotone
            # monotone within each family: over the dense laps (at least three), and from the end
            # of the first L-sparse lap on (that lap replaces dense memos by L-sparse ones)
            assert _monotone(elbo[:dense_laps]) and _monotone(elbo[dense_laps:])
            assert not dense_laps or not np.array_equal(elbo[1:dense_laps], elbo[: dense_laps - 1])  # it moved
        assert np.all(np.isfinite(m.history_["elbo"]))
        P = m.predict_proba(X[:50])
        assert P.shape == (50, len(m.summaries_.N))
        assert np.all((P > 0).sum(axis=1) <= L) and np.allclose(P.sum(axis=1), 1.0)


def test_estimator_top_l_at_least_k_equals_dense():
    X = make_data("gauss", 400, 2, np.random.default_rng(5))
    kw = dict(n_components=5, max_laps=5, moves=(), random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = DPMixture(**kw).fit(X)
        b = DPMixture(top_l=50, **kw).fit(X)
    assert np.array_equal(a.history_["elbo"], b.history_["elbo"])
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


@pytest.mark.parametrize("cls", [DPMixture, FiniteMixture])
def test_top_l_beyond_a_machine_integer_is_any_large_l(cls):
    """A top_l too large for a machine integer (2**64 and up) fits as any other top_l above
    the number of clusters, with the default moves, and the fitted model predicts alike."""
    from bnpcore.datasets import make_gaussian_mixture

    X, _ = make_gaussian_mixture(n_samples=600, n_features=2, n_components=4, random_state=2)
    kw = dict(n_components=None if cls is DPMixture else 4, algorithm="memoized", n_batches=2, max_laps=6, random_state=1)
    a = fit_quietly(cls(top_l=50, **kw), X)
    for huge in (2**64, 2**70):
        b = fit_quietly(cls(top_l=huge, **kw), X)
        assert np.array_equal(a.history_["elbo"], b.history_["elbo"])
        assert a.moves_log_ == b.moves_log_
        assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    assert cls is FiniteMixture or any(r["accepted"] for r in a.moves_log_)
    # top_l_mass takes such levels too (all the mass), alone and beside small ones
    assert np.array_equal(a.top_l_mass(X, 2**64), a.top_l_mass(X, 50))
    assert np.array_equal(a.top_l_mass(X, [1, 2**70]), a.top_l_mass(X, [1, 50]))


@pytest.mark.parametrize("moves", [("birth",), ("merge",), ("delete",), ("birth", "merge", "delete")])
@pytest.mark.parametrize("top_l", [1, 2])
@pytest.mark.parametrize("dense_laps", [0, 1])
def test_moves_with_top_l_never_decrease_the_elbo(moves, top_l, dense_laps):
    """Births/merges/deletes over L-sparse rows (spec 04 §3.2-§3.4): proposals stay in the
    "at most L entries" family, so memoized training with moves remains monotone; this includes
    the start from one cluster, where top_l >= K at first (births from K = 1 with L = 1 used to
    leave rows with more than L entries)."""
    from bnpcore.datasets import make_gaussian_mixture

    X, _ = make_gaussian_mixture(n_samples=1500, n_features=3, n_components=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = DPMixture(
            n_components=1 if "birth" in moves else 8, algorithm="memoized", n_batches=3, max_laps=8,
            top_l=top_l, moves=moves, random_state=0, dense_laps=dense_laps,
        ).fit(X)
    # monotone from the end of the first L-sparse lap on
    assert _monotone(m.history_["elbo"][dense_laps:])
    assert m.moves_log_  # proposals were evaluated
    if top_l > 1 or "birth" not in moves:
        # (with L = 1 from a single cluster, a birth's hard split loses to the one cluster here)
        assert any(r.get("accepted") for r in m.moves_log_)


# ---------------------------------------------------------------------------------------------
# top_l_mass: the share of the dense responsibilities each L keeps (choice of L; spec 04 §6.1)
@pytest.mark.parametrize("kind", KINDS)
def test_top_l_mass_matches_sorted_dense_responsibilities_and_the_objective_gap(kind):
    rng = np.random.default_rng(11)
    X = make_data(kind, 500, 3, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # fitted with top_l=2: top_l_mass must use the dense step regardless
        m = DPMixture(obs=kind, n_components=7, max_laps=3, moves=(), top_l=2, random_state=0).fit(X)
    K = m.summaries_.N.shape[0]
    levels = [1, 2, 3, K, K + 5]
    mass = m.top_l_mass(X, levels)
    # reference: the dense responsibilities, sorted row by row
    model = m._make_model(m.obs_model_)
    G = m.summaries_
    R = ref.local_step(kind, m.obs_model_.prior, "dp", m.gamma, G.N, G.S, X)  # numpy reference
    Rs = -np.sort(-R, axis=1)
    for j, L in enumerate(levels):
        assert np.allclose(mass[:, j], Rs[:, : min(L, K)].sum(axis=1), rtol=0, atol=1e-9)
    assert np.all(np.diff(mass, axis=1) >= -1e-15)  # more clusters keep more
    assert np.all(mass[:, 3] == 1.0) and np.all(mass[:, 4] == 1.0)
    assert np.all(mass > 0)
    # -Σ log m_n is the objective an L-sparse step gives up at these globals
    dense = model.local_step(X, G, top_l=None)
    for j, L in enumerate(levels[:3]):
        sparse = model.local_step(X, G, top_l=L)
        gap = dense["lse_sum"] - sparse["lse_sum"]
        assert abs(gap - (-np.log(mass[:, j]).sum())) <= 1e-8 * max(1.0, abs(dense["lse_sum"]))


def test_top_l_mass_chunks_rows_and_rejects_bad_levels():
    X = make_data("gauss", 300, 2, np.random.default_rng(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = DPMixture(n_components=4, max_laps=2, moves=(), random_state=0).fit(X)
    whole = m.top_l_mass(X, 2)
    assert whole.shape == (300, 1)
    # rows are processed independently: any split gives the same rows
    parts = np.vstack([m.top_l_mass(X[:7], [2]), m.top_l_mass(X[7:], [2])])
    assert np.array_equal(whole, parts)
    for bad in (0, -1, [1, 0], [], 1.5, [True]):
        with pytest.raises(ParameterError, match="top_l"):
            m.top_l_mass(X, bad)
    with pytest.raises(NotFittedError, match="not fitted yet; call fit first"):
        DPMixture().top_l_mass(X)


# ---------------------------------------------------------------------------------------------
# spec 04 §5 properties 4-6, 8, 9: the L-sparse rows against the dense rows of the same step
@SETTINGS
@given(CASES, st.integers(1, 9))
def test_sparse_rows_are_the_renormalised_restriction_of_the_dense_rows(case, L):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    dense = reference_dense(kind, prior, X, N, S)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L)
    R = densify(out, K)
    keep = R > 0
    mass = (dense * keep).sum(axis=1)
    # restriction identity r^(L) = r^dense|_T / m  (hence equal ratios inside T)
    rt = rtol_for(prior, 1e-10)
    assert np.allclose(R, np.where(keep, dense / mass[:, None], 0.0), rtol=rt, atol=1e-300)
    W = weights_matrix(kind, prior, X, N, S, elp)
    for i in range(min(n, 20)):
        ks = np.flatnonzero(keep[i])
        if ks.size > 1 and np.all(R[i, ks] > 1e-250):
            lr = np.log(R[i, ks])
            assert np.allclose(lr - lr[0], W[i, ks] - W[i, ks[0]], rtol=1e-9,
                               atol=10 * rt * max(1.0, np.abs(W[i]).max()))
    # total variation = 1 - m_n; KL(r^(L) || r^dense) = -log m_n
    assert np.allclose(0.5 * np.abs(R - dense).sum(axis=1), 1.0 - mass, rtol=0, atol=max(1e-12, rt))
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(keep, R * (np.log(R) - np.log(dense)), 0.0).sum(axis=1)
    finite = np.all(np.where(keep, dense > 1e-300, True), axis=1)
    assert np.allclose(kl[finite], -np.log(mass[finite]), rtol=10 * rt, atol=10 * rt)


@SETTINGS
@given(CASES)
def test_mass_kept_is_non_decreasing_in_l_and_one_at_k(case):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    dense = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True)
    R_ref = reference_dense(kind, prior, X, N, S)
    masses, lses = [], []
    for L in range(1, K + 1):
        out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L)
        masses.append((R_ref * (densify(out, K) > 0)).sum(axis=1))
        lses.append(out["lse_sum"])
    masses = np.array(masses)
    assert np.all(np.diff(masses, axis=0) >= -1e-12)
    assert np.allclose(masses[-1], 1.0, rtol=0, atol=1e-12)
    assert np.allclose(R_ref, dense["resp"], rtol=0, atol=1e-9)  # and the core's dense step is the reference's
    scale = max(1.0, abs(dense["lse_sum"])) * rtol_for(prior) / 1e-9
    assert np.all(np.diff(lses) >= -1e-9 * scale)  # the objective at fixed globals grows with L
    assert lses[-1] == dense["lse_sum"]


@SETTINGS
@given(CASES, st.integers(1, 9), st.integers(0, 2**31 - 1))
def test_sparse_rows_beat_any_other_l_sparse_responsibilities(case, L, seed2):
    """Optimality (spec 04 §5.8): at fixed globals, the row objective Σ_k r_k (W_k − ln r_k) of
    the returned row is at least that of random rows with at most L non-zeros."""
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L)
    W = weights_matrix(kind, prior, X, N, S, elp)
    R = densify(out, K)

    def row_objective(r):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(r > 0, r * (W - np.log(r)), 0.0).sum(axis=1)

    best = row_objective(R)
    rng = np.random.default_rng(seed2)
    m = min(L, K)
    for _ in range(5):
        Rr = np.zeros((n, K))
        for i in range(n):
            ks = rng.choice(K, size=rng.integers(1, m + 1), replace=False)
            Rr[i, ks] = rng.dirichlet(np.ones(ks.size))
        assert np.all(row_objective(Rr) <= best + 1e-9 * np.maximum(1.0, np.abs(W).max(axis=1)))


@SETTINGS
@given(CASES, st.integers(1, 9), st.integers(0, 2**31 - 1))
def test_permuting_clusters_permutes_the_sparse_step(case, L, seed2):
    kind, n, d, K, seed = case
    X, prior, obs, N, S, elp = problem(kind, n, d, K, seed)
    perm = np.random.default_rng(seed2).permutation(K)
    a = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L)
    b = _core.local_step(obs, _core.Alloc.fixed(elp[perm]), X, N[perm], np.ascontiguousarray(S[perm]), return_resp=True, top_l=L)
    # ties (probability zero here) would break by index and could differ
    rt = rtol_for(prior, 1e-10)
    assert close(densify(b, K), densify(a, K)[:, perm], rt)
    for key in ("N", "H"):
        assert close(b[key], a[key][perm], rt)
    assert close(b["S"], a["S"][perm], rt)
    assert abs(b["lse_sum"] - a["lse_sum"]) <= rt * max(1.0, abs(a["lse_sum"]))


# ---------------------------------------------------------------------------------------------
# dense_laps: the first laps after initialisation are dense, then L-sparse
@pytest.mark.parametrize("algorithm", ["full", "memoized"])
def test_first_laps_are_dense_then_l_sparse(algorithm):
    from bnpcore.datasets import make_gaussian_mixture

    X, _ = make_gaussian_mixture(n_samples=1200, n_features=3, n_components=6, random_state=1)
    kw = dict(n_components=10, algorithm=algorithm, n_batches=3, max_laps=6, min_laps=6, tol=0.0, moves=(),
              random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        dense = DPMixture(**kw).fit(X)
        zero = DPMixture(top_l=1, dense_laps=0, **kw).fit(X)
        runs = {d: DPMixture(top_l=1, dense_laps=d, **kw).fit(X) for d in (1, 2, 6)}
    e = dense.history_["elbo"]
    for d, m in runs.items():
        # the first d laps are the dense fit's laps, bit for bit
        assert np.array_equal(m.history_["elbo"][:d], e[:d])
        # later laps are hard assignments: the final step keeps one cluster per row
        if d < 6:
            assert not np.array_equal(m.history_["elbo"][d:], e[d:])
            assert np.all((m.predict_proba(X) > 0).sum(axis=1) == 1)
            assert m.state_.last_top_l == 1
        else:
            assert m.state_.last_top_l is None
    # dense_laps=0: L-sparse from the first lap (differs from the dense fit at once)
    assert zero.history_["elbo"][0] != e[0]


@pytest.mark.parametrize("moves", [(), pytest.param(None, id="default-moves")])
def test_dense_laps_survive_save_load_and_warm_start(tmp_path, moves):
    """1 lap + save/load + warm_start 4 laps == 5 laps straight, across the dense -> L-sparse
    switch (the lap counter and the last lap's family are part of the saved state); without
    moves and with the default moves of a memoized DPMixture."""
    import bnpcore
    from bnpcore.datasets import make_gaussian_mixture

    X, _ = make_gaussian_mixture(n_samples=900, n_features=2, n_components=4, random_state=2)
    kw = dict(n_components=8, algorithm="memoized", n_batches=3, min_laps=5, tol=0.0, moves=moves, random_state=3,
              top_l=2, dense_laps=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        straight = DPMixture(max_laps=5, **kw).fit(X)
        first = DPMixture(max_laps=1, **kw).fit(X)
        first.save(tmp_path / "m.npz")
        again = bnpcore.load(tmp_path / "m.npz")
        assert again.dense_laps == 1 and again.state_.last_top_l is None
        again.set_params(warm_start=True, max_laps=4).fit(X)
    assert np.array_equal(again.history_["elbo"], straight.history_["elbo"])
    assert again.state_.last_top_l == 2


def test_interrupted_first_sparse_lap_then_a_dense_warm_start_is_not_an_elbo_decrease(tmp_path, monkeypatch):
    """Ctrl-C in the first L-sparse lap (top_l=1 after six dense laps) leaves memos of both
    families; a warm start with top_l=None then replaces the hard memo, and its first lap may end
    below the last recorded (all-dense) ELBO. That lap is not held to it, as a lap that shrinks
    the family is not (pytest turns an ELBODecreaseWarning into an error), in memory and after
    save/load; the lap after it is checked again."""
    import bnpcore
    from _helpers import synthetic_data
    from bnpcore.algorithms._base import FitState

    X, _ = synthetic_data("mult", n=900, n_clusters=8, seed=3)
    kw = dict(obs="mult", n_components=8, n_batches=3, max_laps=10, tol=0.0, moves=(), random_state=2, top_l=1, dense_laps=6)
    orig = FitState.set_memo

    def set_memo(self, b, new):
        orig(self, b, new)
        if self.lap == 6:  # one memo of the first L-sparse lap replaced
            raise KeyboardInterrupt

    monkeypatch.setattr(FitState, "set_memo", set_memo)
    m = DPMixture(**kw)
    with pytest.raises(KeyboardInterrupt):
        m.fit(X)
    monkeypatch.setattr(FitState, "set_memo", orig)
    assert m.state_.lap == 6 and m.state_.last_top_l is None and m.state_.mixed_top_l
    m.save(tmp_path / "m.npz")
    before = m.history_["elbo"][-1]
    fit_quietly(m.set_params(warm_start=True, max_laps=3, top_l=None), X)
    assert m.history_["elbo"][6] < before - 1e-6 * abs(before)  # what the check would have refused
    assert not m.state_.mixed_top_l and _monotone(m.history_["elbo"][6:])
    loaded = bnpcore.load(tmp_path / "m.npz")
    assert loaded.state_.mixed_top_l
    fit_quietly(loaded.set_params(warm_start=True, max_laps=3, top_l=None), X)
    assert np.array_equal(loaded.history_["elbo"], m.history_["elbo"])


def test_invalid_dense_laps_is_a_clear_error():
    X = make_data("gauss", 50, 2, np.random.default_rng(0))
    for bad in (-1, 1.5, "1"):
        with pytest.raises(ParameterError, match="dense_laps"):
            DPMixture(top_l=2, dense_laps=bad).fit(X)


@pytest.mark.parametrize(("kind", "d"), [("gauss", 48), ("zero_mean_gauss", 64), ("diag_gauss", 48)])
def test_wide_feature_tiles_match_the_reference(kind, d):
    """Wide features (a full covariance in 48 dimensions has 1,225 per row) are stepped in tiles
    of fewer rows (``tile_rows``, so a tile stays in cache): responsibilities and summaries still
    equal the numpy reference, dense and L-sparse, on rows spanning several tiles and leaves."""
    X, prior, obs, N, S, elp = problem(kind, 1500, d, 6, 0)
    W = ref.e_log_lik(kind, prior, N, S, X) + elp[None, :]
    R = np.exp(W - W.max(axis=1, keepdims=True))
    R /= R.sum(axis=1, keepdims=True)
    Nr, Sr = ref.summarize(kind, X, R)
    tol = rtol_for(prior, 1e-8)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True)
    assert close(out["resp"], R, tol) and close(out["N"], Nr, tol) and close(out["S"], Sr, tol)
    assert close(out["H"], ref.entropy(R), tol)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=3)
    R3 = top_l_local_step(kind, prior, "dp", 1.0, N, S, X, 3)
    assert close(densify(out, 6), R3, tol)
