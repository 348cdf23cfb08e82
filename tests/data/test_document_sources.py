"""Document sources: bag-of-words counts stay sparse, batches are whole documents in order."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore.data import (
    BagOfWordsBatches,
    BatchSource,
    DocumentBatches,
    DocumentListBatches,
    DocumentStream,
    bow_to_csr,
    document_source,
)
from bnpcore.exceptions import BnpcoreError, DataError, NonFiniteError, ParameterError, ShapeError


def corpus(n_docs=40, n_vocab=25, seed=0, empty=(3,)):
    """Dense counts with varied document lengths (and empty documents)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, size=n_docs)
    X = np.zeros((n_docs, n_vocab))
    for d, n in enumerate(lengths):
        if d not in empty:
            X[d] = rng.multinomial(n, rng.dirichlet(np.full(n_vocab, 0.3)))
    return X


def as_bow(X):
    """gensim-style documents: lists of (word_id, count) pairs."""
    return [[(int(j), float(X[d, j])) for j in np.flatnonzero(X[d])] for d in range(X.shape[0])]


def check_csr(A, dense):
    assert isinstance(A, sp.csr_array)
    assert A.data.dtype == np.float64 and A.indices.dtype == np.int64 and A.indptr.dtype == np.int64
    assert A.indptr[0] == 0 and A.indptr[-1] == A.data.shape[0] == A.indices.shape[0]
    for d in range(A.shape[0]):  # canonical: sorted, no duplicates
        assert np.all(np.diff(A.indices[A.indptr[d] : A.indptr[d + 1]]) > 0)
    np.testing.assert_array_equal(A.toarray(), dense)


def concat(batches):
    return np.vstack([b.toarray() for b in batches])


