"""L-sparse responsibilities whose candidates come from a float32 GEMM (issue 5, L-sparse speed
at large K; ``rust/bnpcore/src/local/cand32.rs``).

For the zero-mean Gaussian at large K (K >= 64, F·K >= 32768 with F = D(D+1)/2, L <= K/16, at
least 64·D rows) the local step picks every row's candidate clusters with a float32 GEMM and a
rigorous error bound, recomputes their log weights in float64 and selects the top L among them.
The result must be the float64 top-L: the same sets as the float64 path and the numpy reference,
the same values up to float64 rounding, and all the sparse-step identities. The output key
``n_candidates`` shows that the path ran.
"""

import bnpcore._reference as ref
import numpy as np
import pytest
from _helpers import close, dense_resp
from bnpcore import _core
from bnpcore._reference.local import top_l_local_step, top_l_resp
from bnpcore.exceptions import ConvergenceWarning
from bnpcore.obs import default_prior
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import digamma, softmax

KIND = "zero_mean_gauss"
D, K = 16, 256  # F·K = 136·256 >= 32768
N_ROWS = 64 * D  # smallest batch that uses the float32 path
SETTINGS = settings(max_examples=6, deadline=None)


def mixture_data(rng, n, scale, n_groups=12, d=D):
    """Zero-mean rows from groups with very different covariances (random factor loadings and
    scales over four decades), times ``scale``; each row also gets its own factor 10^U(-1, 1)."""
    X = np.empty((n, d))
    g = rng.integers(n_groups, size=n)
    for j in range(n_groups):
        A = rng.standard_normal((d, d)) * 10.0 ** rng.uniform(-2, 2, size=d)[None, :]
        idx = np.nonzero(g == j)[0]
        X[idx] = rng.standard_normal((idx.size, d)) @ A.T
    X *= 10.0 ** rng.uniform(-1, 1, size=(n, 1))
    return X * scale


def problem(seed, scale=1.0, n=N_ROWS, near_dup=0.0):
    """Data, prior, model and global summaries (N, S) of K clusters fitted to random groups of
    rows (distinct clusters, as after a few laps), with E[ln π]. With ``near_dup`` > 0, clusters
    1, 3, 5, … copy clusters 0, 2, 4, … with their statistics perturbed by that relative amount
    (differences in the log weights far below float32 resolution)."""
    rng = np.random.default_rng(seed)
    X = mixture_data(rng, n, scale)
    prior = default_prior(KIND, X)
    obs = _core.ObsModel(KIND, prior)
    lab = rng.integers(K, size=n)
    R = np.zeros((n, K))
    R[np.arange(n), lab] = 1.0
    # one-hot responsibilities: N_k counts the rows of group k, S_k sums their x x^T (numpy)
    N = np.bincount(lab, minlength=K).astype(float)
    S = np.zeros((K, D * D))
    np.add.at(S, lab, np.einsum("ni,nj->nij", X, X).reshape(n, D * D))
    N = N + 1.0
    S = S + np.eye(D).ravel()[None, :] * np.trace(S.reshape(K, D, D), axis1=1, axis2=2).mean() / D * 1e-3
    if near_dup:
        for a in range(0, K - 1, 2):
            P = rng.standard_normal((D, D))
            N[a + 1] = N[a]
            S[a + 1] = S[a] + near_dup * np.abs(S[a]).max() * (P + P.T).ravel()
    elp = ref.e_log_pi("dp", N, 1.0)
    if near_dup:
        elp[1::2] = elp[0::2]  # (stick-breaking would favour the earlier copy)
    return X, prior, obs, N, S, elp


