"""Peels (issue 13 item 3): births that split off, one set of rows at a time, the clusters that
differ from their target by covariance more than by mean, where a split into a few fresh
clusters can only produce unions of true clusters (which score below the target itself)."""

import numpy as np
import pytest
from _helpers import assert_same_trajectory, fit_quietly, resume_from_file
from bnpcore import DPMixture
from bnpcore.alloc import DPAlloc
from bnpcore.exceptions import ParameterError
from bnpcore.model import Model
from bnpcore.moves.birth import _set_summaries, peel_clusters, peel_seeds
from bnpcore.obs import ObsModel
from sklearn.metrics import adjusted_rand_score


def _covariance_mixture(n, d, k, spread=2.5, mean_scale=0.25, seed=0):
    """Equal-weight Gaussians with close means (``N(0, mean_scale²)`` per coordinate) and
    covariances ``Q_k diag(exp(U(-spread, spread))) Q_kᵀ`` of random rotations ``Q_k``."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, mean_scale, (k, d))
    y = np.arange(n) % k
    X = np.empty((n, d))
    for j in range(k):
        q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        chol = np.linalg.cholesky((q * np.exp(rng.uniform(-spread, spread, d))) @ q.T)
        idx = np.flatnonzero(y == j)
        X[idx] = means[j] + rng.standard_normal((idx.size, d)) @ chol.T
    return X, y


def _model(kind, X):
    return Model(DPAlloc(1.0), ObsModel.from_data(kind, X))


@pytest.mark.parametrize("kind", ["gauss", "zero_mean_gauss"])
def test_peel_finds_clusters_told_apart_by_covariance(kind):
    """From one target holding six covariance-only clusters, the peeled clusters (and the rest)
    classify the rows as the truth does, and the partition beats one cluster."""
    X, y = _covariance_mixture(3600, 32, 6)
    if kind == "zero_mean_gauss":
        X, y = _covariance_mixture(3600, 32, 6, mean_scale=0.0)
    model = _model(kind, X)
    r = np.ones(len(X))
    N, S, gain = peel_clusters(model, X, r, np.random.default_rng(0), 16)
    assert N is not None and gain > 0
    assert np.isclose(N.sum(), len(X))
    labels = np.asarray(model.obs.core.e_log_lik(X, N, S)).argmax(axis=1)
    assert adjusted_rand_score(y, labels) > 0.95


def test_peel_waits_for_sets_that_sharpen_slowly():
    """Where the covariances differ less, the sets become pure only after five to eight steps:
    the default peel (``give_up_after=8``) waits for them and its clusters classify the rows
    nearly as the truth does, where giving up after four steps (the former default) proposed
    nothing; on 100,000 × 128 rows of 80 clusters at ``--spread 2.0`` that was the difference
    between one cluster and all 80."""
    X, y = _covariance_mixture(12000, 64, 10, spread=1.75)
    model = _model("gauss", X)
    r = np.ones(len(X))
    N, S, gain = peel_clusters(model, X, r, np.random.default_rng(0), 16)
    assert N is not None and len(N) >= 5 and gain > 0
    labels = np.asarray(model.obs.core.e_log_lik(X, N, S)).argmax(axis=1)
    assert adjusted_rand_score(y, labels) > 0.85
    assert peel_clusters(model, X, r, np.random.default_rng(0), 16, give_up_after=4)[0] is None


@pytest.mark.parametrize("kind", ["gauss", "zero_mean_gauss"])
def test_set_summaries_are_the_kernels(kind):
    """The peel's summaries of row sets (weights, per-set factors, overlapping sets, an empty
    set) equal those of ``ObsModel.summarize`` with the same responsibilities."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 5)) * 3.0 + 1.0
    r = rng.uniform(0.1, 2.0, 300)
    sets = [np.arange(0, 120), np.arange(100, 300, 2), np.array([], dtype=np.int64)]
    factors = [rng.uniform(0.2, 1.0, t.size) for t in sets]
    R = np.zeros((300, 3))
    for j, t in enumerate(sets):
        R[t, j] = r[t] * factors[j]
    core = _model(kind, X).obs.core
    N_ref, S_ref = core.summarize(X, R)
    N, S = _set_summaries(kind, X, r, sets, factors)
    np.testing.assert_allclose(N, N_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(S, S_ref, rtol=1e-12, atol=1e-9)
    R1 = np.zeros((300, 3))
    for j, t in enumerate(sets):
        R1[t, j] = r[t]
    for got, ref in zip(_set_summaries(kind, X, r, sets), core.summarize(X, R1)):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-9)


