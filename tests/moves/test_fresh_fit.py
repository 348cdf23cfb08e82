"""The birth's fresh-cluster fit (``bnpcore.moves.birth.fit_fresh_clusters``, one Rust call)
against its oracle (``bnpcore._reference.birth``: the same algorithm on the numpy reference
only, no core kernel and no production model code), thread independence, random-stream use and
bad input.

Tolerance: N and S to 1e-8 relative (S: relative to its largest entry), the gain to 1e-8 times
the size of the weighted-subsample ELBO (the sum of the absolute values of its terms for one
cluster, at least ``max(1, Σw)``): small-scale Gaussian data have large log-densities, and the
gain is a difference of two such ELBOs. Data are drawn at scales 1e-3, 1
and 1e3 around the origin with data-scaled priors; far from the origin (offsets ~1e3 × spread)
the raw-moment summaries lose digits to cancellation in *both* implementations and a
single-component subsample (a flat split direction) amplifies that over the iterations.
"""

import numpy as np
import pytest
from _helpers import KINDS, synthetic_data
from bnpcore import _core
from bnpcore._reference.birth import fit_fresh_clusters as ref_fit
from bnpcore.alloc import DPAlloc, FiniteAlloc
from bnpcore.exceptions import NonFiniteError, ParameterError, ShapeError
from bnpcore.model import Model
from bnpcore.moves.birth import fit_fresh_clusters
from bnpcore.obs import ObsModel
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st


def _problem(kind, alloc, gamma, n, n_clusters, d, scale, seed):
    X, _ = synthetic_data(kind, n=n, n_clusters=n_clusters, seed=seed, D=d)
    if "gauss" in kind:
        X = X * scale
    rng = np.random.default_rng(seed + 1)
    w = rng.uniform(0.0, 2.0, n) * (rng.random(n) > 0.1)  # some rows carry no weight
    model = Model(DPAlloc(gamma) if alloc == "dp" else FiniteAlloc(gamma), ObsModel.from_data(kind, X))
    return model, np.ascontiguousarray(X), w


def oracle(model, X, w, n_fresh, rng, **kw):
    """The numpy oracle with the model's kind, prior and allocation (plain values only)."""
    alloc = "dp" if isinstance(model.alloc, DPAlloc) else "finite"
    return ref_fit(model.obs.kind, model.obs.prior, alloc, model.alloc.gamma, X, w, n_fresh, rng, **kw)


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_building_blocks_equal_the_reference_and_the_core(kind):
    """The oracle's vectorised E log-likelihood equals the row-by-row reference, and its
    k-means++ seeding picks the core's rows for the same uniforms."""
    import bnpcore._reference as ref
    from bnpcore._reference.birth import e_log_lik_rows, kmeanspp

    model, X, _w = _problem(kind, "dp", 1.0, 40, 3, 3 if "gauss" in kind else 6, 1.0, 4)
    prior = model.obs.prior
    rng = np.random.default_rng(0)
    N, S = ref.summarize(kind, X, rng.dirichlet(np.ones(3), size=X.shape[0]))
    want = ref.e_log_lik(kind, prior, N, S, X)
    np.testing.assert_allclose(e_log_lik_rows(kind, prior, N, S, X), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    u = rng.random(5)
    assert kmeanspp(kind, prior, X, u) == list(model.obs.core.kmeanspp(X, u))


def _elbo_size(model, X, w):
    from bnpcore.stats import SuffStats

    N1, S1 = model.obs.core.summarize(X, w[:, None])
    terms = model.elbo_terms(SuffStats(N1, S1, np.zeros(1), 0.0, np.zeros(1, dtype=np.int64)))
    return max(1.0, float(w.sum()), sum(abs(v) for v in terms.values()))


def _assert_same_fit(got, want, w, size):
    if want[0] is None:
        assert got[0] is None and got[1] is None and got[2] == -np.inf
        return
    assert got[0] is not None, "the oracle found fresh clusters, the kernel none"
    N, S, gain = got
    N0, S0, gain0 = want
    assert N.shape == N0.shape and S.shape == S0.shape
    np.testing.assert_allclose(N, N0, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(S, S0, rtol=1e-8, atol=1e-8 * np.abs(S0).max())
    assert abs(gain - gain0) <= 1e-8 * size, (gain, gain0, size)
    assert np.all(N >= 1.0) and np.all(np.diff(N) <= 0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alloc", ["dp", "finite"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_oracle_on_clustered_subsamples(kind, alloc, seed):
    model, X, w = _problem(kind, alloc, 1.5, 400, 4, 3 if "gauss" in kind else None, 1.0, seed)
    kw = {"n_seeds": 5, "iters": 20, "kmeans_iters": 10}
    got = fit_fresh_clusters(model, X, w, 3, np.random.default_rng(seed), **kw)
    want = oracle(model, X, w, 3, np.random.default_rng(seed), **kw)
    assert want[0] is not None and len(want[0]) >= 2  # four separated groups: a split is found
    _assert_same_fit(got, want, w, _elbo_size(model, X, w))


CASES = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from(["dp", "finite"]),
    st.floats(0.2, 10.0),  # gamma
    st.integers(1, 600),  # n
    st.integers(1, 5),  # clusters in the subsample
    st.integers(1, 4),  # d (discrete models: d + 3 columns)
    st.sampled_from([1e-3, 1.0, 1e3]),  # data scale (Gaussians)
    st.integers(0, 2**31 - 1),  # seed
)
OPTS = st.tuples(
    st.integers(2, 4),  # n_fresh
    st.integers(0, 6),  # n_seeds
    st.integers(0, 25),  # iters
    st.integers(0, 12),  # kmeans_iters
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CASES, OPTS)
@example(("gauss", "dp", 1.0, 4, 1, 4, 1e-3, 0), (2, 0, 0, 0))  # small scale: gains differ by 1e-9 of the ELBO
def test_matches_oracle(case, opts):
    kind, alloc, gamma, n, n_clusters, d, scale, seed = case
    n_fresh, n_seeds, iters, kmeans_iters = opts
    model, X, w = _problem(kind, alloc, gamma, n, n_clusters, d if "gauss" in kind else d + 3, scale, seed % 10_000)
    kw = {"n_seeds": n_seeds, "iters": iters, "kmeans_iters": kmeans_iters}
    rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
    got = fit_fresh_clusters(model, X, w, n_fresh, rng_a, **kw)
    want = oracle(model, X, w, n_fresh, rng_b, **kw)
    _assert_same_fit(got, want, w, _elbo_size(model, X, w))
    # both drew the same uniforms from the stream
    assert rng_a.bit_generator.state == rng_b.bit_generator.state


@pytest.mark.parametrize("kind", KINDS)
def test_bit_identical_for_one_and_two_threads(kind):
    model, X, w = _problem(kind, "dp", 1.0, 3000, 3, 3 if "gauss" in kind else None, 1.0, 7)
    one = fit_fresh_clusters(model, X, w, 3, np.random.default_rng(3), n_seeds=4, n_threads=1)
    two = fit_fresh_clusters(model, X, w, 3, np.random.default_rng(3), n_seeds=4, n_threads=2)
    assert one[0] is not None
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1]) and one[2] == two[2]


