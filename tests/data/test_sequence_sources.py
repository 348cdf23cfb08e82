"""Sequence sources: hmmlearn-style (X, lengths); a batch is a set of whole sequences, in order."""

import numpy as np
import pytest
from bnpcore.data import BatchSource, SeqBatch, SequenceBatches, sequence_source
from bnpcore.exceptions import BnpcoreError, DataError, NonFiniteError, ParameterError, ShapeError


def data(lengths=(5, 1, 8, 3, 12, 2, 7), n_features=3, seed=0):
    X = np.random.default_rng(seed).standard_normal((sum(lengths), n_features))
    return X, np.array(lengths)


def check_batches(src, X, lengths):
    seq_range = np.concatenate([[0], np.cumsum(lengths)])
    rows, seqs = [], []
    for b in range(len(src)):
        batch = src.get(b)
        assert isinstance(batch, SeqBatch)
        assert batch.X.dtype == np.float64 and batch.X.flags.c_contiguous
        assert batch.seq_range.dtype == np.int64 and batch.seq_range[0] == 0 and batch.seq_range[-1] == batch.X.shape[0]
        s0, s1 = src.bounds[b], src.bounds[b + 1]
        np.testing.assert_array_equal(batch.lengths, lengths[s0:s1])  # whole sequences
        assert batch.n_seqs == s1 - s0
        np.testing.assert_array_equal(batch.X, X[seq_range[s0] : seq_range[s1]])
        assert src.batch_size(b) == batch.X.shape[0]
        rows.append(batch.X)
        seqs.extend(batch.lengths)
    np.testing.assert_array_equal(np.concatenate(rows), X)  # contiguous, never shuffled
    np.testing.assert_array_equal(seqs, lengths)


@pytest.mark.parametrize("n_batches", [1, 2, 3, 7])
def test_x_and_lengths(n_batches):
    X, lengths = data()
    src = sequence_source(X, lengths, n_batches)
    assert isinstance(src, SequenceBatches) and isinstance(src, BatchSource)
    assert src.segment == "sequence" and not src.shuffles
    assert (src.n_rows, src.n_segments, src.n_features, len(src)) == (38, 7, 3, n_batches)
    np.testing.assert_array_equal(src.seq_range, np.concatenate([[0], np.cumsum(lengths)]))
    check_batches(src, X, lengths)
    np.testing.assert_array_equal(SequenceBatches(X, lengths, n_batches).bounds, src.bounds)  # deterministic


def test_list_of_sequences_equals_x_and_lengths():
    X, lengths = data()
    seqs = np.split(X, np.cumsum(lengths)[:-1])
    a = SequenceBatches([s.astype(np.float32) for s in seqs], n_batches=3)
    b = SequenceBatches(X, lengths.tolist(), n_batches=3)
    np.testing.assert_array_equal(a.bounds, b.bounds)
    np.testing.assert_array_equal(a.lengths, lengths)
    for i in range(3):
        np.testing.assert_allclose(a.get(i).X, b.get(i).X, rtol=1e-6)


def test_lengths_none_is_one_sequence():
    X, _ = data()
    src = SequenceBatches(X)
    assert src.n_segments == 1 and len(src) == 1
    np.testing.assert_array_equal(src.get(0).seq_range, [0, 38])
    with pytest.raises(ParameterError, match=r"`n_batches`=2 exceeds the number of sequences \(1\)"):
        SequenceBatches(X, None, 2)


def test_batches_are_views_of_an_in_memory_x():
    X, lengths = data()
    src = SequenceBatches(X, lengths, 3)
    assert all(np.shares_memory(src.get(b).X, X) for b in range(3))


def test_split_is_balanced_by_rows():
    rng = np.random.default_rng(4)
    lengths = rng.integers(1, 200, size=150)
    X = np.zeros((lengths.sum(), 1))
    for B in (2, 6, 31):
        src = SequenceBatches(X, lengths, B)
        sizes = [src.batch_size(b) for b in range(B)]
        assert sum(sizes) == lengths.sum()
        assert max(sizes) <= lengths.sum() / B + lengths.max()


