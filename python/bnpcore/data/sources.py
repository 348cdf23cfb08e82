"""Fixed batches of mixture rows (data are split once into B fixed batches: Hughes & Sudderth 2013 §3).

Documents and sequences have their own sources (:mod:`bnpcore.data.documents`,
:mod:`bnpcore.data.sequences`); all follow :class:`bnpcore.data.BatchSource`.

A *batch source* is what the learning algorithms read data from. It has ``len(source)``
batches, ``source.get(b)`` returns batch ``b`` as a validated C-contiguous float64 array, and
``n_rows`` / ``n_features`` / ``sample_for_init`` describe the whole dataset. Two sources exist:

* :class:`ArrayBatches` — B fixed batches over one array. In-memory arrays use a seeded random
  assignment of rows to batches (Hughes & Sudderth 2013 §3 recommend it: sorted or grouped data would
  otherwise give batches that each see only a few clusters); a ``numpy.memmap`` (or a ``.npy``
  path opened with ``mmap_mode="r"``) uses contiguous row ranges so that every visit reads one
  contiguous region of the file and the dataset is never copied whole.
* :class:`ListBatches` — a list of batches given by the user (arrays, memmaps or ``.npy``
  paths), kept by reference; each element is one batch, read and validated when visited.

Validation happens per batch, when the batch is read, so a non-finite value in a file is
reported with its batch index at the moment the batch is visited.
"""

from __future__ import annotations

import os

import numpy as np

from bnpcore._validation import DENSIFIED_SPARSE_OBS, check_array
from bnpcore.exceptions import DataError, ParameterError, ShapeError

__all__ = ["ArrayBatches", "ListBatches", "NpyFile", "is_batch_list", "make_batches", "open_npy", "open_npy_rows"]


