"""Topic coherence (bnpcore.metrics.topic_coherence, HDPTopicModel/FiniteTopicModel.coherence):
against a slow reference that counts documents with Python sets, for every input form, against
gensim's CoherenceModel when gensim is installed, and on the bars, where fitted topics must be
more coherent than random word lists."""

from __future__ import annotations

import importlib.util
import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import ConvergenceWarning, DataError, FiniteTopicModel, HDPTopicModel, ParameterError, ShapeError
from bnpcore.datasets import make_bars
from bnpcore.metrics import COHERENCE_EPSILON, topic_coherence
from hypothesis import given
from hypothesis import strategies as st


def reference_coherence(top_lists, dense_counts, measure):
    """Per topic, the mean over its word pairs, counted document by document with sets."""
    D = dense_counts.shape[0]
    docs_of = {w: {d for d in range(D) if dense_counts[d, w] > 0} for w in range(dense_counts.shape[1])}
    eps = COHERENCE_EPSILON
    out = []
    for words in top_lists:
        vals = []
        for i in range(1, len(words)):
            for j in range(i):
                wi, wj = words[i], words[j]
                both = len(docs_of[wi] & docs_of[wj]) / D
                if measure == "u_mass":
                    dj = len(docs_of[wj])
                    vals.append(0.0 if dj == 0 else math.log((both + eps) / (dj / D)))
                else:
                    pi, pj = len(docs_of[wi]) / D, len(docs_of[wj]) / D
                    if pi == 0 or pj == 0:
                        vals.append(-1.0)
                    elif both == 1.0:
                        vals.append(1.0)
                    else:
                        vals.append(math.log((both + eps) / (pi * pj)) / -math.log(both + eps))
        out.append(sum(vals) / len(vals))
    return np.array(out)


@st.composite
def corpora_and_topics(draw):
    D = draw(st.integers(1, 12))
    V = draw(st.integers(2, 9))
    counts = np.array(draw(st.lists(st.integers(0, 3), min_size=D * V, max_size=D * V)), dtype=float).reshape(D, V)
    n = draw(st.integers(2, V))
    K = draw(st.integers(1, 4))
    tops = [draw(st.permutations(range(V)))[:n] for _ in range(K)]
    return counts, [list(t) for t in tops]


@pytest.mark.parametrize("measure", ["u_mass", "npmi"])
@given(data=corpora_and_topics())
def test_coherence_equals_the_set_counting_reference(measure, data):
    counts, tops = data
    got = topic_coherence(tops, sp.csr_array(counts), measure=measure)
    np.testing.assert_allclose(got, reference_coherence(tops, counts, measure), rtol=1e-12, atol=1e-12)
    if measure == "npmi":
        assert np.all(got >= -1.0 - 1e-9) and np.all(got <= 1.0 + 1e-9)


@given(data=corpora_and_topics(), seed=st.integers(0, 2**31 - 1))
def test_a_topic_matrix_is_read_as_its_top_words(data, seed):
    counts, tops = data
    V, n = counts.shape[1], len(tops[0])
    rng = np.random.default_rng(seed)
    T = np.empty((len(tops), V))
    for k, words in enumerate(tops):  # distinct weights, largest on the listed words in their order
        rest = [w for w in range(V) if w not in words]
        T[k, words] = np.linspace(1.0, 0.5, n)
        T[k, rest] = rng.uniform(0.0, 0.4, len(rest))
    for measure in ("u_mass", "npmi"):
        np.testing.assert_array_equal(topic_coherence(T, counts, n_words=n, measure=measure), topic_coherence(tops, counts, measure=measure))


def test_every_input_form_gives_the_same_values():
    X, topics = make_bars(n_docs=60, n_tokens=40, random_state=0)
    want = topic_coherence(topics, X)
    assert want.shape == (10,) and np.isfinite(want).all()
    bow = [list(zip(X.indices[X.indptr[d]:X.indptr[d + 1]].tolist(), X.data[X.indptr[d]:X.indptr[d + 1]].astype(int).tolist()))
           for d in range(X.shape[0])]
    tops = np.argsort(-topics, axis=1, kind="stable")[:, :10]
    for T, A in [(topics, X.toarray()), (topics, sp.csc_matrix(X)), (topics, sp.coo_array(X)), (topics, bow), (topics, iter(bow)),
                 (tops, X), (tops.tolist(), bow), (list(map(tuple, tops)), X.astype(np.float32)), ((t for t in tops), X)]:
        np.testing.assert_array_equal(topic_coherence(T, A), want)
    # the first n_words of longer lists; a corpus read with word ids beyond its own largest one
    np.testing.assert_array_equal(topic_coherence(np.argsort(-topics, axis=1, kind="stable")[:, :20], X, n_words=10), want)
    assert topic_coherence([[0, 899]], [[(0, 1)], [(0, 2), (1, 1)]]).shape == (1,)