def weights(prior, X, N, S, elp):
    """W_nk = E log F(x_n | phi_k) + E ln pi_k from the numpy reference's posteriors and its
    zero-mean Gaussian formula, -D/2 ln 2pi + 1/2 E ln|Lambda_k| - 1/2 nu_k x^T B_k^{-1} x with
    E ln|Lambda| = sum_d psi((nu + 1 - d)/2) + D ln 2 - ln|B| (vectorised over rows: the
    reference's row-by-row loop takes minutes at 1024 x 256; checked against it on a few rows
    in test_vectorised_weights_equal_the_reference)."""
    d = X.shape[1]
    W = np.empty((X.shape[0], len(N)))
    for k, post in enumerate(ref.posterior(KIND, prior, N, S)):
        nu, B = float(post["nu"]), np.asarray(post["B"])
        e_logdet = digamma((nu + 1.0 - np.arange(1, d + 1)) / 2.0).sum() + d * np.log(2.0) - np.linalg.slogdet(B)[1]
        maha = np.einsum("nd,nd->n", X, np.linalg.solve(B, X.T).T)
        W[:, k] = -0.5 * d * np.log(2.0 * np.pi) + 0.5 * e_logdet - 0.5 * nu * maha
    return W + elp[None, :]


def test_vectorised_weights_equal_the_reference():
    X, prior, _obs, N, S, elp = problem(3)
    rows = X[:6]
    assert close(weights(prior, rows, N, S, elp), ref.e_log_lik(KIND, prior, N, S, rows) + elp[None, :], 1e-11)


def check_top_l(out, W, L):
    """Rows on the simplex with at most L entries that are the L largest log weights."""
    idx, val = out["resp_idx"], out["resp_val"]
    pad = np.iinfo(np.uint32).max
    for i in range(W.shape[0]):
        real = idx[i] != pad
        ks = idx[i, real].astype(np.intp)
        assert 1 <= ks.size <= L and np.all(np.diff(ks) > 0)
        assert abs(val[i, real].sum() - 1.0) <= 1e-12 and np.all(val[i, ~real] == 0)
        others = np.setdiff1d(np.arange(W.shape[1]), ks)
        tol = 1e-9 * max(1.0, np.abs(W[i]).max())
        assert W[i, ks].min() >= W[i, others].max() - tol


# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(st.integers(0, 2**31 - 1), st.integers(-8, 8), st.integers(1, K // 32))
def test_float32_candidates_give_the_float64_top_l(seed, log_scale, L):
    """Widely scaled data (10^-8 … 10^8, and rows over two decades within a batch): the path
    runs, keeps about L candidates per row, and returns the reference's top-L rows (the
    reference's selection on the float64 log weights)."""
    X, prior, obs, N, S, elp = problem(seed, scale=10.0**log_scale)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L)
    n = X.shape[0]
    assert "n_candidates" in out
    assert n * L <= out["n_candidates"] <= n * (L + 4)  # the bound is rigorous but tight
    W = weights(prior, X, N, S, elp)
    check_top_l(out, W, L)
    R = dense_resp(out, K)
    assert close(R, top_l_resp(W, L), 1e-9)
    # the same rows as the float64 path (fewer rows than the float32 path needs) on a prefix
    small = _core.local_step(obs, _core.Alloc.fixed(elp), X[: N_ROWS - 1], N, S, return_resp=True, top_l=L)
    assert "n_candidates" not in small
    assert np.array_equal(small["resp_idx"], out["resp_idx"][: N_ROWS - 1])
    assert close(small["resp_val"], out["resp_val"][: N_ROWS - 1], 1e-12)


def test_float32_path_matches_the_numpy_reference():
    X, prior, obs, N, S, elp = problem(2024, scale=3e-3)
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=4)
    assert "n_candidates" in out
    R = dense_resp(out, K)
    assert close(R, top_l_local_step(KIND, prior, "dp", 1.0, N, S, X, 4), 1e-9)


