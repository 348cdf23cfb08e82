"""scipy.sparse rows for the mixtures of count vectors (issue 14 item 3): kept CSR into the Rust
local step (O(nnz K) per step), the same fit as the dense array, bounded memory."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import DPMixture
from bnpcore.data.sources import SPARSE_INIT_ENTRIES
from bnpcore.exceptions import ConvergenceWarning, DataError


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X)


def _corpus(n=300, V=400, K=3, seed=0, binary=False):
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.05), size=K)
    z = rng.integers(K, size=n)
    X = np.stack([rng.multinomial(30, topics[k]) for k in z]).astype(float)
    if binary:
        X = (X > 0).astype(float)
    return X, z


@pytest.mark.parametrize("obs", ["mult", "bern"])
@pytest.mark.parametrize("fmt", ["csr_array", "csr_matrix", "csc", "coo"])
def test_sparse_fit_equals_dense_fit(obs, fmt):
    X, _ = _corpus(binary=obs == "bern")
    S = {"csr_array": sp.csr_array, "csr_matrix": sp.csr_matrix, "csc": sp.csc_array, "coo": sp.coo_array}[fmt](X)
    kw = dict(obs=obs, n_components=3, algorithm="memoized", n_batches=3, max_laps=8, random_state=0)
    a = _fit(DPMixture(**kw), X)
    b = _fit(DPMixture(**kw), S)
    np.testing.assert_allclose(b.history_["elbo"], a.history_["elbo"], rtol=1e-10)
    assert np.array_equal(a.predict(X), b.predict(S))
    np.testing.assert_allclose(b.predict_proba(S), a.predict_proba(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b.score_samples(S), a.score_samples(X), rtol=1e-10)


@pytest.mark.parametrize("obs", ["mult", "bern"])
def test_the_local_step_takes_csr_rows_without_densifying(obs, monkeypatch):
    """The Rust local step reads the CSR arrays themselves (toarray/todense patched to fail) and
    gives the dense step's outputs, with moves' statistics and L-sparse rows; fits are
    bit-identical for one and two threads."""
    X, _ = _corpus(n=200, V=50, seed=3, binary=obs == "bern")
    S = sp.csr_array(X)
    kw = dict(obs=obs, n_components=4, algorithm="memoized", n_batches=2, max_laps=6, tol=0, random_state=1)
    a = _fit(DPMixture(n_threads=1, **kw), S)
    b = _fit(DPMixture(n_threads=2, **kw), S)
    assert np.array_equal(a.history_["elbo"], b.history_["elbo"])
    model = a._make_model(a.obs_model_)
    opts = dict(merge_pairs=[(0, 1)], collect_cols=[0], cooccur_col=1, return_resp=True)
    dense = model.local_step(X, a.summaries_, **opts)

    def boom(self, *args, **kwargs):
        raise AssertionError("the local step densified a sparse batch")

    for cls in (sp.csr_array, sp.csr_matrix):
        monkeypatch.setattr(cls, "toarray", boom)
        monkeypatch.setattr(cls, "todense", boom)
    for fmt in (sp.csr_array, sp.csr_matrix):
        out = model.local_step(fmt(X), a.summaries_, **opts)
        for key in ("N", "S", "H", "pair_H", "cols", "cooccur", "resp"):
            np.testing.assert_allclose(out[key], dense[key], rtol=1e-10, atol=1e-12, err_msg=key)
        np.testing.assert_allclose(out["lse_sum"], dense["lse_sum"], rtol=1e-12)
        np.testing.assert_allclose(model.score_samples(fmt(X), a.summaries_), model.score_samples(X, a.summaries_), rtol=1e-12)
    sparse_l = model.local_step(S, a.summaries_, top_l=2, return_resp=True)
    dense_l = model.local_step(X, a.summaries_, top_l=2, return_resp=True)
    assert np.array_equal(sparse_l["resp_idx"], dense_l["resp_idx"])
    np.testing.assert_allclose(sparse_l["S"], dense_l["S"], rtol=1e-10)


def test_wide_sparse_corpus_is_never_densified(monkeypatch):
    """The issue's case: 2,000 x 20,000 counts with ~80,000 non-zeros (1 MB). No dense copy but
    the bounded initialisation sample is ever made (local steps and scores read the CSR arrays),
    and the traced peak memory of the fit stays far below the 320 MB of a dense copy."""
    rng = np.random.default_rng(0)
    n, V = 2000, 20000
    rows = np.repeat(np.arange(n), 40)
    cols = rng.integers(0, V, size=rows.size)
    S = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, V))
    S.sum_duplicates()
    largest = []
    orig = sp.csr_array.toarray

    def tracked(self, *a, **k):
        largest.append(self.shape[0] * self.shape[1])
        return orig(self, *a, **k)

    monkeypatch.setattr(sp.csr_array, "toarray", tracked)
    tracemalloc.start()
    try:
        m = _fit(DPMixture(obs="mult", n_components=2, moves=(), max_laps=3, random_state=0), S)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert m.n_features_in_ == V and np.isfinite(m.elbo_)
    assert max(largest) <= max(SPARSE_INIT_ENTRIES, 256 * V) < n * V  # only the initialisation subsample
    assert peak < 120e6, peak


def test_bad_sparse_rows_are_clear_errors():
    X, _ = _corpus(n=50, V=20)
    bad = sp.csr_array(X)
    bad.data[0] = -1.0
    with pytest.raises(DataError, match="non-negative"):
        DPMixture(obs="mult").fit(bad)
    frac = sp.csr_array(X)
    frac.data[0] = 0.5
    with pytest.raises(DataError, match="integer"):
        DPMixture(obs="mult").fit(frac)
    with pytest.raises(DataError, match="binary"):
        DPMixture(obs="bern").fit(sp.csr_array(X))
    with pytest.raises(DataError, match="dense"):
        DPMixture(obs="gauss").fit(sp.csr_array(X))


class _Reiterable:
    """A re-iterable collection of batches (a new pass on every ``iter``)."""

    def __init__(self, parts):
        self.parts = parts

    def __iter__(self):
        return iter(self.parts)


@pytest.mark.parametrize("obs", ["mult", "bern"])
@pytest.mark.parametrize("wrap", [list, _Reiterable])
def test_batches_of_sparse_rows_fit_like_dense_batches_and_stay_sparse(obs, wrap):
    """A list (or re-iterable) of scipy.sparse batches, in mixed formats: the fit of the same
    batches given dense, and every batch reaches the local step as CSR rows."""
    X, _ = _corpus(n=240, V=60, seed=5, binary=obs == "bern")
    kw = dict(obs=obs, n_components=3, algorithm="memoized", max_laps=5, random_state=0)
    a = _fit(DPMixture(**kw), [X[:80], X[80:170], X[170:]])
    parts = [sp.csr_matrix(X[:80]), sp.coo_array(X[80:170]), sp.csc_matrix(X[170:])]
    b = _fit(DPMixture(**kw), wrap(parts))
    np.testing.assert_allclose(b.history_["elbo"], a.history_["elbo"], rtol=1e-10)
    src = b._make_source(wrap(parts))
    for i, (lo, hi) in enumerate([(0, 80), (80, 170), (170, 240)]):
        batch = src.get(i)
        assert sp.issparse(batch) and batch.format == "csr"
        np.testing.assert_array_equal(batch.toarray(), X[lo:hi])


@pytest.mark.parametrize("wrap", [list, _Reiterable])
def test_gaussian_mixture_refuses_batches_of_sparse_rows(wrap):
    X = np.random.default_rng(0).standard_normal((40, 3))
    with pytest.raises(DataError, match=r"obs='gauss' needs dense batches; batch 1 of `X` is a scipy.sparse matrix"):
        DPMixture(obs="gauss", n_components=2, algorithm="memoized").fit(wrap([X[:20], sp.csr_array(X[20:])]))
