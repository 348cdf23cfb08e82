"""Bag-of-words documents, kept sparse all the way into Rust.

A document source is a :class:`~bnpcore.data.BatchSource` with ``segment == "document"``:
``get(b)`` returns a batch of **whole documents** as a ``scipy.sparse.csr_array`` of shape
``(n_docs_in_batch, n_vocab)`` with float64 counts and int64 ``indices``/``indptr``. Its
``indptr`` is the batch's ``doc_range`` offset array: document d of the batch holds
the words ``indices[indptr[d]:indptr[d+1]]`` with counts ``data[indptr[d]:indptr[d+1]]``. Batches
are contiguous ranges of documents balanced by token count (:func:`~bnpcore.data.balanced_bounds`)
and are never shuffled. Nothing here densifies a corpus: the dense (n_docs × n_vocab) matrix of a
real corpus does not fit in memory.

Four inputs are accepted (:func:`document_source` picks the right class):

* :class:`DocumentBatches` — one count matrix: any scipy.sparse format (``csr_array``,
  ``csr_matrix``, CSC, COO, ...; converted to CSR once) or a dense count array;
* :class:`DocumentListBatches` — a list of count matrices or ``.npz`` files written by
  ``scipy.sparse.save_npz``, one batch each, read when visited (data larger than memory);
* :class:`BagOfWordsBatches` — a re-iterable bag-of-words corpus (gensim style: an iterable of
  documents, each a list of ``(word_id, count)`` pairs), re-read on every lap, never held whole;
* :class:`DocumentStream` — a one-shot iterator of such documents, consumed once in batches of
  ``docs_per_batch`` documents (streaming).

Counts are validated (finite, non-negative integers, word ids below the vocabulary size) with
errors naming the argument, the document and the word id; in bag-of-words documents ids and
counts must be numbers (ints, or integral floats; not bools or strings) and ids below
:data:`MAX_N_VOCAB`. Zero counts (explicit zeros stored in a sparse matrix, ``(word_id, 0)``
pairs) are dropped: they change no batch, fit or score.
"""

from __future__ import annotations

import itertools
import numbers
import os

import numpy as np

from bnpcore._validation import check_counts_csr, is_sparse, make_csr
from bnpcore.data._base import balanced_bounds
from bnpcore.exceptions import DataError, NonFiniteError, ParameterError, ShapeError

__all__ = [
    "AUTO_ENTRIES_PER_WORD",
    "BagOfWordsBatches",
    "DocumentBatches",
    "DocumentListBatches",
    "DocumentStream",
    "auto_document_batches",
    "bow_to_csr",
    "document_source",
]


def _is_path(x) -> bool:
    return isinstance(x, (str, os.PathLike))


def _tokens_per_doc(X) -> np.ndarray:
    """Token count of every document of a canonical CSR matrix."""
    cum = np.concatenate([[0.0], np.cumsum(X.data)])
    return np.diff(cum[X.indptr])


def _slice_docs(X, lo: int, hi: int):
    """Documents ``lo..hi`` of a canonical CSR matrix: views of its data and indices."""
    a, z = int(X.indptr[lo]), int(X.indptr[hi])
    return make_csr(X.data[a:z], X.indices[a:z], X.indptr[lo : hi + 1] - a, (hi - lo, X.shape[1]))


def _take_docs(X, idx):
    """Documents ``idx`` (sorted positions) of a canonical CSR matrix, copied."""
    idx = np.asarray(idx, dtype=np.int64)
    starts, stops = X.indptr[idx], X.indptr[idx + 1]
    lengths = stops - starts
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    pos = np.repeat(starts - indptr[:-1], lengths) + np.arange(int(indptr[-1]), dtype=np.int64)
    return make_csr(X.data[pos], X.indices[pos], indptr, (idx.shape[0], X.shape[1]))


def _init_subset(n: int, max_rows: int, rng) -> np.ndarray | None:
    """Sorted uniform subset of ``max_rows`` of ``n`` documents, or None for all of them."""
    if max_rows < 1:
        raise ParameterError(f"`max_rows` must be >= 1, got {max_rows}")
    if n <= max_rows:
        return None
    return np.sort(rng.choice(n, size=max_rows, replace=False))


#: ``n_batches=None``: every batch holds at least this many (document, word) entries per
#: vocabulary word (see :func:`auto_document_batches`) ...
AUTO_ENTRIES_PER_WORD = 25
#: ... and there are at most this many batches
AUTO_MAX_DOC_BATCHES = 10


