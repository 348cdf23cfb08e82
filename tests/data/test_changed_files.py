"""Batch files that change during a fit are refused with a DataError naming `X` and the batch,
never read with stale sizes, offsets or dtypes."""

import os

import numpy as np
import pytest
from bnpcore import DPMixture
from bnpcore.data import ArrayBatches, sequence_source
from bnpcore.data.sources import open_npy_rows
from bnpcore.exceptions import DataError

X = np.random.default_rng(0).normal(size=(60, 3))
CHANGED = r"`X`: '.*all\.npy' changed since the fit started"


def npy_source(tmp_path, n_batches=3):
    path = tmp_path / "all.npy"
    np.save(path, X)
    return path, ArrayBatches(open_npy_rows(path), n_batches)


@pytest.mark.parametrize(
    "new",
    [X.astype(np.float32), np.vstack([X, X]), X[:30], X.reshape(45, 4)],
    ids=["float32 same shape", "more rows", "fewer rows", "other shape"],
)
def test_npy_path_rewritten_between_reads(tmp_path, new):
    path, src = npy_source(tmp_path)
    np.testing.assert_array_equal(src.get(2), X[40:60])
    np.save(path, new)
    with pytest.raises(DataError, match=CHANGED + r".*\[batch 2\]"):
        src.get(2)


def test_npy_path_same_size_rewrite_is_detected_by_mtime_and_inode(tmp_path):
    path, src = npy_source(tmp_path)
    src.get(0)
    st = os.stat(path)
    np.save(path, X[::-1])  # same size, in place
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(DataError, match=CHANGED):
        src.get(0)
    # replaced by another file of the same size and modification time: only the inode differs
    path, src = npy_source(tmp_path)
    st = os.stat(path)
    np.save(tmp_path / "other.npy", X[::-1])
    os.utime(tmp_path / "other.npy", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp_path / "other.npy", path)
    with pytest.raises(DataError, match=CHANGED):
        src.get(0)


def test_npy_path_deleted_between_reads(tmp_path):
    path, src = npy_source(tmp_path)
    src.get(1)
    os.remove(path)
    with pytest.raises(DataError, match=r"`X`: no such file: '.*all\.npy'.*\[batch 1\]"):
        src.get(1)


def test_sequence_npy_path_rewritten_between_reads(tmp_path):
    path = tmp_path / "all.npy"
    np.save(path, X)
    src = sequence_source(path, lengths=[20, 20, 20], n_batches=3)
    src.get(1)
    np.save(path, X.astype(np.float32))
    with pytest.raises(DataError, match=CHANGED + r".*\(reading X \(batch 1, sequences 1-2\)\)"):
        src.get(1)


def test_memoized_fit_refuses_npy_file_rewritten_after_first_lap(tmp_path):
    rng = np.random.default_rng(0)
    data = np.concatenate([rng.normal(size=(100, 2)) + c for c in (0, 8)])
    path = tmp_path / "all.npy"
    np.save(path, data)

    def rewrite(model, info):
        if info["lap"] == 1:
            np.save(path, data.astype(np.float32))

    est = DPMixture("gauss", n_components=2, n_threads=1, random_state=0, moves=(), algorithm="memoized", n_batches=4, max_laps=3, tol=0, callback=rewrite)
    with pytest.raises(DataError, match=CHANGED + r".*\[batch \d\]"):
        est.fit(str(path))