def test_sample_for_init_is_whole_sequences():
    X, lengths = data()
    src = SequenceBatches(X, lengths, 2)
    full = src.sample_for_init(1000, np.random.default_rng(0))
    np.testing.assert_array_equal(full.X, X)
    np.testing.assert_array_equal(full.lengths, lengths)
    seqs = {tuple(map(tuple, s)) for s in np.split(X, np.cumsum(lengths)[:-1])}
    for seed in range(10):
        sub = src.sample_for_init(15, np.random.default_rng(seed))
        assert 1 <= sub.X.shape[0] <= 15 and sub.seq_range[-1] == sub.X.shape[0]
        parts = np.split(sub.X, sub.seq_range[1:-1])
        assert all(tuple(map(tuple, p)) in seqs for p in parts)
    # not even one sequence fits: a prefix of one
    sub = SequenceBatches(X, [19, 19]).sample_for_init(4, np.random.default_rng(0))
    assert sub.X.shape == (4, 3) and sub.n_seqs == 1
    assert any(np.array_equal(sub.X, X[s : s + 4]) for s in (0, 19))
    with pytest.raises(ParameterError, match="max_rows"):
        src.sample_for_init(0, np.random.default_rng(0))


def test_memmap_and_npy_path_are_read_one_batch_at_a_time(tmp_path):
    X, lengths = data()
    X[30, 1] = np.nan  # in sequence 5 (rows 29..30), the last batch
    np.save(tmp_path / "x.npy", X)
    src = sequence_source(str(tmp_path / "x.npy"), lengths, 3)  # no error yet: validated per batch
    mm = SequenceBatches(np.load(tmp_path / "x.npy", mmap_mode="r"), lengths, 3)
    for s in (src, mm):
        assert s.n_rows == 38
        first = s.get(0)
        np.testing.assert_array_equal(first.X, X[: first.X.shape[0]])
        with pytest.raises(NonFiniteError, match=r"`X \(batch 2, sequences 5-7\)` contains NaN"):
            s.get(2)


# ------------------------------------------------------------------------------ bad input
def expect(exc_type, match, fn, *args, **kwargs):
    with pytest.raises(exc_type, match=match) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, BnpcoreError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "lengths,exc_type,match",
    [
        ([10, 10], ShapeError, r"`lengths` sums to 20 but `X` has 38 rows"),
        ([38, 0], DataError, r"positive integers .*lengths\[1\] = 0"),
        ([40, -2], DataError, r"positive integers .*lengths\[1\] = -2"),
        ([19.0, 19.5], DataError, r"`lengths` must hold integers; lengths\[1\] = 19.5"),
        ([19.0, np.nan], DataError, r"`lengths` must hold integers; lengths\[1\] = nan"),
        ([[19, 19]], ShapeError, r"`lengths` must be 1-D"),
        (38, ShapeError, r"`lengths` must be 1-D"),
        ([], ShapeError, r"`lengths` is empty"),
        ([True, True], DataError, r"`lengths` must hold integers, got dtype bool"),
        (["19", "19"], DataError, r"`lengths` must hold integers"),
        ([19 + 0j, 19], DataError, r"`lengths` must hold integers"),
        # entries whose int64 sum wraps around to the number of rows
        ([2**62] * 4 + [38], ShapeError, r"must not exceed the 38 rows of `X`; lengths\[0\] = 4611686018427387904"),
        (np.array([2**64 - 1, 39], dtype=np.uint64), ShapeError, r"lengths\[0\] = 18446744073709551615"),
        ([1e30, 1.0], ShapeError, r"lengths\[0\] = 1e\+30"),
    ],
)
def test_bad_lengths(lengths, exc_type, match):
    X, _ = data()
    expect(exc_type, match, SequenceBatches, X, lengths)