def test_peel_of_one_gaussian_proposes_nothing():
    """A target that is one Gaussian keeps no set: none raises the objective."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3000, 32)) @ np.linalg.cholesky(np.cov(rng.standard_normal((64, 32)).T)).T
    N, S, gain = peel_clusters(_model("gauss", X), X, np.ones(len(X)), np.random.default_rng(0), 16)
    assert N is None and S is None and gain == -np.inf


def test_peel_weights_scale_and_determinism():
    """The summaries carry the weights ``scale * r`` (masses add up to the scaled weight); the
    same generator state gives the same proposal; too few rows give nothing."""
    X, _ = _covariance_mixture(3600, 32, 6)
    model = _model("gauss", X)
    r = np.random.default_rng(2).uniform(0.2, 1.0, len(X))
    a = peel_clusters(model, X, r, np.random.default_rng(5), 16, scale=3.0)
    b = peel_clusters(model, X, r, np.random.default_rng(5), 16, scale=3.0)
    assert a[0] is not None
    assert np.isclose(a[0].sum(), 3.0 * r.sum())
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert peel_clusters(model, X[:255], r[:255], np.random.default_rng(5), 16)[0] is None  # fewer than 8 D rows


def test_peel_seeds_option():
    """``"auto"``: 32 seeds for the full-covariance Gaussians from 32 features, none otherwise;
    an integer is used as given; a negative one is refused."""
    rng = np.random.default_rng(0)
    assert peel_seeds(_model("gauss", rng.standard_normal((100, 32))), "auto") == 32
    assert peel_seeds(_model("zero_mean_gauss", rng.standard_normal((100, 40))), "auto") == 32
    assert peel_seeds(_model("gauss", rng.standard_normal((100, 16))), "auto") == 0
    assert peel_seeds(_model("diag_gauss", rng.standard_normal((100, 64))), "auto") == 0
    assert peel_seeds(_model("gauss", rng.standard_normal((100, 16))), 4) == 4
    with pytest.raises(ParameterError, match="birth_peel_seeds"):
        fit_quietly(DPMixture(n_components=1, algorithm="memoized", move_options={"birth_peel_seeds": -1}), rng.standard_normal((200, 2)))


def test_default_births_find_covariance_clusters_from_one():
    """12,000 × 48, 30 clusters with close means and different covariances (400 rows each):
    from one cluster with the default moves the fit finds all 30 (the true labelling's objective);
    without peels its births stop at a handful of unions of true clusters."""
    X, y = _covariance_mixture(12000, 48, 30)
    kw = dict(obs="gauss", n_components=1, algorithm="memoized", n_batches=4, random_state=0)
    m = fit_quietly(DPMixture(**kw), X)
    assert m.n_components_ == 30
    assert adjusted_rand_score(y, m.predict(X)) > 0.99
    births = [r for r in m.moves_log_ if r["kind"] == "birth" and r["accepted"]]
    assert births and all(r["elbo_after"] > r["elbo_before"] for r in births)
    off = fit_quietly(DPMixture(**kw, move_options={"birth_peel_seeds": 0}), X)
    assert off.n_components_ < 20 and m.elbo_ > off.elbo_


def test_peel_fits_resume_exactly(tmp_path):
    """The peel's reservoirs (the whole target, with the size of the fits' part), the record of
    peeled targets and the draws it makes are fit state: 2 laps + save/load + 4 laps == 6 laps
    with the default moves, and a file whose reservoirs predate ``fit_rows`` still loads and
    resumes."""
    import bnpcore

    X, _ = _covariance_mixture(3600, 32, 6)
    kw = dict(obs="gauss", n_components=1, algorithm="memoized", n_batches=3, random_state=0, tol=0)
    six = fit_quietly(DPMixture(max_laps=6, **kw), X)
    assert any(r["kind"] == "birth" and r["accepted"] for r in six.moves_log_)
    one = fit_quietly(DPMixture(max_laps=1, **kw), X)
    birth = next(m for m in one.moves_manager_.moves if m.kind == "birth")
    assert birth.reservoirs and all(r.fit_rows is not None and r.cap > r.fit_rows for r in birth.reservoirs.values())
    two = fit_quietly(DPMixture(max_laps=2, **kw), X)
    birth = next(m for m in two.moves_manager_.moves if m.kind == "birth")
    assert birth.peeled  # carried: the target peeled at lap 2 is not peeled again at its size
    assert_same_trajectory(resume_from_file(two, X, tmp_path / "m.npz", max_laps=4), six)
    # reservoirs saved before they had ``fit_rows`` resume (their fits use every collected row)
    old = bnpcore.load(tmp_path / "m.npz")
    state = old.state_.moves_state
    for _, res in state["moves"]["birth"]["reservoirs"]["__items__"]:
        n = len(res["__items__"])
        res["__items__"] = [kv for kv in res["__items__"] if kv[0] != "fit_rows"]
        assert len(res["__items__"]) == n - 1
    old.set_params(warm_start=True, max_laps=4)
    fit_quietly(old, X)
    assert old.history_["lap"][-1] == six.history_["lap"][-1]


def test_peel_fits_do_not_depend_on_the_thread_count():
    """A fit whose births are peels gives the same model with 1 and 2 threads (the peel's
    products run in numpy, its log-likelihoods in the kernels)."""
    X, _ = _covariance_mixture(3600, 32, 6)
    kw = dict(obs="gauss", n_components=1, algorithm="memoized", n_batches=3, random_state=0)
    one, two = (fit_quietly(DPMixture(n_threads=t, **kw), X) for t in (1, 2))
    assert any(r["kind"] == "birth" and r["accepted"] for r in one.moves_log_)
    assert np.array_equal(one.history_["elbo"], two.history_["elbo"]) and one.moves_log_ == two.moves_log_
    np.testing.assert_array_equal(one.means_, two.means_)


def test_which_targets_are_peeled():
    """A target is peeled when it may hide many clusters: the only cluster, or four times the
    median mass of the others, with room for 8 sets of 4 D rows; not after a failure at its
    size, and not again until its mass has more than doubled; never without peels."""
    from types import SimpleNamespace

    from bnpcore.moves.manager import MoveConfig, MoveManager
    from bnpcore.stats import SuffStats

    rng = np.random.default_rng(0)
    model = _model("gauss", rng.standard_normal((200, 32)))  # 8 sets of 4 D rows: 1,024

    def ctx(N):
        N = np.asarray(N, dtype=np.float64)
        return SimpleNamespace(model=model, G=SuffStats(N, np.zeros((N.size, 1)), np.zeros(N.size), 0.0, np.arange(N.size)))

    b = MoveManager(MoveConfig(kinds=("birth",)))._move("birth")
    assert b._peelable(ctx([5000.0]), 0, 5000.0)  # the only cluster
    assert not b._peelable(ctx([1000.0]), 0, 1000.0)  # too few rows for 8 sets
    assert b._peelable(ctx([4000.0, 1000.0, 900.0, 1000.0]), 0, 4000.0)
    assert not b._peelable(ctx([3900.0, 1000.0, 900.0, 1000.0]), 0, 3900.0)  # below 4 × median
    assert b._peelable(ctx([4000.0, 1000.0, 0.5, 0.5, 0.5]), 0, 4000.0)  # empty clusters do not count
    b.failures = {0: (1, 4000.0)}
    assert not b._peelable(ctx([4000.0, 1000.0]), 0, 4000.0)
    b.failures = {}
    b.peeled = {0: 4000.0}
    assert not b._peelable(ctx([7900.0, 1000.0]), 0, 7900.0)
    assert b._peelable(ctx([8100.0, 1000.0]), 0, 8100.0)  # more than doubled
    b.manager.options["birth_peel_seeds"] = 0
    assert not b._peelable(ctx([8100.0, 1000.0]), 0, 8100.0)
