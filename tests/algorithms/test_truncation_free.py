"""Truncation-free SVI (Wang & Blei 2012): the Rust minibatch kernels against the numpy
reference (same random stream), the samplers, the stochastic update, pruning, and the
``algorithm="truncation_free"`` estimators (spec P16, thread-count identity, persistence, bad
input)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import bnpcore
import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import DPMixture, FiniteMixture, HDPTopicModel, _core
from bnpcore._reference import tfsvi as ref
from bnpcore.algorithms.truncation_free import TFConfig, TFState, learning_rate, prune, tf_step
from bnpcore.datasets import make_bars
from bnpcore.exceptions import DataError, ParameterError
from hypothesis import given, settings
from hypothesis import strategies as st

# ----------------------------------------------------------------------------- random numbers


@pytest.mark.parametrize("seed", [0, 1, 2**63 + 5])
def test_generator_matches_reference(seed):
    r = ref.RefRng(seed)
    assert list(_core.tfsvi_rng_draws(seed, "u64", 20)) == [r.next_u64() for _ in range(20)]
    r = ref.RefRng(seed)
    assert np.array_equal(_core.tfsvi_rng_draws(seed, "normal", 50), [r.normal() for _ in range(50)])
    for a, b in [(0.05, 3.0), (1.0, 1.0), (40.0, 0.3)]:
        r = ref.RefRng(seed)
        assert np.array_equal(_core.tfsvi_rng_draws(seed, "beta", 30, a, b), [r.beta(a, b) for _ in range(30)])


@pytest.mark.parametrize(("n", "c"), [(1, 0.2), (7, 1.0), (60, 0.05), (300, 12.0)])
def test_antoniak_mean_and_support(n, c):
    """P16: the Antoniak sampler's mean matches Σ_i c/(c+i−1) (z-test at 5 standard errors,
    fixed seed); draws lie in [1, n]."""
    draws = _core.antoniak_draws(n, c, 20_000, 123).astype(np.float64)
    p = c / (c + np.arange(n))
    se = np.sqrt((p * (1 - p)).sum() / draws.size)
    assert abs(draws.mean() - p.sum()) <= 5 * se + 1e-12
    assert draws.min() >= 1 and draws.max() <= n
    assert _core.antoniak_draws(0, c, 5, 1).tolist() == [0] * 5


def test_antoniak_rejects_bad_concentration():
    with pytest.raises(ValueError, match="c"):
        _core.antoniak_draws(3, 0.0, 2, 0)


# ----------------------------------------------------------------------------- kernels vs reference


@st.composite
def _problem(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    D, V, T = draw(st.integers(1, 7)), draw(st.integers(1, 10)), draw(st.integers(0, 5))
    dense = rng.integers(0, 4, (D, V)) * (rng.random((D, V)) < 0.6)
    X = sp.csr_array(dense.astype(np.float64))
    mass = rng.gamma(1.0, 3.0, (T, V)) * (rng.random((T, V)) < 0.8)
    u = 1.0 + rng.gamma(1.0, 2.0, T)
    v = draw(st.floats(0.2, 5.0)) + rng.gamma(1.0, 5.0, T)
    docs = rng.permutation(D)[: draw(st.integers(1, D))].astype(np.int64)
    kw = dict(eta=draw(st.floats(0.01, 1.0)), gamma=draw(st.floats(0.1, 5.0)), n_sweeps=draw(st.integers(0, 3)), seed=seed)
    return X, docs, mass, mass.sum(axis=1), draw(st.floats(0.05, 3.0)), u, v, kw


@settings(max_examples=40, deadline=None)
@given(_problem(), st.floats(0.1, 5.0))
def test_hdp_kernel_equals_reference(problem, alpha):
    X, docs, mass, msum, scale, u, v, kw = problem
    got = _core.tfsvi_batch("hdp", X.indptr, X.indices, X.data, docs, mass, msum, scale, u, v, alpha=alpha, **kw)
    want = ref.hdp_batch(X, docs, mass, msum, scale, u, v, alpha=alpha, **kw)
    assert got["n_components"] == want["n_components"]
    for key in ("topic", "word", "count", "stick_counts", "tokens"):
        assert np.array_equal(got[key], want[key]), key
    # every token of the minibatch is assigned once; tables <= tokens, >= 1 where used
    assert got["count"].sum() == X[docs].sum()
    used = got["tokens"] > 0
    assert np.all(got["stick_counts"][used] >= 1) and np.all(got["stick_counts"] <= got["tokens"])


@settings(max_examples=40, deadline=None)
@given(_problem())
def test_dp_kernel_equals_reference(problem):
    X, docs, mass, msum, scale, u, v, kw = problem
    got = _core.tfsvi_batch("dp_mult", X.indptr, X.indices, X.data, docs, mass, msum, scale, u, v, **kw)
    want = ref.dp_mult_batch(X, docs, mass, msum, scale, u, v, **kw)
    for key in ("topic", "word", "count", "stick_counts", "tokens", "assignments"):
        assert np.array_equal(got[key], want[key]), key
    assert got["stick_counts"].sum() == docs.size


def test_kernels_are_thread_count_independent():
    """The DP kernel's per-component likelihoods run in parallel for large T × words, the HDP
    kernel's table counts per document: results are bit-identical for 1 and 2 threads."""
    rng = np.random.default_rng(4)
    D, V, T = 40, 300, 120
    X = sp.csr_array(rng.poisson(0.3, (D, V)).astype(np.float64))
    mass = rng.gamma(0.5, 2.0, (T, V))
    u, v = 1 + rng.gamma(1, 3, T), 1 + rng.gamma(1, 30, T)
    docs = np.arange(D, dtype=np.int64)
    for kind in ("hdp", "dp_mult"):
        outs = [
            _core.tfsvi_batch(kind, X.indptr, X.indices, X.data, docs, mass, mass.sum(1), 0.7, u, v, eta=0.1, gamma=1.0, seed=9, n_threads=n)
            for n in (1, 2)
        ]
        for key in ("topic", "word", "count", "stick_counts", "tokens"):
            assert np.array_equal(outs[0][key], outs[1][key])


