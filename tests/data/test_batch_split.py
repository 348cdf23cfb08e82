"""The deterministic split of documents/sequences into contiguous batches, and the protocol."""

import numpy as np
import pytest
from bnpcore.data import ArrayBatches, BatchSource, ListBatches, balanced_bounds
from bnpcore.exceptions import ParameterError
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=300, deadline=None)
@given(
    weights=st.lists(st.one_of(st.integers(0, 5), st.integers(0, 1000)), min_size=1, max_size=60),
    data=st.data(),
)
def test_bounds_are_valid_contiguous_and_balanced(weights, data):
    w = np.array(weights, dtype=float)
    B = data.draw(st.integers(1, len(weights)))
    bounds = balanced_bounds(w, B)
    assert bounds.dtype == np.int64 and bounds.shape == (B + 1,)
    assert bounds[0] == 0 and bounds[-1] == len(weights)
    assert np.all(np.diff(bounds) >= 1)  # every batch holds at least one whole segment
    np.testing.assert_array_equal(balanced_bounds(list(weights), B), bounds)  # deterministic
    if w.sum() > 0:
        per_batch = np.add.reduceat(w, bounds[:-1])
        # no batch exceeds its share by more than one segment
        assert per_batch.max() <= w.sum() / B + w.max() + 1e-9


def test_equal_weights_give_equal_batches():
    np.testing.assert_array_equal(balanced_bounds(np.ones(12), 4), [0, 3, 6, 9, 12])
    np.testing.assert_array_equal(balanced_bounds(np.zeros(12), 3), [0, 4, 8, 12])  # no weight: count segments
    np.testing.assert_array_equal(balanced_bounds([1, 1, 1, 1, 100], 3), [0, 3, 4, 5])


@pytest.mark.parametrize("n_batches", [0, -1, 6, 2.0, True, "2"])
def test_bad_number_of_batches(n_batches):
    with pytest.raises(ParameterError, match="`n_batches`"):
        balanced_bounds(np.ones(5), n_batches)


def test_row_sources_follow_the_protocol():
    X = np.random.default_rng(0).standard_normal((20, 2))
    shuffled = ArrayBatches(X, 4, seed=0)
    contiguous = ArrayBatches(X, 4)
    listed = ListBatches([X[:8], X[8:]])
    for src in (shuffled, contiguous, listed):
        assert isinstance(src, BatchSource)
        assert src.segment == "row" and src.n_segments == src.n_rows == 20 and src.n_features == 2
    assert shuffled.shuffles and not contiguous.shuffles and not listed.shuffles