def test_integer_valued_float_lengths_are_accepted():
    X, lengths = data()
    np.testing.assert_array_equal(SequenceBatches(X, lengths.astype(float)).lengths, lengths)


def test_generator_and_object_array_lengths_are_accepted():
    X, lengths = data()
    for given in ((int(n) for n in lengths), iter(lengths.tolist()), np.array(lengths.tolist(), dtype=object)):
        np.testing.assert_array_equal(SequenceBatches(X, given).lengths, lengths)
    expect(DataError, r"`lengths` must hold integers, got dtype object", SequenceBatches, X, np.array([None, 38], dtype=object))
    expect(DataError, r"`lengths` must hold integers; lengths\[1\] = 18.5", SequenceBatches, X, (v for v in (20.0, 18.5)))


def test_hmm_methods_read_a_generator_of_lengths_once():
    import warnings

    from bnpcore import ConvergenceWarning, FiniteHMM

    X, lengths = data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        want = FiniteHMM(n_components=2, random_state=0, max_laps=3).fit(X, lengths)
        got = FiniteHMM(n_components=2, random_state=0, max_laps=3).fit(X, (int(n) for n in lengths))
        assert got.elbo_ == want.elbo_
        np.testing.assert_array_equal(got.predict(X, (int(n) for n in lengths)), want.predict(X, lengths))
        assert got.score(X, iter(lengths.tolist())) == want.score(X, lengths)
        streamed = FiniteHMM(n_components=2, random_state=0, max_laps=3).partial_fit(X, (int(n) for n in lengths))
        assert streamed.elbo_ == FiniteHMM(n_components=2, random_state=0, max_laps=3).partial_fit(X, lengths).elbo_


def test_bad_sequences():
    X, lengths = data()
    expect(ParameterError, "`lengths` must be None when `X` is a list", SequenceBatches, [X], lengths)
    expect(ShapeError, "empty list of sequences", SequenceBatches, [])
    expect(ShapeError, r"X\[1\] has 2 features, but it is expecting 3 features as input \(the model was fitted with 3 columns\)", SequenceBatches, [X[:5], X[5:, :2]])
    expect(ShapeError, r"`X\[0\]` must be 2-D", SequenceBatches, [X[:, 0]])
    expect(ShapeError, r"`X\[1\]` has 0 rows", SequenceBatches, [X, X[:0]])
    expect(NonFiniteError, r"`X\[1\]` contains NaN", SequenceBatches, [X[:3], np.array([[0.0, np.nan, 1.0]])])
    expect(ShapeError, "`X` must be 2-D", SequenceBatches, X[:, 0], [38])
    expect(ShapeError, r"X has 3 features, but it is expecting 4 features as input \(the model was fitted with 4 columns\)", SequenceBatches, X, lengths, n_features=4)
    expect(DataError, "`X` must be numeric", SequenceBatches, np.array([["a"]]), [1])
    expect(ParameterError, r"`n_batches`=8 exceeds the number of sequences \(7\)", SequenceBatches, X, lengths, 8)
    expect(ParameterError, "`n_batches` must be an integer", SequenceBatches, X, lengths, 1.5)


def test_sparse_sequences_follow_the_observation_model():
    import scipy.sparse as sp

    X, lengths = data()
    with pytest.raises(DataError, match="obs='gauss' needs dense `X`"):
        sequence_source(sp.csr_array(X), lengths, obs="gauss")
    with pytest.raises(DataError, match=r"obs='diag_gauss' needs dense `X\[0\]`"):
        SequenceBatches([sp.csr_array(X[:5]), X[5:]], obs="diag_gauss")
    counts = np.abs(np.round(X * 3))
    src = sequence_source(sp.coo_array(counts), lengths, n_batches=3, obs="mult")  # densified: the HMM kernels read dense rows
    check_batches(src, counts, lengths)