def test_kernel_bad_input():
    X = sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]]))
    m, e = np.zeros((0, 2)), np.zeros(0)
    call = lambda **kw: _core.tfsvi_batch(  # noqa: E731
        kw.pop("kind", "hdp"), X.indptr, X.indices, kw.pop("data", X.data), kw.pop("docs", np.array([0, 1])), m, e, 1.0, e, e, eta=kw.pop("eta", 0.1), gamma=1.0
    )
    with pytest.raises(DataError, match="integer"):
        call(data=np.array([1.0, 2.5, 3.0]))
    with pytest.raises(DataError, match="integer"):
        call(data=np.array([1.0, -2.0, 3.0]))
    with pytest.raises(DataError):
        call(data=np.array([1.0, np.nan, 3.0]))
    with pytest.raises(DataError, match="docs"):
        call(docs=np.array([5]))
    with pytest.raises(ParameterError, match="eta"):
        call(eta=0.0)
    with pytest.raises(ParameterError, match="kind"):
        call(kind="lda")


# ----------------------------------------------------------------------------- the update


def test_learning_rate_schedule():
    assert learning_rate(10, 10, 1000) == 1.0
    assert learning_rate(10, 500, 1000) == pytest.approx(0.02)
    assert learning_rate(10, 1000, 1000) == pytest.approx(0.01)
    assert learning_rate(1000, 1000, 100) == 1.0


def test_first_step_and_growth_from_zero():
    """P16: from T = 0 the first minibatch opens components; with ρ = 1 the topics are
    λ = η + (D/S)·n exactly, and λ ≥ η everywhere."""
    X, _ = make_bars(n_docs=60, random_state=0)
    X = sp.csr_array(X)
    cfg = TFConfig(kind="hdp", eta=0.05, gamma=1.0, alpha=1.0, batch_size=20, n_sweeps=2)
    state = TFState.empty(X.shape[1])
    out = tf_step(state, X, np.arange(20), 60, cfg, seed=3)
    assert out["rho"] == 1.0 and state.n_components == out["n_components"] > 0
    dense = np.zeros_like(state.mass)
    np.add.at(dense, (out["topic"], out["word"]), out["count"])
    assert np.allclose(state.scale * state.mass, 3.0 * dense, rtol=1e-12, atol=0)
    assert np.all(state.mass >= 0)
    c = out["stick_counts"]
    assert np.allclose(state.u, 1 + 3 * c) and np.allclose(state.v, 1.0 + 3 * (c.sum() - np.cumsum(c)))
    # second step: ρ = S / n_seen = 1/2
    out2 = tf_step(state, X, np.arange(20, 40), 60, cfg, seed=4)
    assert out2["rho"] == pytest.approx(0.5)


