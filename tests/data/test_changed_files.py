"""Batch files and re-iterable batches that change during a fit are refused with a DataError
naming `X` and the batch, never read with stale sizes, offsets or dtypes."""

import os
import re

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import DPMixture
from bnpcore.data import ArrayBatches, DocumentListBatches, ListBatches, sequence_source
from bnpcore.data.sources import ReiterableBatches, open_npy_rows
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


def path_list(tmp_path):
    paths = []
    for b in range(3):
        paths.append(str(tmp_path / f"x{b}.npy"))
        np.save(paths[-1], X[20 * b : 20 * (b + 1)])
    return paths


@pytest.mark.parametrize(
    "new, what",
    [(X[:5], "5 rows on this read but 20"), (X[:50], "50 rows on this read but 20"), (X[:20, :2], "2 columns on this read but 3")],
    ids=["fewer rows", "more rows", "fewer columns"],
)
def test_list_of_npy_paths_batch_resized_between_reads(tmp_path, new, what):
    paths = path_list(tmp_path)
    src = ListBatches(paths)
    src.get(1)
    np.save(paths[1], new)
    with pytest.raises(DataError, match=r"batch 1 of `X` \('.*x1\.npy'\) has " + what + " when the fit started"):
        src.get(1)


def test_list_of_npy_paths_batch_shrunk_before_init_sample(tmp_path):
    paths = path_list(tmp_path)
    src = ListBatches(paths)
    np.save(paths[2], X[:5])
    with pytest.raises(DataError, match=r"batch 2 of `X` \('.*x2\.npy'\) has 5 rows on this read but 20"):
        src.sample_for_init(1000, np.random.default_rng(0))


def test_list_of_npz_paths_batch_resized_between_reads(tmp_path):
    counts = np.random.default_rng(1).poisson(1.0, size=(30, 8)).astype(float)
    paths = []
    for b in range(3):
        paths.append(str(tmp_path / f"c{b}.npz"))
        sp.save_npz(paths[-1], sp.csr_matrix(counts[10 * b : 10 * (b + 1)]))
    src = DocumentListBatches(paths)
    src.get(0)
    sp.save_npz(paths[0], sp.csr_matrix(counts[:25]))
    msg = r"batch 0 of `X` \('.*c0\.npz'\) has 25 documents on this read but 10 when the fit started"
    with pytest.raises(DataError, match=msg):
        src.get(0)
    sp.save_npz(paths[0], sp.csr_matrix(counts[:4]))  # the init sample would index past its end
    with pytest.raises(DataError, match=msg.replace("25", "4")):
        src.sample_for_init(1000, np.random.default_rng(0))


class Passes:
    """Six batches per pass; from the second pass on, ``change`` alters them."""

    def __init__(self, change):
        self.change, self.passes = change, 0

    def __iter__(self):
        self.passes += 1
        batches = [X[10 * b : 10 * (b + 1)] for b in range(6)]
        if self.passes > 1:
            batches = self.change(batches)
        return iter(batches)


@pytest.mark.parametrize(
    "change, read, message",
    [
        (lambda bs: bs[:2] + [bs[2][:3]] + bs[3:], 2, "batch 2 of `X` has 3 rows on this read but 10 when the fit started"),
        (lambda bs: bs[:2] + [X[:15]] + bs[3:], 2, "batch 2 of `X` has 15 rows on this read but 10 when the fit started"),
        (lambda bs: bs + [X[:10]], 5, "`X` yielded more than 6 batches on this pass but 6 on the first one"),
        (lambda bs: bs[:5], 5, "`X` yielded 5 batches on this pass but 6 on the first one"),
    ],
    ids=["smaller batch", "bigger batch", "more batches", "fewer batches"],
)
def test_reiterable_batches_changed_on_a_later_pass(change, read, message):
    src = ReiterableBatches(Passes(change))
    with pytest.raises(DataError, match=re.escape(message)):
        for b in range(len(src)):
            src.get(b)
        src.get(read)  # a later pass


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
