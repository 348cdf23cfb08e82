"""Topic models at the edges of their input: corpora with fewer documents than topics, corpora
without a word and bag-of-words ids that are not integers or beyond any vocabulary."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from bnpcore import ConvergenceWarning, DataError, FiniteTopicModel, HDPTopicModel
from bnpcore.datasets import make_bars
from bnpcore.exceptions import NotFittedError
from bnpcore.topic import INIT_SMOOTHING, csr_rows_dense, init_topic_stats


@pytest.fixture(scope="module")
def bars():
    X, _ = make_bars(n_docs=40, n_tokens=60, random_state=3)
    return sp.csr_array(X)


@pytest.fixture(scope="module")
def held_out():
    X, _ = make_bars(n_docs=6, n_tokens=60, random_state=4)
    return X


def _fit(model, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, **kw)


# ----------------------------------------------------------------------- fewer documents than topics
SMALL = {
    "lda": (FiniteTopicModel, {}),  # n_components=10
    "lda_kmeans": (FiniteTopicModel, {"init": "kmeans++"}),
    "hdp_fixed": (HDPTopicModel, {"moves": ()}),  # starts at 50
    "hdp_stochastic": (HDPTopicModel, {"algorithm": "stochastic"}),  # starts at 50
    "hdp_moves": (HDPTopicModel, {}),
}


@pytest.mark.parametrize("n_docs", [1, 5])
@pytest.mark.parametrize("case", sorted(SMALL))
def test_default_topics_fit_fewer_documents(bars, held_out, case, n_docs):
    cls, kw = SMALL[case]
    X = bars[:n_docs]
    fits = [_fit(cls(max_laps=4, random_state=7, n_threads=t, **kw), X) for t in (1, 2, 1)]
    m = fits[0]
    assert np.isfinite(m.elbo_)
    theta = m.transform(held_out)
    assert np.isfinite(theta).all()
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    assert np.isfinite(m.score(held_out))
    assert np.isfinite(m.transform(X)).all()
    for other in fits[1:]:  # same random_state: same fit, whatever the threads
        np.testing.assert_array_equal(other.components_, m.components_)
        np.testing.assert_array_equal(other.history_["elbo"], m.history_["elbo"])


def test_init_subsample_below_n_components(bars):
    m = _fit(FiniteTopicModel(n_components=10, init_subsample=3, max_laps=3, random_state=0), bars)
    assert m.components_.shape == (10, 900) and np.isfinite(m.elbo_)


@pytest.mark.parametrize("init", ["random_docs", "kmeans++"])
def test_extra_initial_topics_are_distinct_redraws_of_the_documents(bars, init):
    docs = bars[:3].toarray() * np.array([[1.0], [2.0], [3.0]])  # 60, 120 and 180 tokens
    X0 = sp.csr_array(np.vstack([docs[:1], np.zeros((2, 900)), docs[1:]]))  # 3 non-empty of 5
    stats = init_topic_stats(X0, 8, init, np.random.default_rng(0), n_docs=5, prior_count=0.1)
    S = stats.S
    assert S.shape == (8, 900) and np.isfinite(S).all() and (S >= 0).all()
    assert np.unique(S, axis=0).shape[0] == 8  # no two topics equal
    base = docs + INIT_SMOOTHING * docs.sum(axis=1, keepdims=True) / 900
    # the first three are the non-empty documents themselves; each later one keeps the total of
    # the document it redraws (told apart by their lengths), and the documents are used in
    # turn (3 + 3 + 2)
    first = [int(np.flatnonzero((np.abs(base - row) < 1e-9).all(axis=1))[0]) for row in S[:3]]
    assert sorted(first) == [0, 1, 2]
    totals = base.sum(axis=1)
    which = [int(np.argmin(np.abs(totals - t))) for t in S[3:].sum(axis=1)]
    np.testing.assert_allclose(S[3:].sum(axis=1), totals[which], rtol=1e-12)
    assert sorted(which[:3]) == [0, 1, 2] and len(set(which[3:])) == 2
    # a redraw keeps its document's words: in expectation T_d of its (1 + s) T_d pseudo-counts
    # plus their share of the smoothing
    for k, d in zip(range(3, 8), which):
        assert S[k, docs[d] > 0].sum() > 0.05 * S[k].sum()
    again = init_topic_stats(X0, 8, init, np.random.default_rng(0), n_docs=5, prior_count=0.1)
    np.testing.assert_array_equal(again.S, S)


def test_enough_documents_draw_no_extra_topics(bars):
    """K at most the non-empty documents: the topics are those documents, chosen as before."""
    stats = init_topic_stats(bars, 6, "random_docs", np.random.default_rng(3), n_docs=40, prior_count=0.1)
    rng = np.random.default_rng(3)
    docs = csr_rows_dense(bars, rng.choice(40, size=6, replace=False))
    np.testing.assert_array_equal(stats.S, docs + INIT_SMOOTHING * docs.sum(axis=1, keepdims=True) / 900)


# ----------------------------------------------------------------------- corpora without a word
@pytest.mark.parametrize("cls,kw", [(HDPTopicModel, {}), (FiniteTopicModel, {}), (HDPTopicModel, {"algorithm": "stochastic"})])
def test_list_of_empty_batches_holds_no_words(cls, kw):
    E = sp.csr_array((3, 900))
    with pytest.raises(DataError, match=r"`X` holds no words \(every document is empty\)"):
        cls(**kw).fit([E, E])


def test_empty_initialisation_subsample_names_init_subsample():
    with pytest.raises(DataError, match=r"documents read to initialise the topics \(`init_subsample`\) hold no words"):
        init_topic_stats(sp.csr_array((2, 900)), 3, "random_docs", np.random.default_rng(0), n_docs=10, prior_count=0.1)


def test_truncation_free_stream_of_empty_batches_holds_no_words(bars):
    E = sp.csr_array((3, 900))
    m = HDPTopicModel(algorithm="truncation_free", random_state=0)
    with pytest.raises(DataError, match=r"`X` has no tokens"):
        m.fit(iter([E, E]))
    assert not hasattr(m, "summaries_")
    with pytest.raises(NotFittedError):
        m.transform(bars[:2])
    with pytest.raises(DataError, match=r"`X` has no tokens"):
        HDPTopicModel(algorithm="truncation_free").partial_fit(E)
    # an empty first batch of a stream is fine when a later one has words
    m = HDPTopicModel(algorithm="truncation_free", random_state=0).fit(iter([E, bars[:10]]))
    assert m.summaries_.K >= 1 and np.isfinite(m.transform(bars[:2])).all()


# ----------------------------------------------------------------------- bag-of-words ids
@pytest.mark.parametrize("doc,match", [([("3", 2)], r"word id '3' of type str"), ([(True, 2)], r"word id True of type bool"),
                                       ([(10**12, 2)], r"word id 1000000000000; word ids must be integers in 0\.\.2147483646"),
                                       ([(1e20, 2)], r"word id 1e\+20; word ids must be integers in 0\.\.2147483646")])
def test_bag_of_words_ids_that_are_no_word_ids(doc, match):
    docs = [[(0, 1), (1, 3)], doc]
    with pytest.raises(DataError, match=rf"`X`: document 1 has {match}"):
        HDPTopicModel(max_laps=1).fit(docs)
    with pytest.raises(DataError, match=rf"`X`: document 1 has {match}"):
        FiniteTopicModel(max_laps=1).partial_fit(docs)


def test_a_count_matrix_as_nested_lists_is_told_to_pass_an_array(bars):
    """Lists are corpora of bag-of-words documents; a count matrix written as a list of rows
    gets an error that says how to pass it, and fits once it is an array."""
    rows = bars[:5].toarray().tolist()
    for m in (HDPTopicModel(max_laps=1), FiniteTopicModel(3, max_laps=1)):
        with pytest.raises(DataError, match=r"document 0 is not a list of \(word_id, count\) pairs \(got shape \(900,\)\); "
                                            r"a count matrix given as a list of rows .* pass np\.asarray\(X\)"):
            m.fit(rows)
        assert _fit(m, np.asarray(rows)).n_features_in_ == 900
    # a malformed bag-of-words document gets no such hint
    with pytest.raises(DataError, match=r"pairs \(got shape \(2, 3\)\)$"):
        HDPTopicModel(max_laps=1).fit([[(0, 1, 2), (1, 1, 1)]])


@pytest.mark.parametrize("cls", [HDPTopicModel, FiniteTopicModel])
@pytest.mark.parametrize("prior_count", [1e-150, 7.4e-155, 1e-300, 5e-324])
def test_tiny_prior_counts_fit(bars, cls, prior_count):
    """Pseudo-counts whose trigamma overflows (below ~7.5e-155) skip the expansions around the
    prior (where 0 · inf was NaN): the fit, its objective and its score are finite."""
    m = _fit(cls(prior_count=prior_count, n_components=4, max_laps=3, random_state=0), bars)
    assert np.isfinite(m.elbo_) and np.all(np.isfinite(m.history_["elbo"]))
    assert np.isfinite(m.score(bars)) and np.all(np.isfinite(m.transform(bars)))


@pytest.mark.parametrize("prior_count", [7.4e-155, 1e-300])
def test_tiny_prior_counts_fit_a_multinomial_mixture(prior_count):
    from bnpcore import DPMixture

    X = np.random.default_rng(0).poisson(2, (120, 5)).astype(float)
    m = _fit(DPMixture(obs="mult", n_components=3, max_laps=3, prior_count=prior_count, random_state=0), X)
    assert np.isfinite(m.elbo_) and np.isfinite(m.score(X))