def test_prune_removes_small_and_reorders():
    cfg = TFConfig(kind="hdp", eta=0.1, gamma=2.0, alpha=1.0, batch_size=1)
    mass = np.array([[0.3, 0.2, 0.0], [5.0, 1.0, 0.0], [0.0, 0.0, 9.0]])
    state = TFState(mass, mass.sum(1), 1.0, np.array([1.5, 3.0, 7.0]), np.ones(3), np.arange(3))
    assert prune(state, cfg) == 1
    assert state.uids.tolist() == [2, 1]  # by decreasing u − 1
    assert np.allclose(state.v, [2.0 + 2.0, 2.0])
    assert np.all(state.mass_sum >= 1)


# ----------------------------------------------------------------------------- estimators


@pytest.fixture(scope="module")
def bars():
    X, _ = make_bars(n_docs=150, random_state=0)
    Xt, _ = make_bars(n_docs=40, random_state=1)
    return X, Xt


def _hdp(**kw):
    base = dict(algorithm="truncation_free", batch_size=25, max_laps=2, random_state=0, gamma=1.0, alpha=1.0)
    base.update(kw)
    return HDPTopicModel(**base)


def test_hdp_grows_from_zero_and_prunes(bars):
    """P16 on toy bars: topics grow from zero, every kept topic has at least one expected
    word after the last pass's pruning, λ ≥ η."""
    X, Xt = bars
    m = _hdp(max_laps=3).fit(X, eval_X=Xt)
    assert m.n_components_ >= 5
    assert np.all(m.counts_ >= 1.0)
    assert np.all(m.components_ >= m.prior_count)
    assert np.isnan(m.elbo_) and np.all(np.isnan(m.history_["elbo"]))
    assert np.all(np.isfinite(m.history_["score"])) and len(m.history_["score"]) == 3
    theta = m.transform(Xt)
    assert theta.shape == (Xt.shape[0], m.n_components_) and np.allclose(theta.sum(1), 1)
    assert 0 < m.topic_weights_.sum() < 1
    assert np.isfinite(m.score(Xt))


def test_hdp_thread_count_and_warm_start_identity(bars, tmp_path):
    X, _ = bars
    a = _hdp(n_threads=1, max_laps=4).fit(X)
    b = _hdp(n_threads=2, max_laps=4).fit(X)
    assert np.array_equal(a.components_, b.components_) and np.array_equal(a.topic_weights_, b.topic_weights_)
    c = _hdp(n_threads=2, max_laps=2, checkpoint_path=str(tmp_path / "ck.npz")).fit(X)
    c = bnpcore.load(tmp_path / "ck.npz")
    c.set_params(warm_start=True, max_laps=2, checkpoint_path=None)
    c.fit(X)
    assert np.array_equal(a.components_, c.components_)
    assert c.history_["lap"].tolist() == [1, 2, 3, 4]


def test_dp_mult_truncation_free():
    rng = np.random.default_rng(0)
    K, V = 6, 40
    phi = rng.dirichlet(np.full(V, 0.1), K)
    z = rng.integers(K, size=600)
    X = np.stack([rng.multinomial(25, phi[k]) for k in z]).astype(np.float64)
    m = DPMixture(obs="mult", algorithm="truncation_free", batch_size=20, max_laps=3, random_state=1).fit(X[:500], eval_X=X[500:])
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(z[:500], m.predict(X[:500])) > 0.95
    assert np.all(m.counts_ >= 1.0)
    assert np.all(np.isfinite(m.history_["score"]))
    # the DP allocation model reads the fitted sticks exactly: w_k = E[π_k] under Beta(u, v)
    u, v = m.summaries_["tf_u"], m.summaries_["tf_v"]
    mean = u / (u + v)
    w = mean * np.concatenate([[1.0], np.cumprod(1 - mean)[:-1]])
    assert np.allclose(m.weights_, w / w.sum(), rtol=1e-12)
    # sparse input gives the same model; two threads too
    s = DPMixture(obs="mult", algorithm="truncation_free", batch_size=20, max_laps=3, random_state=1, n_threads=2).fit(sp.csr_matrix(X[:500]))
    assert np.array_equal(s.means_, m.means_)


