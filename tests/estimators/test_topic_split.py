"""The document-completion split of ``score``/``perplexity``: a partition of every document's
tokens into a uniformly random half (the distribution of shuffling the tokens and cutting),
drawn from the counts without expanding the tokens."""

from __future__ import annotations

import itertools
import tracemalloc
import warnings
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import DataError, HDPTopicModel
from bnpcore._validation import check_counts_csr
from bnpcore.estimators.topic import _split_tokens
from hypothesis import given, settings
from hypothesis import strategies as st


@st.composite
def count_matrices(draw):
    n_docs = draw(st.integers(1, 8))
    V = draw(st.integers(1, 6))
    cells = draw(st.lists(st.integers(0, 9), min_size=n_docs * V, max_size=n_docs * V))
    return np.array(cells, dtype=float).reshape(n_docs, V)


@settings(deadline=None)
@given(count_matrices(), st.integers(0, 2**32 - 1))
def test_split_is_a_partition_into_halves(dense, seed):
    X = check_counts_csr(sp.csr_matrix(dense))
    seen, held = _split_tokens(X, np.random.default_rng(seed))
    np.testing.assert_array_equal(seen.toarray() + held.toarray(), dense)
    T = dense.sum(axis=1).astype(np.int64)
    np.testing.assert_array_equal(seen.toarray().sum(axis=1), T // 2)
    for part in (seen, held):
        assert part.has_canonical_format and np.all(part.data > 0)
        assert part.indices.dtype == np.int64 and part.shape == dense.shape
    again = _split_tokens(X, np.random.default_rng(seed))[0]
    np.testing.assert_array_equal(again.toarray(), seen.toarray())  # seeded


def _shuffle_distribution(counts):
    """Exact law of the observed counts when a document's tokens are shuffled and the first
    floor(T/2) observed: every ordering of the tokens is equally likely."""
    tokens = [w for w, c in enumerate(counts) for _ in range(c)]
    half = len(tokens) // 2
    law = Counter()
    perms = list(itertools.permutations(range(len(tokens))))
    for p in perms:
        law[tuple(np.bincount([tokens[i] for i in p[:half]], minlength=len(counts)))] += 1
    return {k: v / len(perms) for k, v in law.items()}


@pytest.mark.parametrize("counts", [(3, 1, 2), (1, 1, 1, 1, 1), (4, 3), (2, 0, 5)])
def test_split_has_the_law_of_a_token_shuffle(counts):
    law = _shuffle_distribution(counts)
    n = 40_000
    X = check_counts_csr(sp.csr_matrix(np.tile(np.array(counts, dtype=float), (n, 1))))
    seen = _split_tokens(X, np.random.default_rng(7))[0].toarray().astype(np.int64)
    got = Counter(map(tuple, seen))
    assert set(got) <= set(law)  # nothing the shuffle cannot produce
    for outcome, p in law.items():
        # binomial standard error; 5 sigma keeps this seeded test far from its threshold
        assert abs(got[outcome] / n - p) <= 5 * np.sqrt(p * (1 - p) / n), (outcome, got[outcome] / n, p)


def test_huge_counts_are_split_without_expanding_the_tokens():
    X = check_counts_csr(sp.csr_matrix(np.full((3, 4), 2e8)))  # 2.4e9 tokens
    tracemalloc.start()
    try:
        seen, held = _split_tokens(X, np.random.default_rng(0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # one expanded token array alone would take 19 GB
    np.testing.assert_array_equal(seen.toarray().sum(axis=1), [4e8] * 3)
    np.testing.assert_array_equal((seen + held).toarray(), X.toarray())


def test_score_on_documents_with_huge_counts():
    rng = np.random.default_rng(0)
    X = rng.poisson(2.0, (20, 8)).astype(float)
    X[:, 0] += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = HDPTopicModel(n_components=2, max_laps=3, random_state=0).fit(X)
    s = m.score(X * 1e7)
    assert np.isfinite(s) and s < 0


def test_a_document_beyond_the_sampler_is_a_clear_error():
    X = check_counts_csr(sp.csr_matrix(np.array([[1.0, 2.0], [6e8, 6e8]])))
    with pytest.raises(DataError, match=r"`X`: document 1 holds 1200000000 tokens"):
        _split_tokens(X, np.random.default_rng(0))
