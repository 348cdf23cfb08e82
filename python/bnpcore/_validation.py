"""Input validation shared by the estimators and the data sources.

Dense arrays go through :func:`check_array`. scipy.sparse input is never densified silently:

* bag-of-words data (documents) stay sparse all the way into Rust: :func:`check_counts_csr`
  validates them and returns one canonical ``csr_array`` (the document sources of
  :mod:`bnpcore.data` call it);
* :func:`check_array` called with the mixture's ``obs`` refuses sparse input for the Gaussian
  models (a clear :class:`~bnpcore.exceptions.DataError` naming the argument). For the count
  models ``mult``/``bern`` the estimators pass ``keep_sparse=True``: the rows are validated
  sparse (:func:`check_sparse_rows`), batches stay CSR, and the Rust local step reads the CSR
  arrays themselves (O(nnz·K) per step; plug-in scores too). Only two bounded samples are made
  dense: the initialisation subsample (at most ``SPARSE_INIT_ENTRIES`` entries) and a birth's
  row reservoir (at most 2**24 entries).
  :func:`densify_sparse_for_dense_kernel` remains for the HMMs (``obs="mult"``/``"bern"``:
  their forward-backward local step reads dense rows, so sparse sequences are densified there,
  explicitly) and for callers that do not know the model (``obs=None``).

Sequence lengths (hmmlearn-style ``(X, lengths)``) are checked by :func:`check_lengths`.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from bnpcore.exceptions import DataError, NonFiniteError, ParameterError, ShapeError

__all__ = [
    "DENSIFIED_SPARSE_OBS",
    "check_array",
    "check_counts_csr",
    "check_lengths",
    "check_param",
    "check_random_state",
    "check_sparse_rows",
    "check_vocabulary",
    "densify_sparse_for_dense_kernel",
    "is_sparse",
    "kernel_array",
    "kernel_csr",
    "make_csr",
    "read_lengths",
    "same_file",
]

#: Observation models that accept scipy.sparse ``X``: the mixtures keep it sparse
#: (``keep_sparse=True``), the HMMs densify it (:func:`densify_sparse_for_dense_kernel`); every
#: other model refuses sparse ``X``.
DENSIFIED_SPARSE_OBS = ("mult", "bern")


def kernel_array(a, dtype=None) -> np.ndarray:
    """``a`` as a C-contiguous, aligned array (of ``dtype`` when given) for a Rust kernel, copied
    only when it is not one already. ``np.ascontiguousarray`` keeps an unaligned array as it is,
    and the kernels' borrowed slices refuse one: arrays a Dask worker unpickles from a
    message's frames can be unaligned (a scipy.sparse batch's int64 ``indices`` on a process
    worker were), as can arrays made by ``np.frombuffer`` at an odd offset."""
    return np.require(a, dtype=dtype, requirements=["C", "A"])


def kernel_csr(X) -> tuple:
    """``(indptr, indices, data)`` of the CSR matrix ``X`` as :func:`kernel_array` arrays, their
    dtypes kept (the CSR kernels take 32- or 64-bit indices)."""
    return kernel_array(X.indptr), kernel_array(X.indices), kernel_array(X.data)


def is_sparse(X) -> bool:
    """Whether ``X`` is a scipy.sparse matrix or array (any format)."""
    import scipy.sparse

    return bool(scipy.sparse.issparse(X))


def densify_sparse_for_dense_kernel(X, name: str = "X", obs: str | None = None) -> np.ndarray:
    """Dense copy of sparse ``X`` for the dense kernels (``obs`` in :data:`DENSIFIED_SPARSE_OBS`).

    TEMPORARY, and the only place that densifies user data: HMMs of count vectors
    (``mult``/``bern``) accept scipy.sparse ``X`` by densifying it here, because their Rust
    forward-backward local step (``hmm_local_step``) reads dense rows. It goes when that step
    reads CSR rows as the mixtures' does; the callers then pass ``keep_sparse=True``.

    Parameters
    ----------
    X : scipy.sparse matrix or array of shape (n_samples, n_features)
    name : str
        Argument name used in error messages.
    obs : str or None
        Observation model kind. ``None`` (a caller that does not know the model) keeps the
        behaviour of earlier versions: densify.

    Returns
    -------
    ndarray of shape (n_samples, n_features)

    Raises
    ------
    DataError
        If ``obs`` is not in :data:`DENSIFIED_SPARSE_OBS` (the Gaussian models need dense data:
        densifying a sparse matrix of real values silently could exhaust memory).
    """
    if obs is not None and obs not in DENSIFIED_SPARSE_OBS:
        raise DataError(
            f"obs={obs!r} needs dense `{name}`; got a scipy.sparse matrix of shape {tuple(X.shape)}: "
            f"use {name}.toarray() if it fits in memory"
        )
    return X.toarray()


def check_sparse_rows(X, obs: str, name: str = "X", n_features: int | None = None, min_rows: int = 1):
    """Validate sparse rows for the mixtures of count vectors without densifying them.

    ``obs="mult"``: non-negative integer counts; ``obs="bern"``: values 0 or 1. Returns the
    canonical ``csr_array`` of :func:`check_counts_csr` (CSC, COO and ``csr_matrix`` are
    converted in O(nnz)). The mixtures' local steps then read the CSR arrays in Rust, so
    memory stays O(nnz + K·V).
    """
    csr = check_counts_csr(X, name=name, n_vocab=n_features, min_rows=min_rows)
    if obs == "bern" and csr.nnz and float(np.max(csr.data)) > 1.0:
        pos = int(np.flatnonzero(csr.data > 1.0)[0])
        row = int(np.searchsorted(csr.indptr, pos, side="right") - 1)
        raise DataError(f"`{name}` must be binary (0/1) for obs='bern'; row {row} has {csr.data[pos]} in column {int(csr.indices[pos])}")
    return csr


class _NonNumericObjectError(DataError, TypeError):
    """An object array holds something that is not a number (a ``TypeError`` too, as in numpy)."""


def _is_missing(value) -> bool:
    return value is None or type(value).__name__ in ("NAType", "NaTType")


def _first_bad(mask: np.ndarray) -> str:
    row, col = np.argwhere(mask)[0]
    return f"first at row {row}, column {col}"


def _from_dataframe(X):
    """A pandas (or pandas-like) DataFrame whose columns are all numeric or boolean — numpy
    dtypes or the nullable extension dtypes ``Float64``, ``Int64``, ``boolean`` — becomes a
    float64 array with missing values (``pd.NA``) as NaN; anything else is returned unchanged."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "to_numpy") or not hasattr(X, "columns"):
        return X
    try:
        kinds = [dt.kind for dt in dtypes]
    except (AttributeError, TypeError):
        return X
    if not kinds or any(kind not in "biuf" for kind in kinds):
        return X
    return X.to_numpy(dtype=np.float64, na_value=np.nan)