FORMATS = {
    "csr_array": sp.csr_array,
    "csr_matrix": sp.csr_matrix,
    "csc_array": sp.csc_array,
    "csc_matrix": sp.csc_matrix,
    "coo_array": sp.coo_array,
    "coo_matrix": sp.coo_matrix,
    "lil_matrix": sp.lil_matrix,
    "dense": np.asarray,
    "dense_int": lambda X: X.astype(np.int32),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n_batches", [1, 3, 7])
def test_every_format_gives_the_same_batches(fmt, n_batches):
    X = corpus()
    src = document_source(FORMATS[fmt](X), n_batches)
    assert isinstance(src, DocumentBatches) and isinstance(src, BatchSource)
    assert src.segment == "document" and not src.shuffles
    assert (src.n_rows, src.n_segments, src.n_features, len(src)) == (40, 40, 25, n_batches)
    assert src.n_tokens == X.sum()
    check_csr(src.X, X)
    batches = [src.get(b) for b in range(len(src))]
    for b, batch in enumerate(batches):
        lo, hi = src.bounds[b], src.bounds[b + 1]
        check_csr(batch, X[lo:hi])  # whole documents, contiguous, in order
        assert src.batch_size(b) == batch.shape[0] == hi - lo
        assert src.batch_tokens(b) == X[lo:hi].sum()
        doc_range = batch.indptr  # the offset array that crosses into Rust
        assert doc_range.shape == (hi - lo + 1,)
    np.testing.assert_array_equal(concat(batches), X)  # never shuffled


def test_batches_share_the_corpus_arrays():
    X = sp.csr_array(corpus())
    src = DocumentBatches(X, 4)
    for b in range(4):
        batch = src.get(b)
        assert np.shares_memory(batch.data, src.X.data) and np.shares_memory(batch.indices, src.X.indices)
    # a CSR with float64 data and int64 indices is used as it is, without a copy
    Y = src.X
    Z = DocumentBatches(Y, 2).X
    assert np.shares_memory(Z.data, Y.data) and np.shares_memory(Z.indices, Y.indices) and np.shares_memory(Z.indptr, Y.indptr)


def test_split_is_deterministic_and_balanced_by_tokens():
    X = corpus(n_docs=300, seed=3)
    tokens = X.sum(axis=1)
    for B in (2, 5, 13):
        a, b = DocumentBatches(X, B), DocumentBatches(sp.coo_array(X), B)
        np.testing.assert_array_equal(a.bounds, b.bounds)
        per_batch = [a.batch_tokens(i) for i in range(B)]
        assert max(per_batch) <= tokens.sum() / B + tokens.max()
        assert min(per_batch) >= tokens.sum() / B - tokens.max()


def test_duplicates_are_summed_and_input_left_alone():
    rows, cols = np.array([0, 0, 1, 0, 2]), np.array([3, 1, 2, 3, 0])
    vals = np.array([1.0, 2.0, 5.0, 4.0, 1.0])
    X = sp.coo_array((vals, (rows, cols)), shape=(3, 4))
    before = (X.row.copy(), X.col.copy(), X.data.copy())
    src = DocumentBatches(X)
    check_csr(src.X, np.array([[0, 2, 0, 5], [0, 0, 5, 0], [1, 0, 0, 0]], dtype=float))
    for got, want in zip((X.row, X.col, X.data), before):
        np.testing.assert_array_equal(got, want)
    # an unsorted CSR is sorted in a copy, not in place
    U = sp.csr_array((np.array([1.0, 2.0]), np.array([2, 0]), np.array([0, 2])), shape=(1, 3))
    out = DocumentBatches(U).X
    np.testing.assert_array_equal(U.indices, [2, 0])
    np.testing.assert_array_equal(out.indices, [0, 2])
    np.testing.assert_array_equal(out.data, [2.0, 1.0])


def test_stored_zeros_are_dropped_and_input_left_alone():
    """Explicit zeros (a CSR or COO matrix whose ``data`` was filtered in place, a
    ``(word_id, 0)`` pair of a bag-of-words document) are no counts: the canonical matrix and
    the default number of batches are those without them; the caller's arrays are unchanged."""
    # 60 documents over 2 words, each with one count and one stored zero: 120 stored entries
    # would make two default batches (25 entries per word each), the 60 real ones make one
    data = np.tile([1.0, 0.0], 60)
    indices = np.tile([0, 1], 60).astype(np.int64)
    indptr = np.arange(0, 121, 2, dtype=np.int64)
    Xz = sp.csr_array((data, indices, indptr), shape=(60, 2))
    assert Xz.nnz == 120
    want = np.tile([[1.0, 0.0]], (60, 1))
    bow = [[(0, 1), (1, 0)] for _ in range(60)]
    for X in (Xz, sp.csr_matrix(Xz), sp.coo_array(Xz), sp.csc_array(Xz), bow):
        src = document_source(X, None)
        assert len(src) == 1, type(X)
        out = src.get(0)
        check_csr(out, want)
        assert out.nnz == 60 and np.all(out.data > 0)
    np.testing.assert_array_equal(Xz.data, data)
    np.testing.assert_array_equal(Xz.indices, indices)
    np.testing.assert_array_equal(Xz.indptr, indptr)
    # a document holding only stored zeros becomes an empty document
    E = sp.csr_array((np.array([0.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2])), shape=(2, 3))
    out = DocumentBatches(E).X
    np.testing.assert_array_equal(out.indptr, [0, 0, 1])
    np.testing.assert_array_equal(out.data, [2.0])
    np.testing.assert_array_equal(E.data, [0.0, 2.0])


def test_sample_for_init_is_whole_documents():
    X = corpus(n_docs=100)
    src = DocumentBatches(sp.csr_matrix(X), 4)
    assert src.sample_for_init(1000, np.random.default_rng(0)) is src.X
    sub = src.sample_for_init(10, np.random.default_rng(0))
    check_csr(sub, sub.toarray())
    assert sub.shape == (10, 25)
    rows = {tuple(r) for r in X}
    assert all(tuple(r) in rows for r in sub.toarray())
    again = src.sample_for_init(10, np.random.default_rng(0))
    np.testing.assert_array_equal(again.toarray(), sub.toarray())
    with pytest.raises(ParameterError, match="max_rows"):
        src.sample_for_init(0, np.random.default_rng(0))


# ------------------------------------------------------------------------------ never densified
@pytest.fixture
def no_densify(monkeypatch):
    """Any toarray()/todense()/A on a scipy.sparse object raises."""

    def refuse(self, *args, **kwargs):
        raise AssertionError("a sparse corpus was densified")

    classes = {sp.csr_array, sp.csr_matrix, sp.csc_array, sp.csc_matrix, sp.coo_array, sp.coo_matrix}
    for cls in list(classes):
        classes.update(cls.__mro__)
    for cls in classes:
        for name in ("toarray", "todense"):
            if name in vars(cls):
                monkeypatch.setattr(cls, name, refuse)
    monkeypatch.setattr(np, "asarray", _guard_asarray(np.asarray))


def _guard_asarray(orig):
    def asarray(a, *args, **kwargs):
        if sp.issparse(a):
            raise AssertionError("np.asarray on a sparse matrix")
        return orig(a, *args, **kwargs)

    return asarray


def test_guard_catches_densification(no_densify):
    with pytest.raises(AssertionError, match="densified"):
        sp.csr_array(np.eye(2)).toarray()
    with pytest.raises(AssertionError, match="densified"):
        sp.coo_matrix(np.eye(2)).todense()


@pytest.mark.parametrize("fmt", [f for f in FORMATS if not f.startswith("dense") and f != "lil_matrix"])
def test_sparse_corpus_is_never_densified(fmt, tmp_path, no_densify):
    rng = np.random.default_rng(0)
    X = sp.random_array((60, 500), density=0.05, random_state=rng, format="csr")
    X.data = np.ceil(10 * X.data)
    Y = FORMATS[fmt](X)
    src = document_source(Y, 3)
    for b in range(3):
        src.get(b)
    src.sample_for_init(10, rng)
    sp.save_npz(tmp_path / "b.npz", sp.csr_matrix(X[:30]))
    listed = document_source([FORMATS[fmt](X[30:]), str(tmp_path / "b.npz")])
    assert isinstance(listed, DocumentListBatches)
    for b in range(2):
        listed.get(b)
    listed.sample_for_init(10, rng)


def test_large_vocabulary_corpus_allocates_no_dense_matrix():
    """A corpus whose dense form would take 80 MB is read with a few MB: nothing of size
    n_docs × n_vocab is ever allocated (tracemalloc sees numpy's allocations)."""
    n_docs, n_vocab, per_doc = 500, 20_000, 40
    rng = np.random.default_rng(0)
    rows = np.repeat(np.arange(n_docs), per_doc)
    cols = rng.integers(0, n_vocab, size=rows.shape[0])
    X = sp.coo_array((rng.integers(1, 5, size=rows.shape[0]).astype(float), (rows, cols)), shape=(n_docs, n_vocab))
    dense_bytes = n_docs * n_vocab * 8
    # control: the measurement does see a densification (a tenth of the corpus)
    tracemalloc.start()
    X.tocsr()[: n_docs // 10].toarray()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak >= dense_bytes // 10
    tracemalloc.start()
    src = document_source(X, 5)
    for b in range(len(src)):
        src.get(b)
    src.sample_for_init(100, rng)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < dense_bytes // 20, f"peak {peak} bytes: a dense matrix was allocated"


# ------------------------------------------------------------------------------ bad input
def expect(exc_type, match, fn, *args, **kwargs):
    with pytest.raises(exc_type, match=match) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, BnpcoreError) and isinstance(info.value, ValueError)
    return info.value


def with_value(d, j, value, X=None):
    X = corpus() if X is None else X.copy()
    X[d, j] = value
    return X


@pytest.mark.parametrize("make", [np.asarray, sp.csr_array, sp.coo_matrix, sp.csc_array], ids=["dense", "csr", "coo", "csc"])
def test_bad_counts(make):
    expect(DataError, r"`X` must hold non-negative counts; document 5 has -2\.0 of word id 4", DocumentBatches, make(with_value(5, 4, -2.0)))
    expect(DataError, r"`X` must hold integer counts; document 7 has 1\.5 of word id 0", DocumentBatches, make(with_value(7, 0, 1.5)))
    if make is np.asarray:
        expect(NonFiniteError, "`X` contains NaN", DocumentBatches, with_value(2, 2, np.nan))
    else:
        expect(NonFiniteError, r"`X` contains NaN or infinity \(document 2, word id 2\)", DocumentBatches, make(with_value(2, 2, np.nan)))
        expect(NonFiniteError, r"document 9, word id 1", DocumentBatches, make(with_value(9, 1, np.inf)))


def test_bad_shapes_and_types():
    X = corpus()
    expect(ShapeError, r"^X has 25 features, but it is expecting 30 features as input \(the vocabulary size", DocumentBatches, sp.csr_array(X), n_vocab=30)
    expect(ShapeError, "`X` has 0 documents", DocumentBatches, sp.csr_array((0, 5)))
    expect(ShapeError, "`X` has no columns", DocumentBatches, sp.csr_array((4, 0)))
    expect(ShapeError, "`X` must be 2-D", DocumentBatches, sp.coo_array(np.ones(5)))
    expect(ShapeError, "`X` must be 2-D", DocumentBatches, np.ones((2, 3, 4)))
    expect(DataError, "`X` must hold real numeric counts", DocumentBatches, sp.csr_array(X.astype(complex)))
    expect(DataError, "`X` holds no words", DocumentBatches, sp.csr_array((3, 4)))
    expect(ParameterError, r"`n_batches`=41 exceeds the number of documents \(40\)", DocumentBatches, X, 41)
    expect(ParameterError, "`n_batches`", DocumentBatches, X, 0)
    # a structurally broken CSR (constructed without scipy's checks)
    bad = sp.csr_array((3, 4))
    bad.indptr = np.array([0, 2, 1, 1])
    bad.indices, bad.data = np.array([0, 1]), np.array([1.0, 1.0])
    expect(DataError, "invalid CSR structure", DocumentBatches, bad)
    bad = sp.csr_array((np.array([1.0]), np.array([0]), np.array([0, 1])), shape=(1, 4))
    bad.indices = np.array([7])
    expect(DataError, r"word id 7 of document 0 is outside 0\.\.3", DocumentBatches, bad)


# ------------------------------------------------------------------------------ lists of batches
def test_list_of_csr_batches_and_npz_files(tmp_path, monkeypatch):
    X = corpus(n_docs=50)
    parts = [X[:20], X[20:35], X[35:]]
    sp.save_npz(tmp_path / "p1.npz", sp.csc_matrix(parts[1]))
    sp.save_npz(tmp_path / "p2.npz", sp.csr_array(parts[2]))
    items = [sp.csr_array(parts[0]), tmp_path / "p1.npz", str(tmp_path / "p2.npz")]
    loads = []
    orig = sp.load_npz
    monkeypatch.setattr(sp, "load_npz", lambda p: loads.append(p) or orig(p))
    src = document_source(items, n_batches=99)  # one batch per element; n_batches ignored
    assert isinstance(src, DocumentListBatches) and isinstance(src, BatchSource)
    assert loads == []  # only the shapes were read
    assert (len(src), src.n_rows, src.n_segments, src.n_features) == (3, 50, 50, 25)
    assert [src.batch_size(b) for b in range(3)] == [20, 15, 15]
    batches = [src.get(b) for b in range(3)]
    for batch, part in zip(batches, parts):
        check_csr(batch, part)
    assert len(loads) == 2
    sub = src.sample_for_init(12, np.random.default_rng(1))
    assert sub.shape == (12, 25)
    check_csr(sub, sub.toarray())
    assert {tuple(r) for r in sub.toarray()} <= {tuple(r) for r in X}


def test_list_of_batches_errors(tmp_path):
    X = corpus()
    expect(ShapeError, "batch 1 of `X` has 24 columns .* batch 0 has 25", DocumentListBatches, [sp.csr_array(X), sp.csr_array(X[:, 1:])])
    expect(ShapeError, "batch 0 of `X` has 25 columns .* n_vocab=30", DocumentListBatches, [sp.csr_array(X)], n_vocab=30)
    expect(ShapeError, "empty list", DocumentListBatches, [])
    expect(DataError, "no such file", DocumentListBatches, [str(tmp_path / "absent.npz")])
    np.save(tmp_path / "dense.npy", X)
    expect(DataError, "not a sparse matrix saved by scipy.sparse.save_npz", DocumentListBatches, [tmp_path / "dense.npy"])
    src = DocumentListBatches([sp.csr_array(X), sp.csr_array(with_value(1, 1, -1.0))])
    src.get(0)
    expect(DataError, r"`X \(batch 1\)` must hold non-negative counts; document 1", src.get, 1)


# ------------------------------------------------------------------------------ bag-of-words corpora
class Corpus:
    """A re-iterable corpus (like a gensim corpus) that counts its passes."""

    def __init__(self, docs):
        self.docs = docs
        self.passes = 0

    def __iter__(self):
        self.passes += 1
        yield from self.docs


def test_bag_of_words_corpus_equals_the_matrix():
    X = corpus(n_docs=60)
    corp = Corpus(as_bow(X))
    src = document_source(corp, 4)
    assert isinstance(src, BagOfWordsBatches) and isinstance(src, BatchSource)
    assert corp.passes == 1  # counting documents and tokens
    ref = DocumentBatches(X, 4)
    np.testing.assert_array_equal(src.bounds, ref.bounds)
    assert (src.n_rows, src.n_segments, src.n_features, src.n_tokens) == (60, 60, 25, X.sum())
    for lap in range(2):
        for b in range(4):
            check_csr(src.get(b), X[ref.bounds[b] : ref.bounds[b + 1]])
        assert corp.passes == 2 + lap  # one pass per lap, re-read every lap
    src.get(2)
    src.get(1)  # going back restarts the pass
    assert corp.passes == 5
    # plain lists are re-iterable too; n_vocab may be larger than the largest word id
    src = BagOfWordsBatches(as_bow(X), 2, n_vocab=40)
    assert src.n_features == 40
    np.testing.assert_array_equal(concat(src.get(b) for b in range(2))[:, :25], X)


def test_bag_of_words_documents_in_any_pair_form():
    docs = [[(0, 2), (3, 1), (0, 1)], [], np.array([[2, 4]]), [[1, 1.0]]]
    A = bow_to_csr(docs, 5)
    check_csr(A, np.array([[3, 0, 0, 1, 0], [0, 0, 0, 0, 0], [0, 0, 4, 0, 0], [0, 1, 0, 0, 0]], dtype=float))


def test_bag_of_words_sample_for_init_holds_only_the_subset():
    X = corpus(n_docs=80)
    src = BagOfWordsBatches(Corpus(as_bow(X)), 2)
    sub = src.sample_for_init(7, np.random.default_rng(0))
    assert sub.shape == (7, 25)
    assert {tuple(r) for r in sub.toarray()} <= {tuple(r) for r in X}
    check_csr(src.sample_for_init(500, np.random.default_rng(0)), X)


@pytest.mark.parametrize(
    "doc,exc_type,match",
    [
        ([(1, -1)], DataError, r"non-negative counts; document 2 has -1"),
        ([(1, 0.5)], DataError, r"integer counts; document 2 has 0\.5"),
        ([(1.5, 1)], DataError, r"document 2 has word id 1\.5"),
        ([(-1, 1)], DataError, r"document 2 has word id -1"),
        ([(25, 1)], DataError, r"document 2 has word id 25; word ids must be integers in 0\.\.24"),
        ([(1, np.nan)], NonFiniteError, "document 2 contains NaN"),
        ([(1, 2, 3)], DataError, r"document 2 is not a list of \(word_id, count\) pairs"),
        (["a"], DataError, r"document 2 is not a list of \(word_id, count\) pairs"),
        ([[1, [2]]], DataError, r"document 2 is not a list"),
    ],
)
def test_bad_bag_of_words_documents(doc, exc_type, match):
    docs = as_bow(corpus(n_docs=6))
    docs[2] = doc
    expect(exc_type, match, BagOfWordsBatches, docs, n_vocab=25)


@pytest.mark.parametrize(
    "doc,match",
    [
        ([("3", 1)], r"document 2 has word id '3' of type str; word ids and counts must be integers"),
        ([(0, 1), (True, 1)], r"document 2 has word id True of type bool"),
        ([(1, "2")], r"document 2 has count '2' of type str"),
        ([(1, 2), (4, False)], r"document 2 has count False of type bool"),
        (np.array([[1, 1]], dtype=bool), r"document 2 has word id True of type bool"),
        (np.array([["1", "1"]]), r"document 2 has word id '1' of type str"),
    ],
)
@pytest.mark.parametrize("n_vocab", [25, None])
def test_word_ids_and_counts_must_be_numbers_not_str_or_bool(doc, match, n_vocab):
    docs = as_bow(corpus(n_docs=6))
    docs[2] = doc
    expect(DataError, f"`X`: {match}", BagOfWordsBatches, docs, n_vocab=n_vocab)


@pytest.mark.parametrize("word_id,shown", [(10**12, "1000000000000"), (1e20, r"1e\+20"), (10**20, r"1e\+20"), (2**31 - 1, "2147483647")])
def test_word_ids_beyond_the_largest_vocabulary(word_id, shown):
    docs = as_bow(corpus(n_docs=4))
    docs[1] = [(0, 1), (word_id, 2)]
    match = rf"`X`: document 1 has word id {shown}; word ids must be integers in 0\.\.2147483646 \(a vocabulary has at most 2147483647 words\)"
    expect(DataError, match, BagOfWordsBatches, docs)
    expect(DataError, match, bow_to_csr, docs, 3 * 10**9)
    docs[1] = [(0, 1), (2**31 - 2, 2)]  # the largest id: accepted (the vocabulary is not built here)
    assert bow_to_csr(docs[1:2], 2**31 - 1).shape == (1, 2**31 - 1)


def test_integral_float_word_ids_and_numpy_numbers_are_accepted():
    docs = [[(3.0, 2), (np.int32(1), np.float64(1.0))], np.array([[0.0, 4.0]]), [(np.uint8(2), np.int64(1))]]
    A = bow_to_csr(docs, 4)
    np.testing.assert_array_equal(A.toarray(), [[0, 1, 0, 2], [4, 0, 0, 0], [0, 0, 1, 0]])


def test_bag_of_words_corpus_errors():
    docs = as_bow(corpus(n_docs=6))
    expect(ParameterError, "`X` is an iterator", BagOfWordsBatches, iter(docs))
    expect(DataError, "must be an iterable of documents", BagOfWordsBatches, 3)
    expect(ShapeError, "`X` has no documents", BagOfWordsBatches, [])
    expect(DataError, "holds no words", BagOfWordsBatches, [[], []])
    expect(ParameterError, "exceeds the number of documents", BagOfWordsBatches, docs, 7)
    corp = Corpus(list(docs))
    src = BagOfWordsBatches(corp, 2)
    corp.docs.pop()
    expect(DataError, "yielded 5 documents on this pass but 6 on the first one", src.get, 1)
    corp.docs.extend([[(0, 1)], [(0, 1)]])
    expect(DataError, "yielded more than 6 documents", src.get, 1)


# ------------------------------------------------------------------------------ one-shot streams
def test_iterator_streams_once_in_batches_of_whole_documents():
    X = corpus(n_docs=23)
    stream = document_source(iter(as_bow(X)), n_vocab=25, docs_per_batch=5)
    assert isinstance(stream, DocumentStream) and stream.segment == "document" and stream.n_features == 25
    batches = list(stream)
    assert [b.shape[0] for b in batches] == [5, 5, 5, 5, 3]
    for b in batches:
        check_csr(b, b.toarray())
    np.testing.assert_array_equal(concat(batches), X)
    expect(ParameterError, "one-shot stream and has been read already", iter, stream)


def test_stream_errors():
    gen = (d for d in as_bow(corpus(n_docs=4)))
    expect(ParameterError, "`n_vocab` must be a positive integer, got None .*cannot tell the vocabulary size", document_source, gen)
    expect(ParameterError, "`docs_per_batch`", DocumentStream, iter([]), 0, n_vocab=3)
    docs = as_bow(corpus(n_docs=8))
    docs[6] = [(99, 1)]
    stream = DocumentStream(iter(docs), 3, n_vocab=25)
    it = iter(stream)
    next(it), next(it)
    expect(DataError, r"`X \(batch 2\)`: document 6 has word id 99", next, it)


def test_path_of_a_saved_sparse_matrix(tmp_path):
    X = corpus()
    sp.save_npz(tmp_path / "c.npz", sp.coo_matrix(X))
    src = document_source(tmp_path / "c.npz", 2)
    assert isinstance(src, DocumentBatches)
    check_csr(src.X, X)


def test_two_d_array_likes_are_count_matrices():
    """An object with ``__array__`` and a 2-D ``shape`` (as a pandas DataFrame) is one count
    matrix; a list of lists and a 1-D array-like of documents (a pandas Series of pair lists)
    are bag-of-words corpora."""

    class ArrayLike:
        def __init__(self, X):
            self._X, self.shape = X, X.shape

        def __array__(self, dtype=None, copy=None):
            return self._X

    X = corpus(n_docs=30)
    src = document_source(ArrayLike(X), 3)
    assert isinstance(src, DocumentBatches)
    np.testing.assert_array_equal(src.bounds, DocumentBatches(X, 3).bounds)
    check_csr(src.X, X)
    assert isinstance(document_source(as_bow(X), 3), BagOfWordsBatches)
    pd = pytest.importorskip("pandas")
    check_csr(document_source(pd.DataFrame(X), 3).X, X)
    series = pd.Series(as_bow(X) + [[]])
    src = document_source(series, 3)
    assert isinstance(src, BagOfWordsBatches)
    np.testing.assert_array_equal(concat(src.get(b) for b in range(3)), np.vstack([X, np.zeros((1, X.shape[1]))]))