def test_partial_fit_streams(bars):
    X, _ = bars
    X = sp.csr_array(X)
    m = _hdp()
    for lo in range(0, 150, 50):
        m.partial_fit(X[lo : lo + 50])
    assert m.n_components_ >= 3 and len(m.history_["lap"]) == 3
    assert m.state_.truncation_free["n_seen"] == 150
    with pytest.raises(ValueError, match="has 901 features, but it is expecting 900 features"):
        m.partial_fit(sp.csr_array(np.ones((2, X.shape[1] + 1))))
    # an iterator of batches is a stream
    s = _hdp().fit(iter([X[:75], X[75:]]))
    assert s.n_iter_ == 2 and s.n_components_ >= 3


def test_save_load_predicts_identically(bars, tmp_path):
    X, Xt = bars
    m = _hdp().fit(X)
    m.save(tmp_path / "m.npz")
    r = bnpcore.load(tmp_path / "m.npz")
    assert np.array_equal(r.transform(Xt), m.transform(Xt))
    assert r.score(Xt) == m.score(Xt)
    assert r.get_params()["algorithm"] == "truncation_free"


def test_bad_input_and_parameters(bars):
    X, _ = bars
    Xf = sp.csr_array(X, dtype=np.float64, copy=True)
    Xf.data[0] = 0.5
    with pytest.raises(DataError, match="integer"):
        _hdp().fit(Xf)
    with pytest.raises(DataError, match="integer"):
        DPMixture(obs="mult", algorithm="truncation_free").fit(np.array([[1.0, 0.5], [2.0, 1.0]]))
    with pytest.raises(ValueError):
        DPMixture(obs="mult", algorithm="truncation_free").fit(np.array([[1.0, -1.0], [2.0, 1.0]]))
    with pytest.raises(ValueError):
        DPMixture(obs="mult", algorithm="truncation_free").fit(np.array([[1.0, np.nan], [2.0, 1.0]]))
    with pytest.raises(ParameterError, match="obs='mult'"):
        DPMixture(obs="gauss", algorithm="truncation_free").fit(np.ones((5, 2)))
    with pytest.raises(ParameterError, match="algorithm"):
        FiniteMixture(obs="mult", algorithm="truncation_free").fit(np.ones((5, 2)))
    with pytest.raises(ParameterError, match="moves"):
        _hdp(moves=("merge",)).fit(X)
    with pytest.raises(ParameterError, match="batch_size"):
        _hdp(batch_size=0).fit(X)
    with pytest.raises(ParameterError, match="backend"):
        _hdp(backend="dask").fit(X)
    with pytest.raises(DataError, match="no words"):
        _hdp().fit(sp.csr_array((3, 5)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.exceptions.ConvergenceWarning)
        m = HDPTopicModel(max_laps=2, random_state=0).fit(X)
    m.set_params(algorithm="truncation_free", warm_start=True)
    with pytest.raises(ParameterError, match="warm_start"):
        m.fit(X)


def test_eval_X_for_other_algorithms(bars):
    X, Xt = bars
    m = HDPTopicModel(max_laps=3, tol=1e-30, min_laps=3, random_state=0)
    with pytest.warns(bnpcore.exceptions.ConvergenceWarning):
        m.fit(X, eval_X=Xt)
    assert m.history_["score"].shape == m.history_["lap"].shape
    assert np.all(np.isfinite(m.history_["score"]))


def _bow(X):
    X = sp.csr_array(X)
    return [list(zip(X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(), X.data[X.indptr[i] : X.indptr[i + 1]].tolist())) for i in range(X.shape[0])]


@pytest.mark.parametrize("algorithm", ["memoized", "truncation_free"])
def test_eval_X_is_checked_before_the_first_lap_and_read_once(bars, algorithm):
    """``eval_X`` errors name it and come before any lap; a one-shot iterator of held-out
    documents is scored after every lap (converted once), as the same documents given as CSR."""
    X, Xt = bars
    kw = dict(algorithm=algorithm, max_laps=3, min_laps=3, tol=1e-30, random_state=0, batch_size=25)
    laps = []
    bad_word = [[(int(X.shape[1]) + 3, 1)]]
    with pytest.raises(DataError, match=r"`eval_X`: document 0 has word id 903"):
        HDPTopicModel(callback=lambda *a: laps.append(1), **kw).fit(X, eval_X=bad_word)
    with pytest.raises(DataError, match=r"`eval_X`"):
        HDPTopicModel(callback=lambda *a: laps.append(1), **kw).fit(X, eval_X=sp.csr_array(np.full((2, X.shape[1]), -1.0)))
    assert not laps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.exceptions.ConvergenceWarning)
        a = HDPTopicModel(**kw).fit(X, eval_X=Xt)
        b = HDPTopicModel(**kw).fit(X, eval_X=iter(_bow(Xt)))
    assert len(a.history_["score"]) == 3 and np.all(np.isfinite(a.history_["score"]))
    np.testing.assert_array_equal(b.history_["score"], a.history_["score"])