def auto_document_batches(n_entries: int, n_vocab: int, n_docs: int) -> int:
    r"""The number of batches ``n_batches=None`` gives a corpus of ``n_docs`` documents with
    ``n_entries`` distinct (document, word) entries over ``n_vocab`` words:
    :math:`\max(1, \min(10, \lfloor n_{\rm entries}/(25\,V)\rfloor, D))`.

    A memoized lap pays, per batch, a document step whose cost grows with the batch's entries
    (times K) and a global step whose cost grows with the vocabulary (the K × V topic table
    :math:`\exp\mathbb E[\ln\phi]` and the topics' Dirichlet terms); the ratio of the two
    does not depend on K. Batches are made big enough that the document step is at least 25
    times the per-batch work on the vocabulary, and there are at most 10 of them: the toy bars
    (2,000 documents, 283,578 entries, V = 900) get 10 batches, gensim's Lee corpus (250
    documents, 18,636 entries, V = 3,811) one — a full-dataset lap, where on Lee the fit was
    2.4× faster than with ten batches and scored better on held-out documents
    (``benches/bench_topic.py``)."""
    n = int(n_entries) // (AUTO_ENTRIES_PER_WORD * max(int(n_vocab), 1))
    return int(max(1, min(AUTO_MAX_DOC_BATCHES, n, int(n_docs))))