def _lazy_kind(x) -> str | None:
    """``"Delayed"`` or ``"Future"`` for a dask Delayed object or a distributed Future (told
    apart by class, without importing dask), else None."""
    for cls in type(x).__mro__:
        if cls.__name__ in ("Delayed", "Future") and cls.__module__.split(".")[0] in ("dask", "distributed"):
            return cls.__name__
    return None


def check_not_lazy(X, name: str = "X") -> None:
    """Refuse a dask Delayed object or a distributed Future (or a list of them) given as data:
    their values are not known to bnpcore, only to Dask.

    Raises
    ------
    DataError
        Naming ``name`` and saying what to pass instead.
    """
    items = X if isinstance(X, (list, tuple)) else [X]
    for i, x in enumerate(items):
        kind = _lazy_kind(x)
        if kind is None:
            continue
        where = f"`{name}`" if x is X else f"`{name}[{i}]`"
        what = "a dask Delayed object" if kind == "Delayed" else "a dask.distributed Future"
        raise DataError(
            f"{where} is {what}: pass an array (compute it first) or a dask.array.Array "
            "(dask.array.from_delayed)"
        )


def _object_to_float(arr: np.ndarray, name: str) -> np.ndarray:
    """Convert an object array of numbers (e.g. ``X.astype(object)``) to float64."""
    try:
        return arr.astype(np.float64)
    except TypeError as exc:
        missing = np.asarray(np.frompyfunc(_is_missing, 1, 1)(arr), dtype=bool)  # a 0-d array gives a scalar
        if missing.any():
            raise NonFiniteError(f"`{name}` contains a missing value (None or pd.NA) ({_first_bad(missing)})") from None
        raise _NonNumericObjectError(f"`{name}` must be numeric; converting its object array failed: {exc}") from None
    except ValueError as exc:
        raise DataError(f"`{name}` must be numeric; converting its object array failed: {exc}") from None