def test_mixture_eval_X_is_checked_before_the_first_lap():
    X = np.random.default_rng(0).normal(size=(120, 3))
    m = DPMixture(n_components=2, max_laps=3)
    with pytest.raises(bnpcore.exceptions.ShapeError, match=r"^eval_X has 2 features"):
        m.fit(X, eval_X=X[:, :2])
    assert not hasattr(m, "summaries_")  # no lap ran
    with pytest.raises(bnpcore.exceptions.NonFiniteError, match="`eval_X` contains NaN"):
        DPMixture(n_components=2, max_laps=3).fit(X, eval_X=np.array([[np.nan, 1.0, 2.0]]))
    with pytest.raises(DataError, match="`eval_X`"):
        DPMixture(obs="mult", n_components=2, max_laps=3).fit(np.ones((20, 3)), eval_X=np.full((2, 3), 0.5))


def test_batches_the_sampler_cannot_hold_are_refused_up_front():
    """The sampler keeps a topic for every token: a document or a batch of more than
    ``TF_MAX_BATCH_TOKENS`` tokens is refused before any work, naming ``X`` (from the
    estimators) or the kernel's ``data`` (the kernel's own check), instead of allocating
    16 bytes per token."""
    limit = int(_core.TF_MAX_BATCH_TOKENS)
    huge = sp.csr_array(([3e9, 1.0], ([0, 0], [0, 1])), shape=(1, 900))
    for est in (_hdp(), DPMixture(obs="mult", algorithm="truncation_free", max_laps=1)):
        with pytest.raises(DataError, match=r"`X`: document 0 holds 3000000001 tokens"):
            est.fit(huge)
    heavy = sp.csr_array(np.full((6, 3), limit / 12 + 1.0).round())  # each document a quarter of the bound
    with pytest.raises(DataError, match=r"`X`: its 5 largest documents hold .* lower `batch_size`"):
        _hdp(batch_size=5).fit(heavy)
    with pytest.raises(DataError, match=r"its 5 largest documents"):
        _hdp(batch_size=5).partial_fit(heavy)
    from bnpcore.algorithms.truncation_free import check_batch_tokens

    check_batch_tokens(heavy, 3)  # three documents per batch fit under the bound
    with pytest.raises(DataError, match="4 largest"):
        check_batch_tokens(heavy, 4)
    # the kernel's own check, for callers of the extension
    mass = np.ones((1, 900))
    with pytest.raises(DataError, match="document 0 holds 3000000001 tokens"):
        _core.tfsvi_batch("hdp", huge.indptr, huge.indices, huge.data, np.array([0]), mass, mass.sum(1), 1.0, np.ones(1), np.ones(1), eta=0.1, gamma=1.0)
    over = sp.csr_array(np.full((2, 1), limit / 2 + 1.0).round())
    with pytest.raises(DataError, match="a batch of 2 documents holds more than"):
        _core.tfsvi_batch("hdp", over.indptr, over.indices, over.data, np.array([0, 1]), np.ones((1, 1)), np.ones(1), 1.0, np.ones(1), np.ones(1), eta=0.1, gamma=1.0)


