"""Arrays handed to the Rust kernels are C-contiguous and aligned (bnpcore._validation.kernel_array)."""

import numpy as np
import pytest
from _helpers import fit_quietly
from bnpcore import DPMixture, HDPTopicModel
from bnpcore._validation import kernel_array

sp = pytest.importorskip("scipy.sparse")


def _unaligned(a):
    """A copy of ``a`` whose buffer starts one byte into a bytearray (not aligned)."""
    out = np.frombuffer(memoryview(bytearray(a.nbytes + 1))[1:], dtype=a.dtype)
    out[:] = np.ravel(a)
    return out.reshape(a.shape)


def test_kernel_array_copies_only_unaligned_or_foreign_arrays():
    u = _unaligned(np.arange(100.0))
    assert not u.flags["ALIGNED"]
    a = kernel_array(u, np.float64)
    assert a.flags["ALIGNED"] and a.flags["C_CONTIGUOUS"] and np.array_equal(a, u)
    b = np.arange(10.0)
    assert kernel_array(b, np.float64) is b
    assert kernel_array(b[::2]).flags["C_CONTIGUOUS"]
    assert kernel_array(np.arange(4), np.float64).dtype == np.float64


@pytest.mark.parametrize("which", ["data", "indices", "indptr"])
def test_sparse_fits_on_unaligned_arrays(which):
    """A CSR matrix whose arrays are unaligned (as a Dask process worker can unpickle them, or
    ``np.frombuffer`` makes them) fits, predicts and scores as its aligned copy does (the
    mixture's sparse kernel raised ``TypeError`` on it in ``predict``: ``fit`` happened to copy
    the arrays while checking them)."""
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.7, (300, 40)).astype(float))
    X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    U = X.copy()
    setattr(U, which, _unaligned(getattr(X, which)))
    assert not getattr(U, which).flags["ALIGNED"]
    for make in (lambda: DPMixture(obs="mult", n_components=3, max_laps=2, random_state=0),
                 lambda: HDPTopicModel(n_components=3, max_laps=2, random_state=0)):
        a, b = fit_quietly(make(), U), fit_quietly(make(), X)
        assert np.array_equal(a.history_["elbo"], b.history_["elbo"])
        if hasattr(b, "predict"):
            assert np.array_equal(b.predict(U), b.predict(X)) and np.array_equal(b.predict_proba(U), b.predict_proba(X))
            assert b.score(U) == b.score(X)
        else:
            assert np.array_equal(b.transform(U), b.transform(X))
