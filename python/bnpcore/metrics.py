r"""Evaluation measures of fitted models that do not depend on the model family's internals.

:func:`topic_coherence` scores the top words of topics by how often they occur in the same
documents of a reference corpus — the measures users of gensim (``CoherenceModel``) and tomotopy
(``tomotopy.coherence``) report beside held-out likelihood (:meth:`HDPTopicModel.score
<bnpcore.HDPTopicModel.score>`). It takes any topics (a topic-word matrix or word-id lists), so
the topics of other libraries are scored by the same code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnpcore._validation import check_param
from bnpcore.exceptions import DataError, ParameterError, ShapeError

__all__ = ["COHERENCE_EPSILON", "MEASURES", "topic_coherence"]

#: the ε added to co-document frequencies (gensim's ``EPSILON``), so that a pair of words that
#: never share a document scores a finite value
COHERENCE_EPSILON = 1e-12

#: the coherence measures of :func:`topic_coherence`
MEASURES = ("u_mass", "npmi")


def _top_word_lists(topics, n_words: int | None, V: int) -> np.ndarray:
    """(K, n) word ids: the ``n_words`` largest entries of each row of a (K, V) matrix, largest
    first (ties by the smaller id), or the given lists (all of one length, ≥ 2)."""
    if _vocab_size_hint(topics) is not None:
        T = np.asarray(topics, dtype=np.float64)
        if T.shape[1] != V:
            raise ShapeError(f"`topics` has {T.shape[1]} columns (words) but `X` has {V}")
        if not np.isfinite(T).all():
            raise DataError("`topics` contains NaN or infinity")
        n = 10 if n_words is None else int(n_words)
        if n > V:
            raise ParameterError(f"`n_words` must be at most the vocabulary size {V}, got {n}")
        return np.argsort(-T, axis=1, kind="stable")[:, :n]
    lists = topics  # arrays already (topic_coherence)
    if not lists:
        raise ShapeError("`topics` holds no topics")
    for k, t in enumerate(lists):
        if t.ndim != 1 or t.size < 2 or t.dtype.kind not in "iu":
            raise DataError(f"`topics`: topic {k} must be a list of at least 2 integer word ids, got {t.tolist()!r}")
        if t.min() < 0 or t.max() >= V:
            raise DataError(f"`topics`: topic {k} has word id {int(t.min() if t.min() < 0 else t.max())}; word ids must lie in 0..{V - 1}")
        if np.unique(t).size != t.size:
            raise DataError(f"`topics`: topic {k} repeats a word id")
    sizes = {t.size for t in lists}
    if len(sizes) != 1:
        raise ShapeError(f"`topics`: every word-id list must have the same length, got lengths {sorted(sizes)}")
    n = next(iter(sizes))
    if n_words is not None and int(n_words) > n:
        raise ParameterError(f"`n_words` is {int(n_words)} but the word-id lists have {n} words")
    return np.stack(lists).astype(np.int64)[:, : n if n_words is None else int(n_words)]


def topic_coherence(topics: Any, X: Any, *, n_words: int | None = None, measure: str = "u_mass") -> np.ndarray:
    r"""Coherence of each topic's top words on the documents of ``X`` (document co-occurrence).

    With :math:`D` documents, :math:`D(w)` the number of documents of ``X`` containing word
    :math:`w`, :math:`D(w, w')` the number containing both, :math:`w_1, \dots, w_n` a topic's
    top words (most probable first) and :math:`\epsilon` = :data:`COHERENCE_EPSILON`:

    ``"u_mass"`` (Mimno et al. 2011, as gensim's ``CoherenceModel(coherence="u_mass")``
    computes it: mean over the ordered pairs of the log conditional probability)

    .. math::

        C_k = \binom{n}{2}^{-1} \sum_{i=2}^{n} \sum_{j<i}
              \ln \frac{D(w_i, w_j)/D + \epsilon}{D(w_j)/D}

    (a pair whose :math:`D(w_j)` is 0 counts 0, as in gensim); higher is more coherent, at
    most about 0.

    ``"npmi"`` (normalised pointwise mutual information of Bouma 2009 with document
    co-occurrence probabilities :math:`p(w) = D(w)/D`, :math:`p(w, w') = D(w, w')/D`; Lau et
    al. 2014; gensim's ``log_ratio_measure(normalize=True)`` on boolean documents)

    .. math::

        C_k = \binom{n}{2}^{-1} \sum_{i<j}
              \frac{\ln\big((p(w_i, w_j) + \epsilon) / (p(w_i)\, p(w_j))\big)}{-\ln\big(p(w_i, w_j) + \epsilon\big)}

    in :math:`[-1, 1]` up to ε (a pair that never shares a document scores about −1; one
    with a word absent from ``X`` counts −1, and one that shares every document counts 1, the
    limit that the ratio 0/0 has there — with ε it would be −1, as in gensim).

    Parameters
    ----------
    topics : array-like of shape (K, n_vocab), or sequence of K sequences of word ids
        Topic-word weights (``model.topics_``, another library's topic-word matrix), whose
        ``n_words`` largest entries per row are the top words (ties: the smaller id first), or
        the top words of every topic, most probable first (all lists of one length, ≥ 2; an
        integer array is read as such lists, e.g. ``model.top_words(10)``).
    X : scipy.sparse matrix, array-like or bag-of-words corpus of shape (n_docs, n_vocab)
        The reference documents (counts; only whether a word occurs in a document matters):
        the training corpus, or held-out documents.
    n_words : int or None, default=None
        Top words per topic (≥ 2); None: 10 of a matrix, every word of the lists. With
        word-id lists, the first ``n_words`` of each.
    measure : {"u_mass", "npmi"}, default="u_mass"

    Returns
    -------
    ndarray of shape (K,)
        The coherence of every topic; ``.mean()`` is the usual single number.

    Raises
    ------
    ParameterError
        For an unknown ``measure`` or ``n_words`` below 2 or above the vocabulary.
    DataError, ShapeError
        For invalid counts, word ids or shapes (:func:`bnpcore.data.documents.bow_to_csr`
        rules for corpora).

    Examples
    --------
    >>> import numpy as np
    >>> from bnpcore.metrics import topic_coherence
    >>> X = np.array([[1, 1, 0, 0], [2, 1, 0, 0], [0, 0, 3, 1], [0, 1, 1, 1]])
    >>> topic_coherence([[0, 1], [2, 3]], X).round(4)
    array([0., 0.])
    >>> topic_coherence([[0, 2], [1, 3]], X, measure="npmi").round(4)
    array([-0.9498, -0.2925])
    """
    from bnpcore._validation import check_counts_csr
    from bnpcore.data.documents import _is_count_matrix, bow_to_csr

    check_param("measure", measure, kind="str", options=MEASURES)
    if _vocab_size_hint(topics) is None:  # word-id lists (read once: a generator is fine)
        try:
            topics = [np.asarray(t) for t in topics]
        except TypeError:
            raise DataError(f"`topics` must be a (K, n_vocab) array of topic-word weights or a list of word-id lists, got {type(topics).__name__}") from None
    check_param("n_words", n_words, kind="int", low=2, low_inclusive=True, allow_none=True)
    if _is_count_matrix(X):
        A = check_counts_csr(X, name="X")
    else:
        import scipy.sparse as sp

        from bnpcore.data.documents import MAX_N_VOCAB

        docs = list(X)
        if not docs:
            raise ShapeError("`X` has no documents")
        # a corpus has no width of its own: the topic matrix's, else the largest word id + 1
        # of the corpus and of the word-id lists
        width = _vocab_size_hint(topics)
        A = bow_to_csr(docs, MAX_N_VOCAB if width is None else width, name="X")
        if width is None:
            ids = [t for t in topics if t.size and t.dtype.kind in "iu"]  # (others: _top_word_lists says what is wrong)
            width = max([int(A.indices.max()) + 1 if A.nnz else 1] + [int(t.max()) + 1 for t in ids])
            A = sp.csr_array((A.data, A.indices, A.indptr), shape=(A.shape[0], width))
    D, V = A.shape
    if D == 0:
        raise ShapeError("`X` has no documents")
    return _coherence_of(_top_word_lists(topics, n_words, V), A, measure)


def _coherence_of(top: np.ndarray, A, measure: str) -> np.ndarray:
    """:func:`topic_coherence` of the word ids ``top`` (K, n) on the validated CSR counts ``A``
    (at least one document) with a known ``measure``."""
    D = A.shape[0]
    # which documents contain each word (counts > 0), by word: CSC of the boolean matrix
    B = A.tocsc(copy=True)
    B.eliminate_zeros()
    B.data = np.ones_like(B.data)
    df = np.diff(B.indptr).astype(np.float64)  # documents containing each word
    j, i = np.triu_indices(top.shape[1], k=1)  # the pairs j < i
    out = np.empty(top.shape[0])
    for k, words in enumerate(top):
        S = B[:, words]
        co = np.asarray((S.T @ S).todense(), dtype=np.float64)  # D(w_i, w_j); diagonal D(w_i)
        p_ij = co[i, j] / D
        if measure == "u_mass":
            d_star = df[words[j]]
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.log((p_ij + COHERENCE_EPSILON) / (d_star / D))
            v[d_star == 0] = 0.0
        else:
            p_i, p_j = df[words[i]] / D, df[words[j]] / D
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.log((p_ij + COHERENCE_EPSILON) / (p_i * p_j)) / -np.log(p_ij + COHERENCE_EPSILON)
            v[(p_i == 0) | (p_j == 0)] = -1.0
            v[co[i, j] == D] = 1.0  # in every document together: complete co-occurrence (0/0 without ε)
        out[k] = float(np.mean(v))
    return out


def _vocab_size_hint(topics) -> int | None:
    """The width of ``topics`` if it is a (K, V) matrix of weights (a float array, or any 2-D
    array-like with a ``shape`` that is not an integer array of word ids), else None."""
    shape = getattr(topics, "shape", None)
    if shape is None or len(shape) != 2:
        return None
    kind = getattr(getattr(topics, "dtype", None), "kind", "f")
    return None if kind in "iu" else int(shape[1])