def test_eval_X_is_scored_after_the_lap_of_a_one_shot_stream(bars):
    """``fit`` of an iterator of batches is one streaming lap: ``eval_X`` is scored after it,
    as after every lap of ``fit`` on revisitable data; ``partial_fit`` records no score."""
    X, Xt = bars
    X = sp.csr_array(X)
    m = HDPTopicModel(random_state=0).fit(iter([X[:60], X[60:]]), eval_X=Xt)
    assert m.history_["score"].shape == (1,) and m.history_["score"][0] == m.score(Xt)
    R = np.random.default_rng(0).normal(size=(90, 2))
    d = DPMixture(n_components=2).fit(iter([R[:40], R[40:70]]), eval_X=R[70:])
    assert d.history_["score"].tolist() == [d.score(R[70:])]
    assert "score" not in DPMixture(n_components=2).partial_fit(R[:40]).history_
    with pytest.raises(bnpcore.exceptions.ShapeError, match=r"^eval_X has 1 features"):
        DPMixture(n_components=2).fit(iter([R[:40], R[40:70]]), eval_X=R[70:, :1])


_FORK_SCRIPT = """
import hashlib, multiprocessing as mp, warnings
import numpy as np, scipy.sparse as sp
from bnpcore import DPMixture, HDPTopicModel

warnings.simplefilter("ignore")
# 80 documents in minibatches of 70: ~70 clusters after the first, then a minibatch of 10
X = sp.csr_array(np.random.default_rng(0).poisson(0.5, size=(80, 2000)).astype(float))

def fit(cls, **kw):
    m = cls(algorithm="truncation_free", batch_size=70, max_laps=1, random_state=0, **kw).fit(X)
    fitted = m.means_ if hasattr(m, "means_") else m.topics_
    return [m.n_components_, hashlib.sha256(m.counts_.tobytes() + fitted.tobytes()).hexdigest()]

def both():
    return [fit(DPMixture, obs="mult"), fit(HDPTopicModel)]

def child(q):
    q.put(both())

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    runs = {}
    for parent_fits in (False, True):
        if parent_fits:
            runs["parent"] = both()
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        p.join(60)
        if p.is_alive():
            p.kill()
            print("child hung")
            raise SystemExit(1)
        runs["child after fit" if parent_fits else "child before fit"] = q.get(timeout=5)
    assert runs["parent"] == runs["child before fit"] == runs["child after fit"], runs
    print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_after_a_fit_fits_small_minibatches_as_its_parent(tmp_path):
    """A DP mixture's minibatch of fewer than 16 documents used to split its per-component
    loops in rayon's global pool, which a forked child inherits without threads: a child
    forked (multiprocessing's default on Linux) after such a fit hung on its own fit. It now
    runs in bnpcore's pool, renewed in the child: children forked before and after the
    parent's fits give the parent's results. A fresh interpreter, with timeouts."""
    script = tmp_path / "fork_after_fit.py"
    script.write_text(_FORK_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")


def test_a_raising_callback_leaves_the_passes_it_completed(bars, tmp_path):
    """A callback that raises after the second pass: the exception propagates unchanged and
    the estimator reports the two completed passes (n_iter_ used to be unset), stays usable
    and saveable, as the memoized algorithms leave it."""
    X, _ = bars

    def boom(model, info):
        if info["lap"] == 2:
            raise KeyError("stop here")

    est = HDPTopicModel(algorithm="truncation_free", max_laps=5, random_state=0, callback=boom)
    with pytest.raises(KeyError, match="stop here"):
        est.fit(X)
    assert est.n_iter_ == 2 and est.converged_ is False
    assert np.allclose(est.transform(X[:3]).sum(axis=1), 1.0)
    est.save(tmp_path / "m.npz")
    assert bnpcore.load(tmp_path / "m.npz").n_iter_ == 2