@SETTINGS
@given(st.integers(0, 2**31 - 1), st.integers(1, K // 32), st.booleans())
def test_float32_path_summaries_and_objective_gap(seed, L, weighted):
    """Sparse summaries equal the summaries of the densified rows, and at fixed globals the
    sparse objective is below the dense one by exactly −Σ_n log m_n (m_n: dense mass kept)."""
    X, prior, obs, N, S, elp = problem(seed)
    w = np.random.default_rng(seed).uniform(0.0, 2.0, X.shape[0]) if weighted else None
    pairs = [(0, 1), (2, K - 1), (5, 7)]
    out = _core.local_step(
        obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=L, weights=w, merge_pairs=pairs, cooccur_col=0, collect_cols=[3]
    )
    assert "n_candidates" in out
    R = dense_resp(out, K)
    Rw = R if w is None else R * w[:, None]
    Nd, Sd = ref.summarize(KIND, X, Rw)
    assert close(out["N"], Nd) and close(out["S"], Sd)
    if w is None:
        assert close(out["H"], ref.entropy(R))
        assert close(out["pair_H"], ref.pair_entropy(R, pairs))
        assert close(out["cooccur"], R[:, 0] @ R)
        dense = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True)
        mass = (softmax(weights(prior, X, N, S, elp), axis=1) * (R > 0)).sum(axis=1)  # reference dense rows
        gap = -np.log(mass).sum()
        scale = max(1.0, abs(dense["lse_sum"]))
        assert abs((dense["lse_sum"] - out["lse_sum"]) - gap) <= 1e-9 * scale
        e_ll = ref.e_log_lik_sum_from_stats(KIND, prior, N, S, out["N"], out["S"])
        f_sparse = float(e_ll.sum() + out["N"] @ elp + out["H"].sum())
        assert abs(f_sparse - out["lse_sum"]) <= 1e-9 * scale
    assert np.array_equal(out["cols"][:, 0], R[:, 3])


@pytest.mark.parametrize("near_dup", [1e-9, 1e-12])
def test_near_tied_clusters_below_float32_resolution(near_dup):
    """Adversarial for the margin: pairs of clusters whose log weights differ by ~1e-9 relative
    (which one is larger changes from row to row) are indistinguishable in float32; the
    candidates keep both and the exact comparison decides, as in the float64 path."""
    X, prior, obs, N, S, elp = problem(11, near_dup=near_dup)
    W = weights(prior, X, N, S, elp)
    # pairs (a, a+1) that are each row's two best clusters, with the winner varying by row
    best = np.argsort(-W, axis=1)[:, :2]
    tied = (best[:, 0] // 2 == best[:, 1] // 2)
    assert tied.mean() > 0.5
    assert 0 < (best[tied, 0] % 2).mean() < 1
    out = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=1)
    assert "n_candidates" in out and out["n_candidates"] >= 2 * tied.sum()
    small = _core.local_step(obs, _core.Alloc.fixed(elp), X[: N_ROWS - 1], N, S, return_resp=True, top_l=1)
    assert np.array_equal(small["resp_idx"], out["resp_idx"][: N_ROWS - 1])
    # the chosen cluster is the larger of the pair (ties to ~1e-13 aside)
    chosen = out["resp_idx"][:, 0].astype(np.intp)
    rows = np.arange(X.shape[0])
    tol = 1e-12 * np.abs(W).max(axis=1)
    assert np.all(W[rows, chosen] >= W.max(axis=1) - tol)


@settings(max_examples=3, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, K // 32))
def test_float32_path_is_bit_identical_for_any_thread_count(seed, L):
    X, _, obs, N, S, elp = problem(seed, n=3 * N_ROWS)
    a = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=L, merge_pairs=[(0, 1)], n_threads=1, return_resp=True)
    b = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=L, merge_pairs=[(0, 1)], n_threads=2, return_resp=True)
    assert "n_candidates" in a
    for key in ("N", "S", "H", "pair_H", "resp_idx", "resp_val"):
        assert np.array_equal(a[key], b[key]), key
    assert a["lse_sum"] == b["lse_sum"] and a["n_candidates"] == b["n_candidates"]


