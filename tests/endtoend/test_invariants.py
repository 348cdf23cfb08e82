"""End-to-end invariants of full-dataset variational inference (spec 01 §7: P6, P8, P9, P12, P19, P24).

Each test fits a real estimator and checks an identity that must hold exactly (up to round-off)
whatever the data: the ELBO computed from summaries against the reference recomputation from raw
data, the single-cluster ELBO against the exact log marginal likelihood, monotonicity of the ELBO
trace, normalised responsibilities, additivity of summaries, and bit-for-bit reproducibility
across seeds and thread counts.
"""


import os
import subprocess
import sys

import bnpcore._reference as ref
import numpy as np
import pytest
from _helpers import KINDS, fit_quietly, record_memos, synthetic_data
from bnpcore import DPMixture, FiniteMixture, _core
from bnpcore._reference.local import top_l_local_step
from bnpcore.exceptions import ParameterError
from scipy.special import betaln

ESTIMATORS = {"dp": DPMixture, "finite": FiniteMixture}
MONOTONE_RTOL = 1e-9  # STYLE §6: the bound may not drop by more than 1e-9 |L|


def model_of(est):
    return est._make_model(est.obs_model_)


# ----------------------------------------------------------------------------------------------
# P8: ELBO from summaries == raw ELBO recomputed from the data
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alloc", ["dp", "finite"])
@pytest.mark.parametrize("kind", KINDS)
def test_summary_elbo_equals_raw_elbo(kind, alloc, make_data):
    X, _ = make_data(kind, n=90, seed=1)
    est = fit_quietly(ESTIMATORS[alloc](obs=kind, n_components=4, gamma=1.5, max_laps=15, random_state=0), X)
    model = model_of(est)
    # the fitted ELBO is the one of the fitted summaries, by the numpy reference formula
    G = est.summaries_
    want = ref.elbo(kind, est.obs_model_.prior, alloc, est.gamma, G.N, G.S, G.H, G.h)
    assert est.elbo_ == pytest.approx(want, rel=1e-10, abs=1e-10)
    # one more local step with the fitted globals: its responsibilities, summarised
    out = model.local_step(X, est.summaries_, return_resp=True)
    R = out["resp"]
    np.testing.assert_allclose(R, est.predict_proba(X), rtol=0, atol=0)
    from_summaries = model.elbo(model.stats_from_output(out, est.summaries_.uids))
    raw = ref.raw_elbo(kind, est.obs_model_.prior, alloc, est.gamma, X, R)
    assert from_summaries == pytest.approx(raw, rel=1e-10, abs=1e-10)
    # and a coordinate-ascent step cannot lower the bound
    assert from_summaries >= est.elbo_ - MONOTONE_RTOL * abs(est.elbo_)


# ----------------------------------------------------------------------------------------------
# P6: one cluster -> ELBO == exact log marginal likelihood
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_single_cluster_elbo_is_log_marginal_likelihood(kind, make_data):
    X, _ = make_data(kind, n=60, seed=2)
    gamma = 0.7
    fin = FiniteMixture(obs=kind, n_components=1, gamma=gamma, random_state=0).fit(X)
    exact = ref.log_marginal_likelihood(kind, fin.obs_model_.prior, X)
    # finite mixture with K = 1: q(pi) is a point mass, the allocation term vanishes
    assert fin.elbo_ == pytest.approx(exact, rel=1e-10)
    assert fin.converged_ and fin.n_components_ == 1
    # DP: plus log p(z) of every atom choosing stick 1, ln B(1 + N, gamma) / B(1, gamma)
    dp = DPMixture(obs=kind, n_components=1, gamma=gamma, moves=(), random_state=0).fit(X)  # no births: K stays 1
    n = X.shape[0]
    alloc = betaln(1.0 + n, gamma) - betaln(1.0, gamma)
    assert dp.elbo_ - alloc == pytest.approx(exact, rel=1e-10)
    assert dp.elbo_ < fin.elbo_  # sanity: the allocation term is a log probability < 0