class DocumentBatches:
    """B contiguous batches of whole documents over one count matrix, kept sparse.

    Parameters
    ----------
    X : scipy.sparse matrix or array of shape (n_docs, n_vocab), or a dense count array
        Word counts, one row per document. Converted once to a canonical CSR matrix
        (:func:`bnpcore._validation.check_counts_csr`); a CSR input with float64 data and int64
        indices is used without a copy.
    n_batches : int or None
        B, at most the number of documents; None: ``auto`` of the corpus.
    n_vocab : int or None
        Required vocabulary size (a fitted model's); None takes ``X.shape[1]``.
    name : str
        Argument name used in error messages.
    auto : callable(n_entries, n_vocab, n_docs) -> int, optional
        The rule for ``n_batches=None`` (default :func:`auto_document_batches`).

    Attributes
    ----------
    X : scipy.sparse.csr_array of shape (n_docs, n_vocab)
    bounds : ndarray of int64, shape (n_batches + 1,)
        Batch b holds documents ``bounds[b]:bounds[b+1]``, balanced by token count.
    check_data : callable(batch, name) or None
        An extra check applied to every batch when it is read (the observation model's).

    Raises
    ------
    ShapeError, DataError, NonFiniteError
        Invalid counts (see :func:`~bnpcore._validation.check_counts_csr`), or a corpus without
        a single word.
    ParameterError
        If ``n_batches`` exceeds the number of documents.
    """

    segment = "document"
    shuffles = False

    def __init__(self, X, n_batches: int | None = 1, *, n_vocab: int | None = None, name: str = "X", auto=None):
        self.X = check_counts_csr(X, name=name, n_vocab=n_vocab)
        self.name = name
        self.doc_tokens = _tokens_per_doc(self.X)
        if self.doc_tokens.sum() <= 0:
            raise DataError(f"`{name}` holds no words (every document is empty)")
        if n_batches is None:
            n_batches = (auto or auto_document_batches)(self.X.nnz, self.X.shape[1], self.X.shape[0])
        self.bounds = balanced_bounds(self.doc_tokens, n_batches, what="documents")
        self.check_data = None

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_segments(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_tokens(self) -> float:
        """Total word count of the corpus."""
        return float(self.doc_tokens.sum())

    def __len__(self) -> int:
        return int(self.bounds.shape[0] - 1)

    def batch_size(self, b: int) -> int:
        return int(self.bounds[b + 1] - self.bounds[b])

    def batch_tokens(self, b: int) -> float:
        return float(self.doc_tokens[self.bounds[b] : self.bounds[b + 1]].sum())

    def get(self, b: int):
        """Batch ``b``: documents ``bounds[b]:bounds[b+1]`` as a CSR matrix sharing ``X``'s arrays
        (its ``indptr`` is the batch's ``doc_range``)."""
        out = _slice_docs(self.X, int(self.bounds[b]), int(self.bounds[b + 1]))
        if self.check_data is not None:
            self.check_data(out, f"{self.name} (batch {b})")
        return out

    def sample_for_init(self, max_rows: int, rng):
        """At most ``max_rows`` whole documents (all, or a sorted uniform subset) as a CSR matrix."""
        idx = _init_subset(self.n_rows, max_rows, rng)
        return self.X if idx is None else _take_docs(self.X, idx)


def _npz_shape(path, name: str) -> tuple:
    """Shape of a sparse matrix saved by ``scipy.sparse.save_npz``, reading only its header members."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as f:
            fmt = f["format"].item()
            fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
            shape = tuple(int(s) for s in f["shape"])
    except FileNotFoundError:
        raise DataError(f"`{name}`: no such file: {os.fspath(path)!r}") from None
    except Exception as exc:
        raise DataError(f"`{name}`: {os.fspath(path)!r} is not a sparse matrix saved by scipy.sparse.save_npz ({exc})") from None
    if fmt not in ("csr", "csc", "coo", "bsr", "dia"):
        raise DataError(f"`{name}`: {os.fspath(path)!r} holds a sparse matrix of unknown format {fmt!r}")
    return shape


def _load_npz(path, name: str):
    import scipy.sparse

    try:
        return scipy.sparse.load_npz(os.fspath(path))
    except FileNotFoundError:
        raise DataError(f"`{name}`: no such file: {os.fspath(path)!r}") from None
    except Exception as exc:
        raise DataError(f"`{name}`: {os.fspath(path)!r} is not a sparse matrix saved by scipy.sparse.save_npz ({exc})") from None


class DocumentListBatches:
    """User-given batches of documents: each element of ``items`` is one batch.

    Parameters
    ----------
    items : list of scipy.sparse matrices, dense count arrays or ``.npz`` paths
        Paths are files written by ``scipy.sparse.save_npz``; only their shape is read here,
        the counts when the batch is visited (so a corpus larger than memory can be fitted
        batch by batch). Every batch is validated when it is read, with its index in the
        error message.
    n_vocab : int or None
        Required vocabulary size; None takes the width of the batches.

    Raises
    ------
    ShapeError
        If a batch is not 2-D, has no documents, or its width differs from the others' (or
        from ``n_vocab``).
    DataError
        When a batch is read, if it holds another number of documents than when the source
        was built (a ``.npz`` file replaced during a fit).
    """

    segment = "document"
    shuffles = False

    def __init__(self, items, *, n_vocab: int | None = None, name: str = "X"):
        self.items = list(items)
        self.name = name
        if not self.items:
            raise ShapeError(f"`{name}` is an empty list of batches")
        shapes = []
        for b, item in enumerate(self.items):
            shape = _npz_shape(item, f"{name}[{b}]") if _is_path(item) else tuple(getattr(item, "shape", ()))
            if len(shape) != 2:
                raise ShapeError(f"batch {b} of `{name}` must be 2-D (n_docs, n_vocab), got shape {shape}")
            if shape[0] < 1:
                raise ShapeError(f"batch {b} of `{name}` has no documents")
            shapes.append(shape)
        width = n_vocab if n_vocab is not None else shapes[0][1]
        for b, shape in enumerate(shapes):
            if shape[1] != width:
                where = f"n_vocab={n_vocab}" if n_vocab is not None else f"batch 0 has {width}"
                raise ShapeError(f"batch {b} of `{name}` has {shape[1]} columns (vocabulary size) but {where}")
        self.sizes = np.array([s[0] for s in shapes], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self._n_vocab = int(width)
        self.check_data = None

    @property
    def n_rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_segments(self) -> int:
        return self.n_rows

    @property
    def n_features(self) -> int:
        return self._n_vocab

    def __len__(self) -> int:
        return len(self.items)

    def batch_size(self, b: int) -> int:
        return int(self.sizes[b])

    def get(self, b: int):
        """Batch ``b``, read (``.npz`` paths are loaded on every visit) and validated."""
        item = self.items[b]
        raw = _load_npz(item, f"{self.name}[{b}]") if _is_path(item) else item
        label = f"{self.name} (batch {b})"
        n_docs = tuple(getattr(raw, "shape", ()))[:1]
        if n_docs and n_docs[0] != self.sizes[b]:
            where = f" ({os.fspath(item)!r})" if _is_path(item) else ""
            raise DataError(
                f"batch {b} of `{self.name}`{where} has {n_docs[0]} documents on this read but {int(self.sizes[b])} when the fit started; "
                "the batches must not change during a fit"
            )
        out = check_counts_csr(raw, name=label, n_vocab=self._n_vocab)
        if self.check_data is not None:
            self.check_data(out, label)
        return out

    def sample_for_init(self, max_rows: int, rng):
        """At most ``max_rows`` whole documents drawn uniformly across the batches (each batch
        holding one of them is read once)."""
        import scipy.sparse

        idx = _init_subset(self.n_rows, max_rows, rng)
        if idx is None:
            idx = np.arange(self.n_rows)
        which = np.searchsorted(self.offsets, idx, side="right") - 1
        parts = []
        for b in np.unique(which):
            parts.append(_take_docs(self.get(int(b)), idx[which == b] - self.offsets[b]))
        out = scipy.sparse.vstack(parts, format="csr")
        return make_csr(out.data, out.indices, out.indptr, out.shape)


# --------------------------------------------------------------------------- bag-of-words corpora
#: largest vocabulary a bag-of-words corpus may imply: word ids lie in ``0..MAX_N_VOCAB - 1``
#: (int32 indices, as in scipy.sparse and gensim; a larger id is a corrupt document, and the
#: vocabulary's dense topic rows would not fit in memory anyway)
MAX_N_VOCAB = 2**31 - 1


def _fmt_id(x: float) -> str:
    return str(int(x)) if x == np.floor(x) and abs(x) < 2**63 else f"{x:g}"


def _non_number(items, d: int, name: str) -> DataError:
    """The error for the first word id or count of a document's (word_id, count) pairs that is
    not a real number (a str, a bool, ...)."""
    for pair in items:
        for what, x in zip(("word id", "count"), pair):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
                return DataError(f"`{name}`: document {d} has {what} {x!r} of type {type(x).__name__}; word ids and counts must be integers")
    raise AssertionError("no such item")  # pragma: no cover


def _parse_doc(doc, d: int, n_vocab: int | None, name: str):
    """(word ids, counts) of one bag-of-words document, validated: ids and counts must be
    numbers of integer value (ints, or floats such as ``2.0``; not bools or strings), ids in
    ``0..n_vocab - 1`` (``n_vocab`` None: below :data:`MAX_N_VOCAB`)."""
    try:
        arr = np.asarray(doc)
    except (TypeError, ValueError):
        raise DataError(f"`{name}`: document {d} is not a list of (word_id, count) pairs") from None
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if arr.ndim != 2 or arr.shape[1] != 2:
        hint = ""
        if arr.ndim == 1 and arr.dtype.kind in "biuf":
            # a row of counts: the corpus was probably a count matrix written as nested lists
            hint = "; a count matrix given as a list of rows is read as a corpus of documents: pass np.asarray(X)"
        raise DataError(f"`{name}`: document {d} is not a list of (word_id, count) pairs (got shape {arr.shape}){hint}")
    # numpy casts bools among numbers to numbers, and numbers next to a str to str: the types
    # of a list's items tell (of an array's, unless it is numeric)
    items = arr.tolist() if isinstance(doc, np.ndarray) else doc
    if arr.dtype.kind not in "iuf" or items is doc:
        types = set(map(type, itertools.chain.from_iterable(items)))
        if not all(issubclass(t, numbers.Real) and not issubclass(t, (bool, np.bool_)) for t in types):
            raise _non_number(items, d, name)
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        raise DataError(f"`{name}`: document {d} is not a list of (word_id, count) pairs of numbers") from None
    ids, counts = arr[:, 0], arr[:, 1]
    if not np.isfinite(arr).all():
        raise NonFiniteError(f"`{name}`: document {d} contains NaN or infinity")
    limit = MAX_N_VOCAB if n_vocab is None else min(int(n_vocab), MAX_N_VOCAB)
    bad = (ids < 0) | (ids != np.floor(ids)) | (ids >= limit)
    if bad.any():
        j = ids[np.flatnonzero(bad)[0]]
        why = "" if n_vocab is not None and limit == n_vocab else f" (a vocabulary has at most {MAX_N_VOCAB} words)"
        raise DataError(f"`{name}`: document {d} has word id {_fmt_id(j)}; word ids must be integers in 0..{limit - 1}{why}")
    if counts.min() < 0:
        raise DataError(f"`{name}` must hold non-negative counts; document {d} has {counts.min():g}")
    if np.any(counts != np.floor(counts)):
        raise DataError(f"`{name}` must hold integer counts; document {d} has {counts[counts != np.floor(counts)][0]:g}")
    return ids.astype(np.int64), counts


def bow_to_csr(docs, n_vocab: int, *, name: str = "X", first_doc: int = 0):
    """Bag-of-words documents as a canonical CSR matrix (duplicated word ids are summed).

    Parameters
    ----------
    docs : iterable of documents
        Each document is a list (or array) of ``(word_id, count)`` pairs, as in gensim. A
        ``(word_id, 0)`` pair adds no entry (its word id is still checked).
    n_vocab : int
        Vocabulary size: word ids must lie in ``0..n_vocab-1``.
    name : str
        Argument name used in error messages.
    first_doc : int
        Index of the first document in the whole corpus (for error messages).

    Returns
    -------
    scipy.sparse.csr_array of shape (n_docs, n_vocab)
    """
    ids, counts, lengths = [], [], []
    for d, doc in enumerate(docs):
        i, c = _parse_doc(doc, first_doc + d, n_vocab, name)
        ids.append(i)
        counts.append(c)
        lengths.append(i.shape[0])
    indptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    raw = make_csr(
        np.concatenate(counts) if counts else np.zeros(0),
        np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64),
        indptr,
        (len(lengths), n_vocab),
    )
    return check_counts_csr(raw, name=name, n_vocab=n_vocab, min_rows=0)


def _is_count_matrix(X) -> bool:
    """Whether ``X`` is read as one document-by-word count matrix rather than as a corpus of
    bag-of-words documents: a scipy.sparse matrix or array, a numpy array, or any other 2-D
    array-like that is not a list or tuple — an object exposing ``__array__`` with a 2-D
    ``shape`` (a pandas DataFrame, ...). Lists and tuples are always documents (a list of
    ``(word_id, count)`` pairs per document); a 1-D array-like such as a pandas Series of
    such lists is a corpus too."""
    if is_sparse(X) or isinstance(X, np.ndarray):
        return True
    if isinstance(X, (list, tuple)) or not hasattr(X, "__array__"):
        return False
    shape = getattr(X, "shape", None)
    try:
        return shape is not None and len(shape) == 2
    except TypeError:
        return False


def _is_iterator(x) -> bool:
    try:
        return iter(x) is x
    except TypeError:
        return False


class BagOfWordsBatches:
    """B contiguous batches of whole documents over a re-iterable bag-of-words corpus.

    The corpus (gensim style: an iterable of documents, each a list of ``(word_id, count)``
    pairs; a list of such lists, or any object whose ``__iter__`` starts a new pass) is read
    once here to count the documents and their tokens, and then re-read whenever batches are
    visited: only the batch being read is held in memory. Reading batches in order costs one
    pass per lap; going back to an earlier batch restarts the pass.

    Parameters
    ----------
    corpus : re-iterable of documents
        Not an iterator (that is one pass only: use :class:`DocumentStream`).
    n_batches : int or None
        B, at most the number of documents; None: ``auto`` of the corpus.
    n_vocab : int or None
        Vocabulary size; None takes the largest word id + 1 seen in the first pass.
    name : str
    auto : callable(n_entries, n_vocab, n_docs) -> int, optional
        The rule for ``n_batches=None`` (default :func:`auto_document_batches`).

    Raises
    ------
    ParameterError
        If ``corpus`` is an iterator, or ``n_batches`` exceeds the number of documents.
    DataError
        If a document is malformed (message names the document), the corpus has no word, or
        it yields a different number of documents on a later pass.
    """

    segment = "document"
    shuffles = False

    def __init__(self, corpus, n_batches: int | None = 1, *, n_vocab: int | None = None, name: str = "X", auto=None):
        if _is_iterator(corpus):
            raise ParameterError(
                f"`{name}` is an iterator, which can be read only once; pass a re-iterable corpus "
                "(a list, or an object whose __iter__ starts a new pass) or stream it with DocumentStream"
            )
        try:
            iter(corpus)
        except TypeError:
            raise DataError(f"`{name}` must be an iterable of documents, got {type(corpus).__name__}") from None
        self.corpus = corpus
        self.name = name
        tokens, top, entries = [], -1, 0
        for d, doc in enumerate(corpus):
            ids, counts = _parse_doc(doc, d, n_vocab, name)
            tokens.append(float(counts.sum()))
            entries += int(np.count_nonzero(counts))  # a (word_id, 0) pair is no entry
            if ids.size:
                top = max(top, int(ids.max()))
        if not tokens:
            raise ShapeError(f"`{name}` has no documents")
        self.doc_tokens = np.array(tokens)
        if self.doc_tokens.sum() <= 0:
            raise DataError(f"`{name}` holds no words (every document is empty)")
        self._n_vocab = int(n_vocab) if n_vocab is not None else top + 1
        if n_batches is None:
            n_batches = (auto or auto_document_batches)(entries, self._n_vocab, len(tokens))
        self.bounds = balanced_bounds(self.doc_tokens, n_batches, what="documents")
        self._iter = None
        self._pos = 0
        self.check_data = None

    @property
    def n_rows(self) -> int:
        return int(self.doc_tokens.shape[0])

    @property
    def n_segments(self) -> int:
        return self.n_rows

    @property
    def n_features(self) -> int:
        return self._n_vocab

    @property
    def n_tokens(self) -> float:
        return float(self.doc_tokens.sum())

    def __len__(self) -> int:
        return int(self.bounds.shape[0] - 1)

    def batch_size(self, b: int) -> int:
        return int(self.bounds[b + 1] - self.bounds[b])

    def _read(self, lo: int, hi: int) -> list:
        """Documents ``lo..hi`` of the current pass (a new pass if ``lo`` was passed already)."""
        if self._iter is None or self._pos > lo:
            self._iter, self._pos = iter(self.corpus), 0
        docs = []
        try:
            while self._pos < hi:
                doc = next(self._iter)
                if self._pos >= lo:
                    docs.append(doc)
                self._pos += 1
        except StopIteration:
            self._iter = None
            raise self._changed(self._pos) from None
        if hi == self.n_rows:  # end of the pass: the corpus must end here too
            extra = next(self._iter, None) is not None
            self._iter = None
            if extra:
                raise self._changed(f"more than {hi}")
        return docs

    def _changed(self, got) -> DataError:
        return DataError(
            f"`{self.name}` yielded {got} documents on this pass but {self.n_rows} on the first one; "
            "the corpus must yield the same documents on every pass"
        )

    def get(self, b: int):
        """Batch ``b`` (documents ``bounds[b]:bounds[b+1]``) read from the corpus as a CSR matrix."""
        lo, hi = int(self.bounds[b]), int(self.bounds[b + 1])
        label = f"{self.name} (batch {b})"
        out = bow_to_csr(self._read(lo, hi), self._n_vocab, name=label, first_doc=lo)
        if self.check_data is not None:
            self.check_data(out, label)
        return out

    def sample_for_init(self, max_rows: int, rng):
        """At most ``max_rows`` whole documents (all, or a sorted uniform subset), read in one pass."""
        idx = _init_subset(self.n_rows, max_rows, rng)
        if idx is None:
            return bow_to_csr(self._read(0, self.n_rows), self._n_vocab, name=self.name)
        wanted = set(idx.tolist())
        docs = [doc for d, doc in enumerate(self.corpus) if d in wanted]  # one pass, keeping only the subset
        if len(docs) != len(wanted):
            raise self._changed(f"fewer than {int(idx[-1]) + 1}")
        return bow_to_csr(docs, self._n_vocab, name=f"{self.name} (initialisation subsample)")


class DocumentStream:
    """A one-shot stream of bag-of-words documents, yielded as CSR batches of whole documents.

    Iterating over the stream consumes ``corpus`` once, in consecutive batches of
    ``docs_per_batch`` documents (the last batch may be smaller); each batch is validated and
    converted to a ``csr_array`` of shape (n_docs_in_batch, n_vocab) when it is reached. This is
    how an iterator (a generator reading files, ...) is fitted: one streaming pass, each batch
    processed and forgotten.

    Parameters
    ----------
    corpus : iterable of documents (each a list of ``(word_id, count)`` pairs)
    docs_per_batch : int
    n_vocab : int
        Vocabulary size; required, since it cannot be known before the stream ends.

    Raises
    ------
    ParameterError
        If ``n_vocab`` or ``docs_per_batch`` is missing or not a positive integer, or the stream
        is iterated a second time.
    """

    segment = "document"
    shuffles = False

    def __init__(self, corpus, docs_per_batch: int = 1000, *, n_vocab: int | None = None, name: str = "X"):
        for arg, value in (("n_vocab", n_vocab), ("docs_per_batch", docs_per_batch)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                hint = " (a one-shot stream of documents cannot tell the vocabulary size before it ends)" if arg == "n_vocab" else ""
                raise ParameterError(f"`{arg}` must be a positive integer, got {value!r}{hint}")
        self.corpus = corpus
        self.docs_per_batch = int(docs_per_batch)
        self._n_vocab = int(n_vocab)
        self.name = name
        self._consumed = False

    @property
    def n_features(self) -> int:
        return self._n_vocab

    def __iter__(self):
        if self._consumed:
            raise ParameterError(f"`{self.name}` is a one-shot stream and has been read already")
        self._consumed = True
        return self._batches()

    def _batches(self):
        docs, first, b = [], 0, 0
        for doc in self.corpus:
            docs.append(doc)
            if len(docs) == self.docs_per_batch:
                yield bow_to_csr(docs, self._n_vocab, name=f"{self.name} (batch {b})", first_doc=first)
                first, b, docs = first + len(docs), b + 1, []
        if docs:
            yield bow_to_csr(docs, self._n_vocab, name=f"{self.name} (batch {b})", first_doc=first)


def document_source(X, n_batches: int | None = 1, *, n_vocab: int | None = None, docs_per_batch: int = 1000, auto=None):
    """The document source for ``X`` (see the module docs).

    Parameters
    ----------
    X : scipy.sparse matrix, array-like, ``.npz`` path, list of batches, corpus or iterator
        * a scipy.sparse matrix/array (any format), a dense count ``ndarray`` or other 2-D
          array-like (a pandas DataFrame, any object with ``__array__`` and a 2-D ``shape``;
          :func:`_is_count_matrix`), or the path of a ``.npz`` file written by
          ``scipy.sparse.save_npz``: :class:`DocumentBatches`;
        * a list or tuple whose elements are all scipy.sparse matrices or ``.npz`` paths:
          :class:`DocumentListBatches` (one batch each; ``n_batches`` is ignored);
        * an iterator (one pass only): :class:`DocumentStream` of ``docs_per_batch`` documents
          per batch (needs ``n_vocab``);
        * any other iterable (a list of documents, a gensim corpus): :class:`BagOfWordsBatches`.
          A list of lists is read as bag-of-words documents, never as a dense count matrix
          (pass an ``ndarray`` or a DataFrame for that): ``[[1, 0], [0, 2]]`` is two documents
          of one ``(word_id, count)`` pair each.
    n_batches : int or None
        None: ``auto`` of the corpus (matrices and re-iterable corpora).
    n_vocab : int or None
    docs_per_batch : int
        Stream batch size (iterators only).
    auto : callable(n_entries, n_vocab, n_docs) -> int, optional
        The rule for ``n_batches=None`` (default :func:`auto_document_batches`).

    Returns
    -------
    DocumentBatches, DocumentListBatches, BagOfWordsBatches or DocumentStream

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from bnpcore.data import document_source
    >>> counts = sp.coo_array(([2, 1, 3, 1], ([0, 0, 1, 2], [0, 4, 2, 3])), shape=(3, 5))
    >>> src = document_source(counts, n_batches=2)
    >>> src.bounds  # whole documents, balanced by tokens: 3 | 3 + 1
    array([0, 1, 3])
    >>> batch = src.get(1)
    >>> batch.shape, batch.indptr  # indptr is the batch's doc_range
    ((2, 5), array([0, 1, 2]))
    >>> corpus = [[(0, 2), (4, 1)], [(2, 3)], [(3, 1)]]  # gensim-style bag of words
    >>> (document_source(corpus, n_batches=2).get(1) != batch).nnz
    0
    """
    if _is_path(X):
        return DocumentBatches(_load_npz(X, "X"), n_batches, n_vocab=n_vocab, auto=auto)
    if _is_count_matrix(X):
        return DocumentBatches(X, n_batches, n_vocab=n_vocab, auto=auto)
    if isinstance(X, (list, tuple)) and X and all(is_sparse(x) or _is_path(x) for x in X):
        return DocumentListBatches(X, n_vocab=n_vocab)
    if _is_iterator(X):
        return DocumentStream(X, docs_per_batch, n_vocab=n_vocab)
    return BagOfWordsBatches(X, n_batches, n_vocab=n_vocab, auto=auto)