def test_draws_exactly_the_seed_uniforms():
    model, X, w = _problem("gauss", "dp", 1.0, 50, 2, 2, 1.0, 0)
    rng = np.random.default_rng(5)
    fit_fresh_clusters(model, X, w, 3, rng, n_seeds=4)
    expect = np.random.default_rng(5)
    expect.random(4)  # J = min(max(3, 4), 50 // 2)
    assert rng.bit_generator.state == expect.bit_generator.state
    # fewer than four rows: nothing is fitted and nothing is drawn
    rng = np.random.default_rng(5)
    assert fit_fresh_clusters(model, X[:3], w[:3], 3, rng) == (None, None, -np.inf)
    assert rng.bit_generator.state == np.random.default_rng(5).bit_generator.state


def test_bad_input_raises_naming_the_argument():
    model, X, w = _problem("diag_gauss", "dp", 1.0, 60, 2, 2, 1.0, 0)
    rng = np.random.default_rng

    def fit(X=X, w=w, n_fresh=3, **kw):
        return fit_fresh_clusters(model, X, w, n_fresh, rng(0), **kw)

    for bad in (np.where(np.arange(60) == 4, -1.0, w), np.where(np.arange(60) == 4, np.nan, w), np.where(np.arange(60) == 4, np.inf, w)):
        with pytest.raises(ParameterError, match="`w`"):
            fit(w=bad)
    with pytest.raises(ShapeError, match="`w`"):
        fit(w=w[:-1])
    with pytest.raises(ShapeError, match="`w`"):
        fit(w=w[:, None])
    with pytest.raises(ShapeError, match="`X`"):
        fit(X=X[:, 0])
    with pytest.raises(ShapeError, match="`X`"):
        fit(X=X[:, :1])
    with pytest.raises(NonFiniteError):
        fit(X=np.where(np.arange(60)[:, None] == 2, np.nan, X))
    for n_fresh in (1, 0):
        with pytest.raises(ParameterError, match="n_fresh"):
            fit(n_fresh=n_fresh)
    with pytest.raises(ParameterError, match="iters"):
        fit(iters=-1)
    with pytest.raises(ParameterError, match="kmeans_iters"):
        fit(kmeans_iters=-2)
    # the binding's own arguments
    core = model.obs.core
    args = (core, X, w, _core.Alloc("dp", 1.0), np.full(3, 0.5), 3, 3, 20, 10)
    with pytest.raises(ShapeError, match="uniforms"):
        _core.fit_fresh_clusters(*args[:4], np.full(2, 0.5), *args[5:])
    with pytest.raises(ParameterError, match="uniforms"):
        _core.fit_fresh_clusters(*args[:4], np.array([0.5, 1.0, 0.2]), *args[5:])
    with pytest.raises(ParameterError, match="alloc"):
        _core.fit_fresh_clusters(core, X, w, _core.Alloc("pitman_yor", 1.0), *args[4:])
    with pytest.raises(ParameterError, match="gamma"):
        _core.fit_fresh_clusters(core, X, w, _core.Alloc("finite", -1.0), *args[4:])
    with pytest.raises(ParameterError, match="n_threads"):
        _core.fit_fresh_clusters(*args, n_threads=0)
    # valid arguments: the binding returns the oracle's fit for the same uniforms
    got = _core.fit_fresh_clusters(*args)

    class FixedUniforms:
        def random(self, n):
            return np.full(n, 0.5)

    want = oracle(model, X, w, 3, FixedUniforms(), n_seeds=3, iters=20, kmeans_iters=10)
    assert len(got) == 3
    _assert_same_fit(tuple(got), want, w, _elbo_size(model, X, w))