# ----------------------------------------------------------------------------------------------
# P19: the ELBO never decreases across full-dataset laps
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("init", ["kmeans++", "random_from_data"])
@pytest.mark.parametrize("alloc", ["dp", "finite"])
@pytest.mark.parametrize("kind", KINDS)
def test_elbo_never_decreases(kind, alloc, init, make_data):
    # overlapping clusters and many initial components make the trajectory long and non-trivial
    X, _ = make_data(kind, n=300, n_clusters=5, seed=3)
    est = ESTIMATORS[alloc](obs=kind, n_components=12, init=init, max_laps=40, tol=1e-10, random_state=4)
    fit_quietly(est, X)  # ELBODecreaseWarning is an error (pytest config)
    elbo = est.history_["elbo"]
    assert len(elbo) >= 3, "the fit must run several laps for this test to mean anything"
    assert np.all(np.isfinite(elbo))
    drops = np.diff(elbo) < -MONOTONE_RTOL * np.abs(elbo[:-1])
    assert not drops.any(), f"ELBO dropped at laps {np.flatnonzero(drops) + 2}: {elbo}"
    assert elbo[-1] > elbo[0]
    assert np.array_equal(est.history_["lap"], np.arange(1, len(elbo) + 1))


# ----------------------------------------------------------------------------------------------
# P12: responsibilities sum to one
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alloc", ["dp", "finite"])
@pytest.mark.parametrize("kind", KINDS)
def test_responsibilities_sum_to_one(kind, alloc, make_data):
    X, _ = make_data(kind, n=200, seed=5)
    est = fit_quietly(ESTIMATORS[alloc](obs=kind, n_components=6, max_laps=10, random_state=0), X)
    R = est.predict_proba(X)
    assert R.shape == (X.shape[0], est.summaries_.K)
    assert np.all(R >= 0.0) and np.all(np.isfinite(R))
    np.testing.assert_allclose(R.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    # far-away rows (Gaussians): log weights of order -1e10, still a distribution
    if kind in ("gauss", "diag_gauss", "zero_mean_gauss"):
        far = est.predict_proba(1e5 * np.ones((3, X.shape[1])))
        assert np.all(np.isfinite(far))
        np.testing.assert_allclose(far.sum(axis=1), 1.0, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# P9: summaries are additive over disjoint splits
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_summaries_additive_over_splits(kind, make_data):
    X, _ = make_data(kind, n=1500, seed=6)  # several 512-row chunks; cuts not chunk-aligned
    est = fit_quietly(DPMixture(obs=kind, n_components=5, max_laps=5, random_state=0), X)
    model = model_of(est)
    G = est.summaries_
    K = G.K
    rng = np.random.default_rng(7)
    fN, fS = est.obs_model_.core.summarize(X, rng.dirichlet(np.ones(2), size=X.shape[0]))
    opts = dict(
        merge_pairs=[(0, K - 1)] if K > 1 else [],
        proposals=[
            {"src": [0], "dest_cols": list(range(K))},
            {"src": list(range(K)), "fresh_N": fN, "fresh_S": fS, "fresh_e_log_pi": np.log([0.3, 0.7])},
        ],
        cooccur_col=0,
    )
    whole = model.local_step(X, G, **opts)
    cuts = [0, 333, 700, 701, 1500]
    parts = [model.local_step(X[a:b], G, **opts) for a, b in zip(cuts[:-1], cuts[1:])]

    def check(total, pieces, what):
        pieces = np.asarray(pieces)
        summed = pieces.sum(axis=0)
        mag = np.abs(pieces).sum(axis=0)
        assert np.all(np.abs(summed - total) <= 1e-12 * np.maximum(mag, 1e-300)), what

    for key in ("N", "S", "H", "pair_H", "cooccur", "h_sum", "lse_sum"):
        check(whole[key], [p[key] for p in parts], key)
    for j in range(len(opts["proposals"])):
        for i, name in enumerate(("N", "S", "H")):
            check(whole["proposals"][j][i], [p["proposals"][j][i] for p in parts], f"proposal {j} {name}")
    # the plain summarize kernel too
    R = est.predict_proba(X)
    N, S = est.obs_model_.core.summarize(X, R)
    pieces = [est.obs_model_.core.summarize(X[a:b], R[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    check(N, [p[0] for p in pieces], "summarize N")
    check(S, [p[1] for p in pieces], "summarize S")


# ----------------------------------------------------------------------------------------------
# P24: reproducibility across runs and thread counts
# ----------------------------------------------------------------------------------------------


def fitted_arrays(est, X):
    out = {
        "weights_": est.weights_,
        "counts_": est.counts_,
        "N": est.summaries_.N,
        "S": est.summaries_.S,
        "H": est.summaries_.H,
        "uids": est.summaries_.uids,
        "elbo_": np.array(est.elbo_),
        "proba": est.predict_proba(X),
        "score": est.score_samples(X),
    }
    for name in ("means_", "covariances_"):
        if hasattr(est, name):
            out[name] = getattr(est, name)
    for key in ("lap", "elbo", "n_components"):
        out["history_" + key] = est.history_[key]
    return out


def assert_bit_identical(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].shape == b[key].shape, key
        assert np.array_equal(a[key], b[key]), f"{key} differs"
        assert a[key].tobytes() == b[key].tobytes(), f"{key} differs in its bits"


@pytest.mark.parametrize(
    "kind,alloc,init",
    [(k, "dp", "kmeans++") for k in KINDS] + [("gauss", "finite", "random_from_data"), ("mult", "finite", "kmeans++")],
)
def test_same_seed_same_result_and_thread_count_invariance(kind, alloc, init, make_data):
    X, _ = make_data(kind, n=2000, n_clusters=4, seed=8)  # 4 chunks: the parallel reduction is exercised
    params = dict(obs=kind, n_components=8, init=init, max_laps=12, random_state=123)
    one = fit_quietly(ESTIMATORS[alloc](n_threads=1, **params), X)
    two = fit_quietly(ESTIMATORS[alloc](n_threads=2, **params), X)
    again = fit_quietly(ESTIMATORS[alloc](n_threads=2, **params), X)
    ref_arrays = fitted_arrays(one, X)
    assert_bit_identical(ref_arrays, fitted_arrays(two, X))
    assert_bit_identical(ref_arrays, fitted_arrays(again, X))
    assert len(one.history_["seconds"]) == len(one.history_["elbo"])
    # a different seed is a different run (the comparison above is not vacuous)
    other = fit_quietly(ESTIMATORS[alloc](n_threads=2, **{**params, "random_state": 124}), X)
    assert not np.array_equal(other.summaries_.S, one.summaries_.S) or not np.array_equal(
        other.history_["elbo"], one.history_["elbo"]
    )


def test_huge_thread_counts_are_capped_and_pools_bounded(make_data):
    """A request for more threads than _core.max_num_threads() runs on that many (the result is
    the same, at once: 4096 threads took minutes to start), absurd ones are refused by name, and
    the pools of many different counts are not all kept alive."""
    import os

    X, _ = make_data("gauss", n=600, seed=3)
    params = dict(n_components=3, max_laps=2, random_state=0)
    one = fit_quietly(DPMixture(n_threads=1, **params), X)
    many = fit_quietly(DPMixture(n_threads=10_000, **params), X)
    assert_bit_identical(fitted_arrays(one, X), fitted_arrays(many, X))
    with pytest.raises(ParameterError, match="`n_threads` must be <= 65536"):
        DPMixture(n_threads=2**70, **params).fit(X)
    if os.path.isdir("/proc/self/task"):  # Linux: count the process's threads
        import time

        base = len(os.listdir("/proc/self/task"))
        for n in range(12, 24):  # 210 threads if every pool were kept
            fit_quietly(DPMixture(n_threads=n, **params), X)
        bound = base + 4 * 23  # the four most recent pools at most (a dropped pool's threads exit soon)
        deadline = time.monotonic() + 10.0
        while len(os.listdir("/proc/self/task")) > bound and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(os.listdir("/proc/self/task")) <= bound


def test_local_step_bit_identical_for_1_and_2_threads(make_data):
    """The kernel itself, with every option on, at a size with many chunks."""
    X, _ = make_data("gauss", n=5000, seed=9)
    est = fit_quietly(DPMixture(obs="gauss", n_components=4, max_laps=3, random_state=0), X)
    G = est.summaries_
    obs = est.obs_model_.core
    e_log_pi = model_of(est).alloc.e_log_pi(G.N)
    opts = dict(
        weights=np.linspace(0.0, 2.0, X.shape[0]),
        merge_pairs=[(0, 1)],
        proposals=[{"src": [0], "dest_cols": [1, 2]}],
        collect_cols=[1],
        cooccur_col=0,
        return_resp=True,
    )
    a = _core.local_step(obs, _core.Alloc.fixed(e_log_pi), X, G.N, G.S, n_threads=1, **opts)
    b = _core.local_step(obs, _core.Alloc.fixed(e_log_pi), X, G.N, G.S, n_threads=2, **opts)
    for key in ("N", "S", "H", "pair_H", "resp", "cols", "cooccur"):
        assert a[key].tobytes() == b[key].tobytes(), key
    assert a["lse_sum"] == b["lse_sum"] and a["h_sum"] == b["h_sum"]
    for p, q in zip(a["proposals"], b["proposals"]):
        for x, y in zip(p, q):
            assert x.tobytes() == y.tobytes()


# ----------------------------------------------------------------------------------------------
# P8 for what users get: multi-batch memoized fits with the default moves, dense and top-L
# ----------------------------------------------------------------------------------------------

@pytest.fixture
def memo_recorder(monkeypatch):
    return record_memos(monkeypatch)


@pytest.mark.parametrize("top_l", [None, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_memoized_fit_with_moves_elbo_equals_raw_elbo(kind, top_l, memo_recorder):
    """A memoized DPMixture with its default moves (birth, merge, delete accepted along the
    way), 3 batches, dense or top_l=2: after a last lap, the fitted ELBO (Rust, from the
    tree-summed memos and their uids after the moves, empty-cluster removal and sorting) equals
    the ELBO recomputed by the numpy reference from the raw data and the responsibilities that
    produced each memo; those responsibilities are themselves the numpy reference local step at
    the global parameters of their visit."""
    X, _ = synthetic_data(kind, n=600, n_clusters=4, seed=11)
    est = fit_quietly(DPMixture(obs=kind, n_components=1, algorithm="memoized", n_batches=3, max_laps=12, top_l=top_l,
                                random_state=5), X)
    assert est._moves_tuple() == ("birth", "merge", "delete")
    assert any(r["accepted"] for r in est.moves_log_), "no move accepted: the test would not cover moves"
    memo_recorder["on"] = True
    n_log = len(est.moves_log_)
    # the last lap without moves: births keep proposing while some target is untried, and a
    # move accepted in the recorded lap would rewrite the memos the recorder just saw
    est.set_params(warm_start=True, max_laps=1, moves=())
    fit_quietly(est, X)
    assert not any(r["accepted"] for r in est.moves_log_[n_log:]), "a move in the last lap rewrote the memos"
    assert sorted(memo_recorder["memos"]) == [0, 1, 2]
    prior, G = est.obs_model_.prior, est.summaries_
    Xs, Rs = [], []
    for Xb, Nb, Sb, uids, Rb, L in memo_recorder["memos"].values():
        if L is None:
            want = ref.local_step(kind, prior, "dp", est.gamma, Nb, Sb, Xb)
        else:
            want = top_l_local_step(kind, prior, "dp", est.gamma, Nb, Sb, Xb, L)
        np.testing.assert_allclose(Rb, want, rtol=1e-9, atol=1e-10)
        # columns in the order of the final uids; clusters removed at the end of the lap held no mass
        pos = {u: j for j, u in enumerate(uids)}
        gone = [j for u, j in pos.items() if u not in set(G.uids.tolist())]
        assert Rb[:, gone].sum() <= 1e-9
        Xs.append(Xb)
        Rs.append(Rb[:, [pos[u] for u in G.uids]])
    Xall, Rall = np.vstack(Xs), np.vstack(Rs)
    assert sorted(map(tuple, Xall)) == sorted(map(tuple, X))  # the batches partition the data
    N_raw, S_raw = ref.summarize(kind, Xall, Rall)
    np.testing.assert_allclose(G.N, N_raw, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(G.S, S_raw, rtol=1e-10, atol=1e-8 * max(1.0, np.abs(S_raw).max()))
    raw = ref.raw_elbo(kind, prior, "dp", est.gamma, Xall, Rall)
    assert est.elbo_ == pytest.approx(raw, rel=1e-10, abs=1e-8)


_THREADS_SCRIPT = """
import os, warnings
import numpy as np
from bnpcore import DPMixture, HDPTopicModel
from bnpcore.datasets import make_bars, make_gaussian_mixture

warnings.simplefilter("ignore")
X = make_gaussian_mixture(n_samples=3000, n_features=3, n_components=6, random_state=0)[0]
DPMixture(n_threads=1, random_state=0, max_laps=8).fit(X)  # default moves: births, merges, deletes
HDPTopicModel(n_threads=1, random_state=0, max_laps=4).fit(make_bars(200, random_state=0)[0])
names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
print(sum(n.startswith("bnpcore-") for n in names))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_n_threads_bounds_every_call_of_a_fit(tmp_path):
    """With n_threads=1 a fit with the default moves starts one pool thread: the calls made
    without an n_threads of their own (objective terms, move candidates, tables) follow the
    estimator's count; they used to start a pool of BNPCORE_NUM_THREADS (here 3) threads."""
    script = tmp_path / "threads.py"
    script.write_text(_THREADS_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "BNPCORE_NUM_THREADS": "3"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[-1]) == 1


def test_the_callers_thread_count_is_per_python_thread_and_restored(make_data):
    """Inside a fit the default of calls without n_threads is the estimator's n_threads, in
    this Python thread only; after the fit (or an error) the previous default is back."""
    import threading

    X, _ = make_data("gauss", n=400, seed=1)
    before = _core.default_num_threads()
    seen, barrier = {}, threading.Barrier(2)

    def fit(n):
        def cb(model, info):
            barrier.wait(timeout=30)  # both fits are inside their laps
            seen[n] = _core.default_num_threads()
            return True  # stop cleanly (no ConvergenceWarning, an error in tests)

        DPMixture(n_threads=n, n_components=3, random_state=0, callback=cb).fit(X)

    threads = [threading.Thread(target=fit, args=(n,)) for n in (1, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == {1: 1, 3: 3}
    assert _core.default_num_threads() == before
    with pytest.raises(ParameterError):
        DPMixture(n_threads=1, n_components=0).fit(X)
    bad = DPMixture(n_threads=1, n_components=3, callback=lambda m, i: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bad.fit(X)
    assert _core.default_num_threads() == before


@pytest.mark.parametrize("value, warns", [("abc", True), ("0", True), (" 3", True), ("3", False), ("+3", False)])
def test_an_unusable_bnpcore_num_threads_is_reported_at_import(value, warns):
    """The core ignores a BNPCORE_NUM_THREADS it cannot read as a positive integer (all cores
    are used); importing bnpcore says so instead of leaving it silent."""
    code = "import bnpcore; from bnpcore import _core; print(_core.default_num_threads())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "BNPCORE_NUM_THREADS": value}
    proc = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert ("RuntimeWarning: BNPCORE_NUM_THREADS" in proc.stderr) == warns, proc.stderr
    if not warns:
        assert proc.stdout.split()[-1] == "3"