def _check_lazy_2d(X, name: str, n_features=None) -> None:
    """Shape and dtype checks that do not read the data (for memory maps)."""
    if X.dtype == object or not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.iscomplexobj(X):
        raise DataError(f"`{name}` must be real numeric, got dtype {X.dtype}")
    if X.ndim != 2:
        raise ShapeError(f"`{name}` must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] < 1:
        raise ShapeError(f"`{name}` has no rows")
    if X.shape[1] == 0:
        raise ShapeError(f"`{name}` has no columns")
    if n_features is not None and X.shape[1] != n_features:
        raise ShapeError(f"`{name}` has {X.shape[1]} columns but the model was fitted with {n_features}")


def open_npy(path, name: str = "X") -> np.ndarray:
    """Open a ``.npy`` file as a read-only memory map (nothing is read but the header)."""
    try:
        arr = np.load(os.fspath(path), mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"`{name}`: no such file: {os.fspath(path)!r}") from None
    except Exception as exc:
        raise DataError(f"`{name}`: {os.fspath(path)!r} is not a readable .npy file ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise DataError(f"`{name}`: {os.fspath(path)!r} is not a single-array .npy file")
    return arr


class NpyFile:
    """Read-only row access to a C-order ``.npy`` file by explicit reads (no memory map).

    ``f[lo:hi]`` reads rows ``lo..hi`` with one ``seek`` + ``readinto``, so the process holds only
    the rows it asked for: a lap over a file on disk keeps one batch resident, however large the
    file (a ``numpy.memmap`` would instead keep every page it touched mapped in the process).

    Every read checks, with one ``os.fstat`` of the opened file, that the file is still the one
    whose header was read (same device, inode, size and modification time): a file rewritten or
    replaced meanwhile (another dtype or shape, more or fewer rows) would otherwise be read with
    the old header's offsets and dtype.

    Parameters
    ----------
    path : str or os.PathLike
    name : str
        Argument name used in error messages.

    Raises
    ------
    DataError
        On a read, if the file has been deleted or has changed since its header was read.
    """

    def __init__(self, path, name: str = "X"):
        self.path = os.fspath(path)
        self.name = name
        with open(self.path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            self.offset = fh.tell()
            self._stat = self._identity(os.fstat(fh.fileno()))
        if fortran or dtype.hasobject:
            raise ValueError("not a C-order numeric array")
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.ndim = len(self.shape)
        self.row_bytes = int(dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64)))

    def __len__(self) -> int:
        return self.shape[0]

    @staticmethod
    def _identity(st) -> tuple:
        """What identifies the file's content for :meth:`_read`: device, inode, size, mtime."""
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _read(self, lo: int, hi: int) -> np.ndarray:
        out = np.empty((hi - lo,) + self.shape[1:], dtype=self.dtype)
        try:
            with open(self.path, "rb") as fh:
                if self._identity(os.fstat(fh.fileno())) != self._stat:
                    raise DataError(
                        f"`{self.name}`: {self.path!r} changed since the fit started (its size, modification time or inode differ "
                        "from when its header was read); the file must not be rewritten during a fit"
                    )
                fh.seek(self.offset + lo * self.row_bytes)
                got = fh.readinto(memoryview(out).cast("B"))
        except FileNotFoundError:
            raise DataError(f"`{self.name}`: no such file: {self.path!r} (it was deleted after the fit started)") from None
        if got != out.nbytes:
            raise DataError(f"`{self.name}`: {self.path!r} is truncated (rows {lo}-{hi} unreadable)")
        return out

    def __getitem__(self, key):
        if isinstance(key, slice) and key.step in (None, 1):
            lo, hi, _ = key.indices(self.shape[0])
            return self._read(lo, max(lo, hi))
        idx = np.asarray(key, dtype=np.int64)
        return self.take_rows(idx)

    def take_rows(self, idx, chunk_rows: int = 65536) -> np.ndarray:
        """Rows ``idx`` (sorted), read chunk by chunk: one sequential pass, one chunk resident."""
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((idx.size,) + self.shape[1:], dtype=self.dtype)
        done = 0
        for lo in range(0, self.shape[0], chunk_rows):
            hi = min(lo + chunk_rows, self.shape[0])
            a, b = np.searchsorted(idx, [lo, hi])
            if b > a:
                block = self._read(lo, hi)
                out[done : done + b - a] = block[idx[a:b] - lo]
                done += b - a
        return out


def open_npy_rows(path, name: str = "X"):
    """A ``.npy`` file for row-range reading: :class:`NpyFile` for C-order files, a read-only
    memory map otherwise."""
    arr = open_npy(path, name=name)  # validates the file and reports errors uniformly
    try:
        return NpyFile(path, name=name)
    except ValueError:
        return arr


def _is_path(x) -> bool:
    return isinstance(x, (str, os.PathLike))


def is_batch_list(X) -> bool:
    """A list/tuple whose elements are 2-D arrays or ``.npy`` paths is a list of batches (a
    nested list of numbers is an ordinary array-like)."""
    if not isinstance(X, (list, tuple)) or len(X) == 0:
        return False
    return all(_is_path(x) or (hasattr(x, "shape") and len(x.shape) == 2) for x in X)


#: dense entries of the initialisation sample of a sparse batch source (32 MB; at least 256 rows)
SPARSE_INIT_ENTRIES = 1 << 22


def _sparse(X) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def _sparse_batches(flags, obs) -> bool:
    """Whether any batch is scipy.sparse (``flags``: one bool per batch); an error at once when
    ``obs`` is a model that needs dense data, rather than when the batch is first read."""
    if any(flags) and obs is not None and obs not in DENSIFIED_SPARSE_OBS:
        b = list(flags).index(True)
        raise DataError(f"obs={obs!r} needs dense batches; batch {b} of `X` is a scipy.sparse matrix: use .toarray() if it fits in memory")
    return any(flags)


class _Checked:
    """Per-batch validation: float64 conversion, finiteness, then the model's support check.
    With ``obs``, scipy.sparse batches are refused for the Gaussian models and kept sparse
    (validated as counts) for ``mult``/``bern`` (:func:`~bnpcore._validation.check_array`)."""

    def __init__(self, n_features=None, check_data=None, obs=None):
        self.n_features = n_features
        self.check_data = check_data
        self.obs = obs

    def __call__(self, Xb, name: str, b: int) -> np.ndarray:
        try:
            out = check_array(Xb, name=name, n_features=self.n_features, obs=self.obs, keep_sparse=self.obs is not None)
            if self.check_data is not None and isinstance(out, np.ndarray):  # sparse rows: checked above
                self.check_data(out, name)
        except ValueError as exc:
            raise type(exc)(f"{exc} [batch {b}]") from None
        return out


class ArrayBatches:
    """B fixed batches of mixture rows over one array (in memory or a ``numpy.memmap``).

    A :class:`~bnpcore.data.BatchSource` with ``segment == "row"``: the only source that may
    shuffle (in-memory arrays with a ``seed``).

    Parameters
    ----------
    X : ndarray or numpy.memmap of shape (n_samples, n_features)
    n_batches : int
    seed : int or None
        Seed of the random assignment of rows to batches. Used only for in-memory arrays with
        ``n_batches > 1``; with None, or for a memory map, batch ``b`` is the contiguous row
        range ``bounds[b]:bounds[b+1]`` (a view: a memory map is never copied whole).
    validated : bool
        ``X`` is already a validated C-contiguous float64 array (in-memory data are validated
        once, up front, by the estimator).
    check_data : callable(X, name) or None
        The observation model's support check, applied to each batch when it is read.
    """

    def __init__(self, X, n_batches: int, seed=None, validated: bool = False, check_data=None):
        n = X.shape[0]
        if n_batches < 1:
            raise ParameterError(f"`n_batches` must be >= 1, got {n_batches}")
        if n_batches > n:
            raise ParameterError(f"`n_batches`={n_batches} exceeds the number of rows ({n})")
        self.X = X
        self.n_batches = int(n_batches)
        self.bounds = np.linspace(0, n, n_batches + 1).round().astype(np.int64)
        self.is_memmap = (
            isinstance(X, (np.memmap, NpyFile)) or (isinstance(X, np.ndarray) and isinstance(X.base, np.memmap))
        )
        self.seed = seed
        self.rows = None
        if seed is not None and n_batches > 1 and not self.is_memmap:
            perm = np.random.default_rng(seed).permutation(n)
            self.rows = [np.sort(perm[self.bounds[b] : self.bounds[b + 1]]) for b in range(n_batches)]
        self._validated = validated
        self._check = _Checked(None, check_data)

    segment = "row"

    @property
    def shuffles(self) -> bool:
        """Rows were assigned to batches at random (in-memory array, ``seed`` given, B > 1)."""
        return self.rows is not None

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_segments(self) -> int:
        return self.n_rows

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def __len__(self) -> int:
        return self.n_batches

    def batch_size(self, b: int) -> int:
        return int(self.bounds[b + 1] - self.bounds[b])

    def get(self, b: int) -> np.ndarray:
        """Batch ``b`` as a C-contiguous float64 array (validated)."""
        try:
            if self.rows is not None:
                rows = self.rows[b]
                # a fresh contiguous copy of the batch only (np.take: ~3x faster than X[rows] on rows)
                Xb = np.take(self.X, rows, axis=0) if isinstance(self.X, np.ndarray) else self.X[rows]
                label = f"X (batch {b})"
            else:
                lo, hi = self.bounds[b], self.bounds[b + 1]
                Xb = self.X[lo:hi]
                label = f"X (batch {b}, rows {lo}-{hi})"
        except DataError as exc:  # a file read by NpyFile: deleted, changed or truncated
            raise DataError(f"{exc} [batch {b}]") from None
        if self._validated and isinstance(Xb, np.ndarray) and Xb.dtype == np.float64 and Xb.flags.c_contiguous:
            return Xb
        if self._validated and _sparse(Xb):  # validated sparse rows stay sparse (count models)
            return Xb
        return self._check(Xb, label, b)

    def sample_for_init(self, max_rows: int, rng) -> np.ndarray:
        """Rows used for the default priors and the initial clusters (all rows if there are few;
        otherwise a sorted uniform subsample, which reads only those rows of a memory map)."""
        n = self.n_rows
        if _sparse(self.X):
            # a dense copy of at most SPARSE_INIT_ENTRIES entries (priors and initial clusters)
            max_rows = max(min(max_rows, 256), min(max_rows, SPARSE_INIT_ENTRIES // max(self.n_features, 1)))
            idx = np.arange(n) if n <= max_rows else np.sort(rng.choice(n, size=max_rows, replace=False))
            return check_array(self.X[idx].toarray(), name="X (initialisation subsample)")
        if n <= max_rows:
            return check_array(self.X[0:n] if isinstance(self.X, NpyFile) else self.X, name="X")
        idx = np.sort(rng.choice(n, size=max_rows, replace=False))
        return check_array(self.X[idx], name="X (initialisation subsample)")


class ListBatches:
    """User-given batches: each element of ``items`` (an array, a memmap or a ``.npy`` path) is
    one batch, kept by reference and read when visited (paths are memory-mapped on every visit,
    so nothing stays resident between visits).

    ``obs`` (the observation model's kind) decides what a scipy.sparse batch becomes: an
    error for the Gaussian models, sparse rows for ``mult``/``bern``; without it batches are
    densified when read.

    Raises
    ------
    ShapeError
        If the batches do not all have the same number of columns (the message names the first
        offending batch).
    DataError
        When a batch is read, if its shape differs from the one it had when the source was built
        (a ``.npy`` file replaced during a fit).
    """

    def __init__(self, items, n_features=None, check_data=None, obs=None):
        self.items = list(items)
        shapes, flags = [], []
        for b, item in enumerate(self.items):
            arr = open_npy(item, name=f"X[{b}]") if _is_path(item) else item
            flags.append(_sparse(arr))
            if not hasattr(arr, "shape") or len(arr.shape) != 2:
                raise ShapeError(f"batch {b} of `X` must be 2-D (n_samples, n_features), got shape {getattr(arr, 'shape', None)}")
            if arr.shape[0] < 1:
                raise ShapeError(f"batch {b} of `X` has no rows")
            shapes.append(tuple(int(s) for s in arr.shape))
        d = n_features if n_features is not None else shapes[0][1]
        for b, s in enumerate(shapes):
            if s[1] != d:
                raise ShapeError(
                    f"batch {b} of `X` has {s[1]} columns but "
                    + (f"the model was fitted with {d}" if n_features is not None else f"batch 0 has {d}")
                )
        self.sizes = np.array([s[0] for s in shapes], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self._n_features = int(d)
        self._any_sparse = _sparse_batches(flags, obs)
        self._check = _Checked(None, check_data, obs)

    segment = "row"
    shuffles = False

    @property
    def n_rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_segments(self) -> int:
        return self.n_rows

    @property
    def n_features(self) -> int:
        return self._n_features

    def __len__(self) -> int:
        return len(self.items)

    def batch_size(self, b: int) -> int:
        return int(self.sizes[b])

    def _raw(self, b: int):
        item = self.items[b]
        if _is_path(item):
            return self._same_shape(open_npy(item, name=f"X[{b}]"), b, f" ({os.fspath(item)!r})")
        return self._same_shape(item, b)

    def _same_shape(self, raw, b: int, where: str = ""):
        """``raw`` (batch ``b`` as read now), checked against the batch's shape when the source
        was built: a batch file replaced by one of another size would otherwise be fitted with
        the first sizes' weights (and sample_for_init would index past its end)."""
        shape = tuple(getattr(raw, "shape", ()))
        if len(shape) == 2 and shape[0] != self.sizes[b]:
            raise DataError(
                f"batch {b} of `X`{where} has {shape[0]} rows on this read but {int(self.sizes[b])} when the fit started; "
                "the batches must not change during a fit"
            )
        if len(shape) == 2 and shape[1] != self._n_features:
            raise DataError(
                f"batch {b} of `X`{where} has {shape[1]} columns on this read but {self._n_features} when the fit started; "
                "the batches must not change during a fit"
            )
        return raw

    def get(self, b: int) -> np.ndarray:
        return self._check(self._raw(b), f"X (batch {b})", b)

    def sample_for_init(self, max_rows: int, rng) -> np.ndarray:
        """A uniform subsample of at most ``max_rows`` rows across all batches (reads only those
        rows of memory-mapped batches)."""
        n = self.n_rows
        if self._any_sparse:
            # a dense copy of at most SPARSE_INIT_ENTRIES entries, as for one sparse array
            max_rows = max(min(max_rows, 256), min(max_rows, SPARSE_INIT_ENTRIES // max(self.n_features, 1)))
        idx = np.arange(n) if n <= max_rows else np.sort(rng.choice(n, size=max_rows, replace=False))
        which = np.searchsorted(self.offsets, idx, side="right") - 1
        parts = []
        for b in np.unique(which):
            local = idx[which == b] - self.offsets[b]
            raw = self._raw(int(b))
            rows = raw.tocsr()[local].toarray() if _sparse(raw) else np.asarray(raw[local])
            parts.append(check_array(rows, name=f"X (batch {int(b)}, initialisation subsample)"))
        return np.concatenate(parts, axis=0)


_END = object()  # the end of an iterator (a batch may be any object)


class ReiterableBatches(ListBatches):
    """Batches from a re-iterable object (``__iter__`` starts a new pass, e.g. a corpus class
    reading files): one pass here for the batch sizes, then batch ``b`` is read by iterating
    to it when visited. Visiting batches in order costs one pass per lap; a visit to an earlier
    batch restarts the pass (so a memoized lap in random order reads O(B²/2) batches: give a
    list of ``.npy`` paths for large data).

    Every pass must yield the batches of the first one: a batch of another shape, or a pass
    that ends early or goes on after the last batch, is a :class:`~bnpcore.exceptions.DataError`
    when it is read."""

    def __init__(self, corpus, n_features=None, check_data=None, obs=None):
        self.corpus = corpus
        shapes, flags = [], []
        for b, item in enumerate(corpus):
            flags.append(_sparse(item))
            shape = getattr(item, "shape", None)
            if shape is None or len(shape) != 2:
                raise ShapeError(f"batch {b} of `X` must be 2-D (n_samples, n_features), got shape {shape}")
            if shape[0] < 1:
                raise ShapeError(f"batch {b} of `X` has no rows")
            shapes.append((int(shape[0]), int(shape[1])))
        if not shapes:
            raise ShapeError("`X` is an empty iterable of batches")
        d = n_features if n_features is not None else shapes[0][1]
        for b, sh in enumerate(shapes):
            if sh[1] != d:
                raise ShapeError(f"batch {b} of `X` has {sh[1]} columns but batch 0 has {d}")
        self.items = None
        self.sizes = np.array([sh[0] for sh in shapes], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self._n_features = int(d)
        self._any_sparse = _sparse_batches(flags, obs)
        self._check = _Checked(None, check_data, obs)
        self._it = None
        self._pos = 0

    def __len__(self) -> int:
        return int(self.sizes.shape[0])

    def _raw(self, b: int):
        if self._it is None or b < self._pos:
            self._it, self._pos = iter(self.corpus), 0
        while True:
            try:
                item = next(self._it)
            except StopIteration:
                self._it = None
                raise self._changed(self._pos) from None
            self._pos += 1
            if self._pos - 1 == b:
                break
        if b == len(self) - 1:  # end of the pass: the corpus must end here too
            extra = next(self._it, _END) is not _END
            self._it = None
            if extra:
                raise self._changed(f"more than {len(self)}")
        return self._same_shape(item, b)

    def _changed(self, got) -> DataError:
        return DataError(
            f"`X` yielded {got} batches on this pass but {len(self)} on the first one; "
            "a re-iterable source must yield the same batches on every pass"
        )


def make_batches(X, n_batches: int, seed=None) -> ArrayBatches:
    return ArrayBatches(X, n_batches, seed=seed)