def test_fitted_topics_are_more_coherent_than_random_word_lists():
    X, _ = make_bars(n_docs=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = HDPTopicModel(random_state=0, max_laps=20).fit(X)
    rng = np.random.default_rng(0)
    random_lists = [rng.choice(X.shape[1], 10, replace=False) for _ in range(20)]
    for measure in ("u_mass", "npmi"):
        fitted = m.coherence(X, measure=measure)
        assert fitted.shape == (m.n_components_,)
        np.testing.assert_array_equal(fitted, topic_coherence(m.topics_, X, n_words=10, measure=measure))
        np.testing.assert_array_equal(fitted, topic_coherence(m.top_words(10), X, measure=measure))
        assert fitted.min() > topic_coherence(random_lists, X, measure=measure).max()
    assert m.coherence(X, measure="npmi").min() > 0.0


def test_coherence_errors():
    X, topics = make_bars(n_docs=30, n_tokens=40, random_state=0)
    with pytest.raises(ParameterError, match="`measure` must be one of"):
        topic_coherence(topics, X, measure="c_v")
    with pytest.raises(ParameterError, match="`n_words` must be >= 2"):
        topic_coherence(topics, X, n_words=1)
    with pytest.raises(ParameterError, match="`n_words` must be at most the vocabulary size 900"):
        topic_coherence(topics, X, n_words=901)
    with pytest.raises(ParameterError, match="`n_words` is 5 but the word-id lists have 3 words"):
        topic_coherence([[0, 1, 2]], X, n_words=5)
    with pytest.raises(ShapeError, match="`topics` has 899 columns"):
        topic_coherence(topics[:, :899], X)
    with pytest.raises(DataError, match="contains NaN"):
        topic_coherence(np.full((2, 900), np.nan), X)
    with pytest.raises(DataError, match=r"topic 0 has word id 900; word ids must lie in 0\.\.899"):
        topic_coherence([[0, 900]], X)
    with pytest.raises(DataError, match="topic 1 repeats a word id"):
        topic_coherence([[0, 1], [2, 2]], X)
    with pytest.raises(DataError, match="topic 0 must be a list of at least 2 integer word ids"):
        topic_coherence([[0]], X)
    with pytest.raises(ShapeError, match="same length"):
        topic_coherence([[0, 1], [2, 3, 4]], X)
    with pytest.raises(DataError, match=r"`topics` must be a \(K, n_vocab\) array .* got int"):
        topic_coherence(3, X)
    with pytest.raises(ShapeError, match="`topics` holds no topics"):
        topic_coherence([], X)
    with pytest.raises(DataError, match="non-negative"):
        topic_coherence(topics, -X)
    with pytest.raises(ShapeError, match="`X` has no documents"):
        topic_coherence(topics, [])
    m = FiniteTopicModel(3, max_laps=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X)
    with pytest.raises(ParameterError, match="`n_words` must be <= 900"):
        m.coherence(X, n_words=901)
    with pytest.raises(ParameterError, match="`measure`"):
        m.coherence(X, measure="umass")
    with pytest.raises(ValueError, match="900 features"):
        m.coherence(X[:, :100])


@pytest.mark.skipif(importlib.util.find_spec("gensim") is None, reason="gensim is not installed")
def test_u_mass_and_npmi_equal_gensims():
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel
    from gensim.topic_coherence import direct_confirmation_measure, probability_estimation, segmentation

    X, topics = make_bars(n_docs=80, n_tokens=50, random_state=2)
    bow = [list(zip(X.indices[X.indptr[d]:X.indptr[d + 1]].tolist(), X.data[X.indptr[d]:X.indptr[d + 1]].astype(int).tolist()))
           for d in range(X.shape[0])]
    dictionary = Dictionary.from_corpus(bow, id2word={i: str(i) for i in range(X.shape[1])})
    seen = np.asarray(X.sum(axis=0)).ravel() > 0  # gensim divides by zero for a word no document has
    tops = [list(map(int, t)) for t in np.argsort(-(topics * seen), axis=1, kind="stable")[:, :8]]
    cm = CoherenceModel(topics=[[str(w) for w in t] for t in tops], corpus=bow, dictionary=dictionary, coherence="u_mass")
    np.testing.assert_allclose(topic_coherence(tops, X), cm.get_coherence_per_topic(), rtol=1e-12)
    segmented = segmentation.s_one_one([np.array(t) for t in tops])
    acc = probability_estimation.p_boolean_document(bow, segmented)
    want = direct_confirmation_measure.log_ratio_measure(segmented, acc, normalize=True)
    np.testing.assert_allclose(topic_coherence(tops, X, measure="npmi"), want, rtol=1e-12)
    assert set(itertools.chain.from_iterable(tops)) <= set(range(X.shape[1]))
