"""scipy.sparse X: never densified silently. Gaussian mixtures refuse it with a clear error;
mult/bern mixtures densify it in one marked function (until the Rust CSR kernel serves them)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import DPMixture, FiniteMixture
from bnpcore._validation import DENSIFIED_SPARSE_OBS, check_array, densify_sparse_for_dense_kernel
from bnpcore.exceptions import BnpcoreError, ConvergenceWarning, DataError

GAUSSIANS = ("gauss", "diag_gauss", "zero_mean_gauss")
SPARSE = [sp.csr_array, sp.csr_matrix, sp.csc_matrix, sp.coo_array]


def counts(n=60, d=6, seed=0):
    return np.random.default_rng(seed).poisson(0.7, size=(n, d)).astype(float)


@pytest.mark.parametrize("obs", GAUSSIANS)
@pytest.mark.parametrize("fmt", SPARSE)
def test_gaussian_models_refuse_sparse_x_without_densifying(obs, fmt, monkeypatch):
    X = fmt(counts())
    monkeypatch.setattr(type(X), "toarray", lambda self, *a, **k: pytest.fail("densified"))
    with pytest.raises(DataError) as info:
        check_array(X, name="X", obs=obs)
    msg = str(info.value)
    assert isinstance(info.value, BnpcoreError) and isinstance(info.value, ValueError)
    assert f"obs={obs!r} needs dense `X`; got a scipy.sparse matrix of shape (60, 6): use X.toarray() if it fits in memory" in msg


@pytest.mark.parametrize("obs", [*DENSIFIED_SPARSE_OBS, None])
@pytest.mark.parametrize("fmt", SPARSE)
def test_count_models_densify_in_one_place(obs, fmt, monkeypatch):
    dense = counts() > 0 if obs == "bern" else counts()
    X = fmt(dense.astype(float))
    calls = []
    import bnpcore._validation as validation

    orig = validation.densify_sparse_for_dense_kernel
    monkeypatch.setattr(validation, "densify_sparse_for_dense_kernel", lambda *a, **k: calls.append(k) or orig(*a, **k))
    out = check_array(X, name="X", obs=obs)
    assert len(calls) == 1
    np.testing.assert_array_equal(out, dense)
    assert out.dtype == np.float64 and out.flags.c_contiguous


def test_densify_names_the_argument():
    with pytest.raises(DataError, match="needs dense `X_new`"):
        densify_sparse_for_dense_kernel(sp.csr_array(np.eye(2)), name="X_new", obs="gauss")


@pytest.mark.parametrize("cls", [DPMixture, FiniteMixture])
def test_sparse_counts_fit_a_multinomial_mixture_like_dense_ones(cls):
    X = counts(n=80, d=8)
    kw = dict(obs="mult", n_components=3, max_laps=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = cls(**kw).fit(sp.csr_matrix(X))
        b = cls(**kw).fit(X)
    # the CSR kernel sums the same products in another order: equal to round-off
    np.testing.assert_allclose(a.history_["elbo"], b.history_["elbo"], rtol=1e-12)
    np.testing.assert_allclose(a.predict_proba(sp.csr_array(X)), b.predict_proba(X), rtol=1e-10, atol=1e-14)


def test_gaussian_mixture_refuses_sparse_x():
    with pytest.raises(DataError, match="obs='gauss' needs dense `X`"):
        DPMixture(obs="gauss", n_components=2).fit(sp.csr_array(np.random.default_rng(0).standard_normal((20, 2))))