def check_array(
    X, name: str = "X", n_features: int | None = None, min_rows: int = 1, *, obs: str | None = None, keep_sparse: bool = False
) -> np.ndarray:
    """Return ``X`` as a C-contiguous float64 2-D array, or raise a clear error.

    Accepted: numeric and boolean arrays and array-likes, object arrays of numbers (converted),
    pandas DataFrames including the nullable dtypes ``Float64``, ``Int64`` and ``boolean``
    (``pd.NA`` is reported as a missing value), masked arrays (a masked entry is reported as a
    missing value); scipy.sparse input: see ``obs``. Error messages
    follow scikit-learn's wording where its estimator checks look for it.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    name : str
        Argument name used in error messages.
    n_features : int or None
        Required number of columns (the fitted model's ``n_features_in_``).
    min_rows : int
    obs : str or None
        Observation model kind the array is for; decides what happens to scipy.sparse input
        (see :func:`densify_sparse_for_dense_kernel`: an error for the Gaussian models, a
        dense copy for ``mult``/``bern`` and when ``obs`` is None).
    keep_sparse : bool
        With ``obs`` in ``("mult", "bern")``: scipy.sparse input is validated without
        densifying (:func:`check_sparse_rows`) and returned as a canonical ``csr_array``.

    Returns
    -------
    ndarray of shape (n_samples, n_features), float64, C-contiguous
        (a ``csr_array`` for sparse input with ``keep_sparse``)

    Raises
    ------
    ShapeError
        Not 2-D, too few rows, no columns, or not ``n_features`` columns.
    DataError
        Not numeric (strings, objects that are not numbers; the latter is a ``TypeError``
        too), complex, or sparse for an ``obs`` that needs dense data.
    NonFiniteError
        NaN, infinity or a missing value (``None``, ``pd.NA``, a masked entry).
    """
    check_not_lazy(X, name)
    if isinstance(X, (str, bytes, os.PathLike)) or (
        isinstance(X, (list, tuple)) and X and all(isinstance(x, (str, bytes, os.PathLike)) for x in X)
    ):  # callers that read files do so before this
        what = f"a path ({os.fsdecode(X)!r})" if isinstance(X, (str, bytes, os.PathLike)) else "a list of paths"
        raise DataError(
            f"`{name}` is {what}, not an array: this estimator or method reads arrays "
            "(numpy.load the file, with mmap_mode='r' for a large one)"
        )
    if is_sparse(X):
        if keep_sparse and obs in DENSIFIED_SPARSE_OBS:
            return check_sparse_rows(X, obs, name=name, n_features=n_features, min_rows=min_rows)
        X = densify_sparse_for_dense_kernel(X, name=name, obs=obs)
    X = _from_dataframe(X)
    if isinstance(X, np.ma.MaskedArray):  # np.asarray would read the values under the mask
        masked = np.ma.getmaskarray(X)
        if masked.any():
            if masked.ndim != 2:
                raise NonFiniteError(f"`{name}` contains masked (missing) values")
            raise NonFiniteError(f"`{name}` contains masked (missing) values ({_first_bad(masked)})")
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise DataError(f"`{name}` could not be converted to an array: {exc}") from exc
    if arr.dtype == object:
        arr = _object_to_float(arr, name)
    if np.iscomplexobj(arr):
        raise DataError(f"Complex data not supported: `{name}` has dtype {arr.dtype}; pass real values")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise DataError(f"`{name}` must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 1:
        raise ShapeError(
            f"`{name}` must be 2-D (n_samples, n_features), got a 1-D array of shape {arr.shape}. "
            f"Reshape your data either using {name}.reshape(-1, 1) if it has a single feature "
            f"or {name}.reshape(1, -1) if it contains a single sample"
        )
    if arr.ndim != 2:
        raise ShapeError(f"`{name}` must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ShapeError(f"`{name}` has {arr.shape[0]} rows; at least {min_rows} required")
    if arr.shape[1] == 0:
        raise ShapeError(f"`{name}`: found array with 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if n_features is not None and arr.shape[1] != n_features:
        # scikit-learn's wording ("X has 1 features, but ... is expecting 4 features as input")
        raise ShapeError(
            f"{name} has {arr.shape[1]} features, but it is expecting {n_features} features as input "
            f"(the model was fitted with {n_features} columns)"
        )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise NonFiniteError(f"`{name}` contains NaN, infinity or a missing value ({_first_bad(~np.isfinite(arr))})")
    return arr


def _first_row(indptr: np.ndarray, pos: int) -> int:
    """Row of the CSR entry at position ``pos``."""
    return int(np.searchsorted(indptr, pos, side="right") - 1)


def is_sequence_list(X) -> bool:
    """Whether ``X`` is a list (or tuple) of sequences, as the HMMs accept beside hmmlearn's
    ``(X, lengths)``: its items are arrays (which must then be 2-D: a list of 1-D arrays is
    refused rather than guessed at) or nested lists of rows. A list of rows — plain lists of
    numbers — is an ordinary ``(n_samples, n_features)`` array-like instead."""
    if not isinstance(X, (list, tuple)) or len(X) == 0:
        return False
    return hasattr(X[0], "shape") or np.ndim(X[0]) == 2


def make_csr(data, indices, indptr, shape):
    """A ``scipy.sparse.csr_array`` over the given triplets with float64 data and int64 indices.

    The arrays are used as they are when they already have these dtypes (no copy), so a batch
    built from slices of a larger CSR matrix shares its memory (counts cross the
    Rust boundary as CSR triplets, indices as ``i64``).
    """
    import scipy.sparse

    data = np.asarray(data, dtype=np.float64)
    indices = np.asarray(indices, dtype=np.int64)
    indptr = np.asarray(indptr, dtype=np.int64)
    out = scipy.sparse.csr_array((data, indices, indptr), shape=tuple(int(s) for s in shape), copy=False)
    # some scipy versions pick int32 indices when they fit: keep the int64 arrays given
    out.indices, out.indptr, out.data = indices, indptr, data
    return out


def check_counts_csr(X, name: str = "X", n_vocab: int | None = None, min_rows: int = 1):
    """Validate bag-of-words counts and return them as one canonical CSR matrix, never densified.

    Parameters
    ----------
    X : scipy.sparse matrix or array (any format), or array-like of shape (n_docs, n_vocab)
        Row d holds the word counts of document d. CSC and COO input is converted to CSR once
        (cost O(nnz)); dense input is converted to CSR.
    name : str
        Argument name used in error messages.
    n_vocab : int or None
        Required vocabulary size (the fitted model's): ``X`` must have this many columns.
    min_rows : int
        Minimum number of documents.

    Returns
    -------
    scipy.sparse.csr_array of shape (n_docs, n_vocab)
        float64 data, int64 ``indices`` and ``indptr`` (``indptr`` is the ``doc_range`` offset
        array), sorted column indices without duplicates (duplicates are summed) and without
        stored zeros (explicit zero entries are dropped: they change nothing). When ``X`` is
        already such a CSR matrix its arrays are shared, not copied; otherwise ``X`` is never
        modified.

    Raises
    ------
    ShapeError
        If ``X`` is not 2-D, has too few rows, no columns, or a width other than ``n_vocab``.
    DataError
        If ``X`` is not real numeric, its CSR structure is invalid, or a count is negative or
        not an integer (the message names the document and the word id).
    NonFiniteError
        If a count is NaN or infinite.
    """
    import scipy.sparse

    if is_sparse(X):
        if len(X.shape) != 2:
            raise ShapeError(f"`{name}` must be 2-D (n_docs, n_vocab), got a sparse array of shape {X.shape}")
        if X.dtype == object or not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.issubdtype(X.dtype, np.complexfloating):
            raise DataError(f"`{name}` must hold real numeric counts, got dtype {X.dtype}")
        csr = X if X.format == "csr" else X.tocsr()  # one O(nnz) conversion; never dense
    else:
        csr = scipy.sparse.csr_array(check_array(X, name=name, min_rows=min_rows))
    n_docs, width = (int(s) for s in csr.shape)
    if n_docs < min_rows:
        raise ShapeError(f"`{name}` has {n_docs} documents (rows); at least {min_rows} required")
    if width == 0:
        raise ShapeError(f"`{name}` has no columns (empty vocabulary)")
    if n_vocab is not None and width != n_vocab:
        # scikit-learn's wording (its estimator checks look for it)
        raise ShapeError(
            f"{name} has {width} features, but it is expecting {n_vocab} features as input "
            "(the vocabulary size: `n_vocab`, or the fitted model's)"
        )
    indptr = np.asarray(csr.indptr)
    if indptr.shape != (n_docs + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise DataError(f"`{name}` has an invalid CSR structure (indptr must start at 0 and be non-decreasing)")
    nnz = int(indptr[-1])
    if csr.indices.shape[0] < nnz or csr.data.shape[0] < nnz:
        raise DataError(f"`{name}` has an invalid CSR structure (indptr[-1]={nnz} exceeds the stored entries)")
    indices = np.asarray(csr.indices[:nnz])
    data = np.asarray(csr.data[:nnz])
    if nnz and (indices.min() < 0 or indices.max() >= width):
        pos = int(np.flatnonzero((indices < 0) | (indices >= width))[0])
        raise DataError(f"`{name}`: word id {int(indices[pos])} of document {_first_row(indptr, pos)} is outside 0..{width - 1}")
    finite = np.isfinite(data)
    if not finite.all():
        pos = int(np.flatnonzero(~finite)[0])
        raise NonFiniteError(f"`{name}` contains NaN or infinity (document {_first_row(indptr, pos)}, word id {int(indices[pos])})")
    if nnz and data.min() < 0:
        pos = int(np.flatnonzero(data < 0)[0])
        raise DataError(
            f"`{name}` must hold non-negative counts; document {_first_row(indptr, pos)} has {data[pos]} of word id {int(indices[pos])}"
        )
    if data.dtype.kind == "f":
        bad = data != np.floor(data)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"`{name}` must hold integer counts; document {_first_row(indptr, pos)} has {data[pos]} of word id {int(indices[pos])}"
            )
    if nnz and not data.all():
        # stored zeros (e.g. left by ``X.data[X.data < 2] = 0``) are no counts: dropped, so that
        # nothing downstream (batch sizes, initialisation, the token split of a score) sees them;
        # boolean indexing copies, the caller's arrays are never changed
        keep = data != 0
        indptr = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])[indptr]
        indices, data = indices[keep], data[keep]
        nnz = int(indptr[-1])
    # canonical: column indices strictly increasing within every document
    canonical = True
    if nnz > 1:
        starts = np.zeros(nnz, dtype=bool)
        starts[indptr[:-1][indptr[:-1] < nnz]] = True
        canonical = bool(np.all((np.diff(indices) > 0) | starts[1:]))
    out = make_csr(data, indices, indptr, (n_docs, width))
    if not canonical:
        out = make_csr(data.copy(), indices.copy(), indptr.copy(), (n_docs, width))  # never reorder the caller's arrays
        out.sum_duplicates()  # sorts and sums in place
        out = make_csr(out.data, out.indices, out.indptr, (n_docs, width))
    return out


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name the same file (by device and inode when both exist,
    else by absolute path): an output path that would overwrite an input."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one does not exist (yet)
        return os.path.abspath(a) == os.path.abspath(b)


def _is_int(x) -> bool:
    """An integer, Python's or numpy's, that is not a bool."""
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_vocabulary(vocabulary, n_vocab: int, name: str = "vocabulary") -> list:
    """The words of a vocabulary in column order, from any of the forms users hold them in.

    Parameters
    ----------
    vocabulary : sequence, iterable or mapping
        A sequence of words in column order (list, tuple, ndarray, pandas Index, or any
        iterable, read once); an id-to-word mapping (a dict ``{id: word}``, gensim's
        ``Dictionary``) with an entry for every id ``0 .. n_vocab - 1``; or a word-to-id
        mapping (gensim's ``Dictionary.token2id``, scikit-learn's ``vocabulary_``).
    n_vocab : int
        The model's vocabulary size.
    name : str, default="vocabulary"
        The argument name error messages give.

    Returns
    -------
    list
        ``n_vocab`` words, word ``j`` first at index ``j`` (bytes decoded as UTF-8).

    Raises
    ------
    ParameterError
        A single string, a mapping whose keys are neither all ids nor whose values are all ids,
        ids missing or out of range, or a number of words other than ``n_vocab``.
    """
    from collections.abc import Mapping

    if isinstance(vocabulary, (str, bytes)):
        raise ParameterError(f"`{name}` must be a sequence of words (or a mapping of ids to words), not a single string")
    if isinstance(vocabulary, Mapping):
        items = list(vocabulary.items())
        if all(_is_int(k) for k, _ in items):
            pairs = items  # {id: word} (gensim's Dictionary iterates ids)
        elif all(_is_int(v) for _, v in items):
            pairs = [(v, k) for k, v in items]  # {word: id}
        else:
            raise ParameterError(f"`{name}`: a mapping must be id -> word or word -> id (integer ids)")
        ids = sorted(int(i) for i, _ in pairs)
        if ids != list(range(n_vocab)):
            raise ParameterError(
                f"`{name}` maps {len(ids)} ids ({ids[0] if ids else '-'}..{ids[-1] if ids else '-'}, "
                f"{len(set(ids))} distinct) but the model's words are the ids 0..{n_vocab - 1}"
            )
        words = [None] * n_vocab
        for i, w in pairs:
            words[int(i)] = w
    else:
        try:
            words = list(vocabulary)
        except TypeError:
            raise ParameterError(f"`{name}` must be a sequence of words or a mapping, got {type(vocabulary).__name__}") from None
        if len(words) != n_vocab:
            raise ParameterError(f"`{name}` has {len(words)} words but the model has n_vocab={n_vocab}")
    return [w.decode("utf-8", "replace") if isinstance(w, bytes) else w for w in words]


def read_lengths(lengths):
    """``lengths`` given as a one-shot iterator (a generator of ints) as a list, read once, so
    that it can be checked and used more than once; anything else unchanged."""
    if lengths is None or isinstance(lengths, (np.ndarray, list, tuple, str, bytes)):
        return lengths
    try:
        return list(lengths) if iter(lengths) is lengths else lengths
    except TypeError:
        return lengths


def check_lengths(lengths, n_rows: int, name: str = "lengths", rows_name: str = "X") -> np.ndarray:
    """Validate hmmlearn-style sequence lengths: positive integers summing to ``n_rows``.

    Parameters
    ----------
    lengths : array-like of int, shape (n_seqs,)
        Sequence s is rows ``sum(lengths[:s]) .. sum(lengths[:s+1])`` of ``X``. Integral
        floats, an object array of integers and a one-shot iterator (a generator) of integers
        are accepted.
    n_rows : int
        Number of rows of ``X``.
    name, rows_name : str
        Argument names used in error messages.

    Returns
    -------
    ndarray of int64, shape (n_seqs,)

    Raises
    ------
    ShapeError
        If ``lengths`` is not 1-D or empty, has an entry above ``n_rows``, or does not sum to
        ``n_rows``.
    DataError
        If an entry is not a positive integer.
    """
    try:
        arr = np.asarray(read_lengths(lengths))
    except Exception as exc:
        raise DataError(f"`{name}` could not be converted to an array: {exc}") from None
    if arr.dtype == object and arr.ndim == 1 and all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in arr):
        arr = arr.astype(np.float64)  # e.g. Python ints from a pandas object column, as X's object arrays
    if arr.dtype == bool or arr.dtype == object or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise DataError(f"`{name}` must hold integers, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ShapeError(f"`{name}` must be 1-D (one length per sequence), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ShapeError(f"`{name}` is empty; give at least one sequence")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(np.where(np.isfinite(arr), arr, 0)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"`{name}` must hold integers; {name}[{i}] = {arr[i]}")
    if arr.min() < 1:
        i = int(np.flatnonzero(arr < 1)[0])
        raise DataError(f"`{name}` must hold positive integers (every sequence has at least one row); {name}[{i}] = {arr[i]}")
    if arr.max() > n_rows:  # before the cast and the sum, which could wrap around
        i = int(np.argmax(arr))
        raise ShapeError(f"`{name}` must not exceed the {n_rows} rows of `{rows_name}`; {name}[{i}] = {arr[i]}")
    out = arr.astype(np.int64)
    total = int(out.sum())
    if total != n_rows:
        raise ShapeError(f"`{name}` sums to {total} but `{rows_name}` has {n_rows} rows")
    return out


def check_random_state(seed) -> np.random.SeedSequence:
    """Turn ``random_state`` into the :class:`numpy.random.SeedSequence` that seeds a fit.

    * ``None``: fresh entropy from the operating system;
    * an ``int`` ≥ 0: ``SeedSequence(seed)``, the same fit every time;
    * a ``SeedSequence``: a copy of it (the fit spawns children from the copy, so the given
      object is not changed and every fit with it is the same);
    * a ``numpy.random.Generator`` or ``numpy.random.RandomState``: one integer in
      [0, 2**63 − 1) is drawn from it and seeds the ``SeedSequence``. This advances the
      generator, so two fits given the same generator object differ, while a generator
      re-created from the same seed gives the same fit (as in scikit-learn).

    Parameters
    ----------
    seed : None, int, numpy.random.SeedSequence, numpy.random.Generator or numpy.random.RandomState

    Returns
    -------
    numpy.random.SeedSequence

    Raises
    ------
    ParameterError
        For a negative integer or any other type, naming ``random_state``.
    """
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size, n_children_spawned=seed.n_children_spawned)
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(0, 2**63 - 1)))
    if isinstance(seed, np.random.RandomState):
        return np.random.SeedSequence(int(seed.randint(0, 2**63 - 1, dtype=np.int64)))
    if _is_int(seed):
        if seed < 0:
            raise ParameterError(f"`random_state` must be a non-negative integer, got {seed}")
        return np.random.SeedSequence(int(seed))
    raise ParameterError(
        "`random_state` must be None, a non-negative int, a numpy SeedSequence, Generator or RandomState, "
        f"got {seed!r}"
    )


def check_param(name: str, value, *, kind: str, low=None, high=None, low_inclusive=False, options=None, allow_none=False):
    """Validate one scalar parameter; raise :class:`ParameterError` naming it."""
    if value is None and allow_none:
        return value
    if options is not None:
        if value not in options:
            raise ParameterError(f"`{name}` must be one of {sorted(map(str, options))}, got {value!r}")
        return value
    if kind == "int":
        ok = _is_int(value)
    elif kind == "real":
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "bool":
        ok = isinstance(value, (bool, np.bool_))
    else:  # pragma: no cover
        raise AssertionError(kind)
    if not ok:
        raise ParameterError(f"`{name}` must be {'an integer' if kind == 'int' else 'a finite number' if kind == 'real' else 'a bool'}, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise ParameterError(f"`{name}` must be {'>=' if low_inclusive else '>'} {low}, got {value!r}")
    if high is not None and value > high:
        raise ParameterError(f"`{name}` must be <= {high}, got {value!r}")
    return value