def test_float32_path_with_proposals_matches_the_float64_path():
    """Births and deletes read log weights of destination columns that need not be candidates:
    those are recomputed in float64 too, so proposal summaries match the float64 path."""
    X, _, obs, N, S, elp = problem(5)
    rng = np.random.default_rng(0)
    Rf = rng.dirichlet(np.ones(3), size=X.shape[0])
    fN, fS = ref.summarize(KIND, X, Rf)
    props = [
        {"src": [4], "fresh_N": fN + 1.0, "fresh_S": fS, "fresh_e_log_pi": np.log(np.full(3, 1 / 3))},
        {"src": [4, 9], "dest_cols": [0, 17, 200]},
    ]
    n = N_ROWS - 1
    big = _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=2, proposals=props, return_resp=True)
    assert "n_candidates" in big
    # row-wise results do not depend on the other rows: compare the float64 path on a prefix with
    # the float32 path on the same prefix padded by copies (to reach the row threshold)
    Xp = np.concatenate([X[:n], X[:n]])
    a = _core.local_step(obs, _core.Alloc.fixed(elp), X[:n], N, S, top_l=2, proposals=props, return_resp=True)
    b = _core.local_step(obs, _core.Alloc.fixed(elp), Xp, N, S, top_l=2, proposals=props, return_resp=True)
    assert "n_candidates" not in a and "n_candidates" in b
    assert np.array_equal(a["resp_idx"], b["resp_idx"][:n])
    for (aN, aS, aH), (bN, bS, bH) in zip(a["proposals"], b["proposals"]):
        assert close(2 * aN, bN, 1e-10) and close(2 * aS, bS, 1e-10) and close(2 * aH, bH, 1e-10)


def test_float32_path_only_where_it_pays():
    """Not used for other observation models, small K, large L/K or small batches."""
    X, _, obs, N, S, elp = problem(1)
    assert "n_candidates" in _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=16)
    assert "n_candidates" not in _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=17)  # L > K/16
    assert "n_candidates" not in _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S)  # dense
    assert "n_candidates" not in _core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, top_l=K)  # L >= K is dense
    k = 64  # F·K = 136·64 < 32768
    assert "n_candidates" not in _core.local_step(obs, _core.Alloc.fixed(elp[:k]), X, N[:k], S[:k], top_l=1)
    Xg = X + 1.0
    g = _core.ObsModel("gauss", default_prior("gauss", Xg))
    Rg = dense_resp(_core.local_step(obs, _core.Alloc.fixed(elp), X, N, S, return_resp=True, top_l=1), K)
    Ng, Sg = g.summarize(Xg, Rg)
    assert "n_candidates" not in _core.local_step(g, _core.Alloc.fixed(elp), Xg, Ng + 1.0, Sg, top_l=1)


@pytest.mark.parametrize("moves", [(), ("birth", "merge", "delete")])
def test_memoized_fit_on_the_float32_path_never_decreases_the_elbo(moves):
    """End to end: memoized laps (and births, merges, deletes, whose proposals read destination
    columns) with local steps on the float32 path keep the ELBO monotone."""
    import warnings

    from bnpcore import DPMixture

    d = 32  # F = 528: the path runs for K >= 64 with L = 2 on batches of >= 2048 rows
    X = mixture_data(np.random.default_rng(0), 4096, 1.0, d=d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = DPMixture(
            # (240: with the moves, the laps' sweeps of sub-atom clusters leave ~108 of them)
            obs=KIND, n_components=240, top_l=2, algorithm="memoized", n_batches=2, max_laps=5, moves=moves,
            random_state=0,
        ).fit(X)
    elbo = np.asarray(m.history_["elbo"])
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    # the last laps still ran on the float32 path
    model = m._make_model(m.obs_model_)
    assert len(m.summaries_.N) >= 64
    assert "n_candidates" in model.local_step(X[:2048], m.summaries_)
