"""HDP topic model and LDA estimators (scikit-learn style front doors) on the generic engine.

The family hooks of :class:`~bnpcore.estimators._engine.VBEstimator` are supplied here: the
allocation models and the model of :mod:`bnpcore.topic`, the document batch sources of
:mod:`bnpcore.data.documents`, the random-document / k-means++ initialisation and the topic
moves of :mod:`bnpcore.moves.topic`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from bnpcore._validation import check_counts_csr, check_not_lazy, check_param, check_vocabulary, make_csr
from bnpcore.algorithms.executor import shared_options
from bnpcore.data.documents import DocumentBatches, DocumentStream, _is_count_matrix, _is_iterator, bow_to_csr, document_source
from bnpcore.estimators._base import TransformerMixin
from bnpcore.estimators._engine import DOC_CHECKPOINT, DOC_CLIENT, DOC_LEARNING_RATE, DOC_SEED_THREADS, VBEstimator
from bnpcore.estimators._truncation_free import TRUNCATION_FREE, TruncationFreeMixin
from bnpcore.exceptions import DataError, ParameterError, ShapeError
from bnpcore.io import register_model_type
from bnpcore.moves.topic import TopicMoveConfig, TopicMoveManager
from bnpcore.obs import ObsModel
from bnpcore.topic import HDPTopicAlloc, LDAAlloc, TopicModel, TruncationFreeHDPAlloc, init_topic_stats

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable

    from bnpcore.estimators._engine import RandomStateLike


#: ``n_batches=None`` with a stochastic algorithm: minibatches per pass
STOCHASTIC_BATCHES = 10

__all__ = ["FiniteTopicModel", "HDPTopicModel"]

_T = TypeVar("_T", bound="_BaseTopicModel")


def _minibatches(n_entries: int, n_vocab: int, n_docs: int) -> int:
    """``n_batches=None`` with a stochastic algorithm: min(10, documents) minibatches."""
    return max(1, min(STOCHASTIC_BATCHES, int(n_docs)))

INITS = ("random_docs", "kmeans++")

#: seed of the token split of :meth:`_BaseTopicModel.score` unless one is given
SCORE_SEED = 0


#: numpy's hypergeometric sampler needs fewer than this many tokens of a kind
_HYPERGEOM_MAX = 10**9


def _split_tokens(X, rng):
    r"""Document-completion split of a canonical CSR count matrix: of each document's
    :math:`T_d` tokens a uniformly random subset of :math:`\lfloor T_d/2\rfloor` is *observed*
    and the other :math:`\lceil T_d/2\rceil` are *held out* — the distribution of shuffling the
    tokens and cutting after the first half, drawn without expanding the tokens: the observed
    count of a document's :math:`j`-th word type (column order) is hypergeometric given the
    draws before it, :math:`s_j\sim\mathrm{Hyp}(c_j,\;R_j-c_j,\;\lfloor T_d/2\rfloor-\sum_{i<j}s_i)`
    with :math:`R_j=\sum_{i\ge j}c_i` (all documents at once, one vectorised draw per position).
    Time and memory :math:`O(\mathrm{nnz})`, whatever the counts. Returns two CSR matrices of
    the shape of ``X``.

    Raises
    ------
    DataError
        A document holds :math:`10^9` tokens or more (beyond numpy's hypergeometric sampler).
    """
    n_docs, V = X.shape
    counts = np.asarray(X.data, dtype=np.int64)
    indptr = np.asarray(X.indptr, dtype=np.int64)
    lens = np.diff(indptr)
    csum = np.concatenate([[0], np.cumsum(counts)])
    remaining = csum[indptr[1:]] - csum[indptr[:-1]]
    if counts.size and remaining.max() >= _HYPERGEOM_MAX:
        d = int(np.argmax(remaining))
        raise DataError(f"`X`: document {d} holds {int(remaining[d])} tokens; document completion splits at most {_HYPERGEOM_MAX - 1} per document")
    need = remaining // 2
    seen = np.zeros(counts.shape[0], dtype=np.int64)
    pos = np.arange(counts.shape[0], dtype=np.int64) - np.repeat(indptr[:-1], lens)
    by_pos = np.argsort(pos, kind="stable")  # entries grouped by position, documents in order
    bounds = np.searchsorted(pos[by_pos], np.arange(int(lens.max(initial=0)) + 1))
    docs_of = np.repeat(np.arange(n_docs, dtype=np.int64), lens)
    for p in range(bounds.shape[0] - 1):
        e = by_pos[bounds[p] : bounds[p + 1]]
        d = docs_of[e]
        c = counts[e]
        s = rng.hypergeometric(c, remaining[d] - c, need[d])
        seen[e] = s
        remaining[d] -= c
        need[d] -= s

    def build(data):
        keep = data > 0
        ptr = np.concatenate([[0], np.cumsum(np.bincount(docs_of[keep], minlength=n_docs))])
        return make_csr(data[keep].astype(np.float64), np.asarray(X.indices, dtype=np.int64)[keep], ptr, (n_docs, V))

    return build(seen), build(counts - seen)


class _BaseTopicModel(TransformerMixin, VBEstimator):
    """Topic models over bag-of-words documents on the generic engine; subclasses pick the
    allocation model."""

    _move_manager = TopicMoveManager
    #: a DataFrame's column names (the vocabulary) are kept and checked, as by scikit-learn's LDA
    _records_feature_names = True

    # fitted attributes (declared for type checkers; set by ``fit``, see the class docstring)
    topics_: np.ndarray
    components_: np.ndarray
    topic_weights_: np.ndarray
    counts_: np.ndarray

    # -------------------------------------------------------------- scikit-learn tags
    def _accepts_sparse(self) -> bool:
        return True  # document-word counts stay sparse all the way into the document step

    def _positive_only(self) -> bool:
        return True  # counts (as scikit-learn's LatentDirichletAllocation)

    # ------------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        check_param("alpha", self.alpha, kind="real", low=0)  # before _make_alloc, which reads them
        if hasattr(self, "gamma"):
            check_param("gamma", self.gamma, kind="real", low=0)
        check_param("n_components", self.n_components, kind="int", low=1, low_inclusive=True, allow_none=self._make_alloc().nested)
        check_param("prior_count", self.prior_count, kind="real", low=0)
        check_param("init", self.init, kind="str", options=INITS)
        check_param("doc_max_iter", self.doc_max_iter, kind="int", low=1, low_inclusive=True)
        check_param("doc_tol", self.doc_tol, kind="real", low=0, low_inclusive=True)
        check_param("restarts", self.restarts, kind="bool")
        check_param("overrelax", self.overrelax, kind="real", low=1, low_inclusive=True)
        self._refuse_other_family_moves(nested_cls="HDPTopicModel", finite_cls="FiniteTopicModel", truncation="HDP", units="topics")
        self._validate_engine_params()
        self._moves_tuple()

    # ------------------------------------------------------------------ building
    def _initial_components(self) -> int:
        """``n_components``, or when it is None: 1 if births can grow the model
        (:meth:`_births_grow`; not in a stream), else 50."""
        if self.n_components is not None:
            return int(self.n_components)
        return 1 if self._births_grow() else 50

    def _overrelax(self) -> float:
        return float(self.overrelax)

    def _doc_options(self) -> dict:
        return {"max_iter": int(self.doc_max_iter), "tol": float(self.doc_tol), "restarts": bool(self.restarts)}

    def _make_model(self, obs_model) -> TopicModel:
        return TopicModel(self._make_alloc(), obs_model, top_l=self.top_l, doc_options=self._doc_options())

    def _make_obs(self, X0) -> ObsModel:
        return ObsModel("mult", {"lam": np.full(int(X0.shape[1]), float(self.prior_count))})

    def _initialize(self, source, seeds=None, *, revisit: bool = True) -> None:
        self._init_n_docs = float(source.n_rows)
        super()._initialize(source, seeds, revisit=revisit)

    def _init_stats(self, model, X0, rng):
        return init_topic_stats(
            X0,
            self._initial_components(),
            self.init,
            rng,
            n_docs=getattr(self, "_init_n_docs", X0.shape[0]),
            prior_count=float(self.prior_count),
        )

    def _doc_batches(self) -> tuple:
        """``(n_batches, auto)`` for :func:`bnpcore.data.documents.document_source`: one batch
        for ``algorithm="full"``; with None, the corpus's number for memoized learning
        (:func:`bnpcore.data.documents.auto_document_batches`) and min(10, documents) for the
        stochastic algorithms, which need minibatches."""
        algorithm = self._algorithm()
        if algorithm == "full":
            return 1, None
        if self.n_batches is not None:
            return int(self.n_batches), None
        if algorithm == "memoized":
            return None, None
        return None, _minibatches

    def _make_source(self, X, seed=None):
        n_vocab = self.n_features_in_ if self._continuing() else getattr(self, "_fit_n_vocab", None)
        n_batches, auto = self._doc_batches()
        src = document_source(X, n_batches, n_vocab=n_vocab, auto=auto)
        if self._algorithm() == "full" and len(src) > 1:
            raise ParameterError(
                "algorithm='full' needs the corpus as one matrix or corpus; use algorithm='memoized' (or 'stochastic') "
                "for a list of batches"
            )
        return src

    def _check_batch(self, X, name: str):
        """One batch of a stream or of ``partial_fit``: counts (sparse, dense or another 2-D
        array-like) or a list of bag-of-words documents (vocabulary size: the fitted model's, else the largest word id
        + 1 of this first batch)."""
        n_vocab = self.n_features_in_ if hasattr(self, "state_") else getattr(self, "_fit_n_vocab", None)
        if _is_count_matrix(X):
            return check_counts_csr(X, name=name, n_vocab=n_vocab)
        try:
            docs = list(X)
        except TypeError:
            raise DataError(f"`{name}` must be a count matrix or a list of bag-of-words documents, got {type(X).__name__}") from None
        if n_vocab is None:
            top = [int(w) for doc in docs for w, _ in doc]
            n_vocab = max(top) + 1 if top else 1
        return bow_to_csr(docs, int(n_vocab), name=name)

    def _batch_source(self, X):
        return DocumentBatches(X, 1)

    def _make_moves(self):
        if self._algorithm() == "stochastic":
            return None
        kinds = self._moves_tuple()
        config = TopicMoveConfig(
            kinds=kinds,
            start_lap={"birth": self.birth_start_lap, "merge": self.merge_start_lap, "delete": self.delete_start_lap, "swap": self.birth_start_lap},
            max_per_lap={"birth": self.max_births_per_lap, "merge": self.max_merges_per_lap, "delete": self.max_deletes_per_lap,
                         "swap": self.max_births_per_lap},
            options=dict(self.move_options or {}),
            n_threads=self.n_threads,
        )
        manager = TopicMoveManager(config)
        return manager

    def _set_fitted(self, model, G) -> None:
        lam = model.lam(G)
        self.components_ = lam
        self.topics_ = lam / lam.sum(axis=1, keepdims=True)
        self.topic_weights_ = np.asarray(model.alloc.weights(G), dtype=np.float64)
        self.counts_ = np.asarray(G.N, dtype=np.float64).copy()

    # ----------------------------------------------------------------------- fit
    def fit(self: _T, X: Any, y: Any = None, *, n_vocab: int | None = None, eval_X: Any = None) -> _T:
        """Fit the topic model to the corpus ``X``.

        Parameters
        ----------
        X : document-by-word counts, corpus, list of batches or iterator
            * a scipy.sparse matrix or array of counts (CSR, CSC, COO, ``csr_array``, ...) of
              shape (n_docs, n_vocab): kept sparse all the way into the Rust document step
              (never densified), split into ``n_batches`` contiguous batches of whole
              documents balanced by tokens;
            * a dense count array of the same shape, or any other 2-D array-like that is not
              a list (a pandas DataFrame, an object with ``__array__`` and a 2-D ``shape``);
            * a bag-of-words corpus (gensim style: a re-iterable of documents, each a list of
              ``(word_id, count)`` pairs), re-read on every lap and never held whole. A list
              of lists is always such a corpus, never a dense matrix (``[[1, 0], [0, 2]]`` is
              two documents of one pair each): pass an array for dense counts;
            * a list of sparse matrices or ``.npz`` files (``scipy.sparse.save_npz``), one
              batch each, read when visited (corpora larger than memory);
            * an iterator (one pass only) of documents or of sparse batches: one streaming lap
              (:meth:`partial_fit` per batch of 1000 documents).

            Counts must be finite non-negative integers and word ids below the vocabulary size
            (``ValueError`` subclasses naming ``X``, the document and the word). Empty
            documents are allowed and contribute nothing; a corpus without a single word is
            an error.
        y : ignored
        n_vocab : int or None
            Vocabulary size, when it is larger than the largest word id + 1 of a bag-of-words
            corpus; required for an iterator of documents (unless the model is already fitted).
        eval_X : held-out documents or None
            Checked before the first lap (converted once; an iterator is fine), scored with
            :meth:`score` after every lap (pass); kept in ``history_["score"]``.
            The way to follow ``algorithm="truncation_free"``, which has no objective.

        Returns
        -------
        self
        """
        if n_vocab is not None:
            check_param("n_vocab", n_vocab, kind="int", low=1, low_inclusive=True)
        self._fit_n_vocab = n_vocab
        try:
            if self._is_one_shot(X):
                X = self._as_batch_stream(X, n_vocab)
            return super().fit(X, y, eval_X=eval_X)
        finally:
            self._fit_n_vocab = None

    def partial_fit(self: _T, X: Any, y: Any = None, *, n_vocab: int | None = None) -> _T:
        r"""Add one batch of new documents (streaming memoized update, Hughes & Sudderth 2013
        §3; ``algorithm="truncation_free"``: one minibatch of its sampler).

        The document step runs on ``X`` with the current topics, its summaries join the
        whole-corpus summaries as a frozen memo (the documents are not kept), then the global
        step. The first call initialises the model from ``X`` and fixes the vocabulary size;
        each call counts as one lap in ``history_``. The document step runs in this process
        whatever ``backend``.

        Parameters
        ----------
        X : document-by-word counts or a list of bag-of-words documents
            A scipy.sparse matrix, dense count array or other 2-D array-like of shape
            (n_docs, n_vocab), or a list of documents, each a list of ``(word_id, count)``
            pairs (as for :meth:`fit`).
        y : ignored
        n_vocab : int or None
            Vocabulary size, as in :meth:`fit`. On the first call it fixes the size for every
            later batch (without it, a bag-of-words batch fixes it at its largest word id + 1,
            and a later batch with a larger id is refused); a count matrix must then have
            ``n_vocab`` columns. On later calls it may only repeat the fitted size
            (``n_features_in_``).

        Returns
        -------
        self

        Raises
        ------
        ParameterError
            ``n_vocab`` is not a positive integer, or differs from the fitted vocabulary size.
        """
        if n_vocab is not None:
            check_param("n_vocab", n_vocab, kind="int", low=1, low_inclusive=True)
            if hasattr(self, "state_") and int(n_vocab) != int(self.n_features_in_):
                raise ParameterError(
                    f"`n_vocab`={n_vocab} differs from the vocabulary size of the fitted model ({self.n_features_in_}); "
                    "it is fixed by the first call to partial_fit (or by fit)"
                )
        self._fit_n_vocab = n_vocab
        try:
            return super().partial_fit(X, y)
        finally:
            self._fit_n_vocab = None

    def _is_one_shot(self, X) -> bool:
        """Only an iterator (``iter(X) is X``) is one-shot: any other iterable corpus is
        re-read on every lap."""
        return _is_iterator(X)

    def _as_batch_stream(self, X, n_vocab):
        """An iterator of documents becomes a stream of CSR batches; an iterator of batches is
        used as it is."""
        import itertools

        it = iter(X)
        try:
            first = next(it)
        except StopIteration:
            raise DataError("`X` is an empty iterator") from None
        chained = itertools.chain([first], it)
        if _is_count_matrix(first):
            return chained
        V = n_vocab if n_vocab is not None else (self.n_features_in_ if self._continuing() else None)
        if V is None:
            raise ParameterError(
                "fitting an iterator of documents needs `n_vocab` (fit(X, n_vocab=...)): the vocabulary size cannot be known before the stream ends"
            )
        return iter(DocumentStream(chained, 1000, n_vocab=int(V)))

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> np.ndarray:
        """Fit to ``X`` and return its document-topic proportions (:meth:`transform`).

        Parameters
        ----------
        X : scipy.sparse matrix, array-like or re-iterable corpus of shape (n_docs, n_vocab)
            Document-word counts (see :meth:`fit`); read twice, so not a one-shot iterator.
        y : ignored
            Present for scikit-learn's API.
        **fit_params
            Passed to :meth:`fit`.

        Returns
        -------
        doc_topic : ndarray of shape (n_docs, K)
            Rows sum to 1.
        """
        if self._is_one_shot(X):
            raise ParameterError("fit_transform needs a corpus that can be read twice; an iterator is read once")
        return self.fit(X, **fit_params).transform(X)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the columns of :meth:`transform`, scikit-learn's convention for transformers
        (and what ``set_output(transform="pandas")`` labels them with): the lower-cased class
        name followed by the topic's position, ``hdptopicmodel0``, ``hdptopicmodel1``, ...

        Parameters
        ----------
        input_features : array-like of str or None
            The vocabulary's names; only its length is checked (it must be ``n_features_in_``).

        Returns
        -------
        ndarray of str objects, shape (K,)
        """
        self._check_fitted()
        if input_features is not None and len(input_features) != self.n_features_in_:
            raise ShapeError(
                f"`input_features` has {len(input_features)} names, but {type(self).__name__} was fitted on "
                f"{self.n_features_in_} words"
            )
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{k}" for k in range(self.summaries_.K)], dtype=object)

    # ----------------------------------------------------------------- inference
    def _as_csr(self, X, name="X"):
        self._check_fitted()
        if _is_count_matrix(X):
            self._check_feature_names(X)
        return self._corpus_csr(X, name)

    def _check_eval_X(self, eval_X):
        # once, as CSR: a corpus is converted once (an iterator would be consumed by the first lap)
        return self._corpus_csr(eval_X, "eval_X")

    def _corpus_csr(self, X, name: str):
        """Documents to score or transform as CSR counts over the fitted vocabulary."""
        check_not_lazy(X, name)
        V = int(self.n_features_in_)
        if _is_count_matrix(X):
            return check_counts_csr(X, name=name, n_vocab=V)
        if self._is_one_shot(X):
            X = list(X)
        try:
            iter(X)
        except TypeError:
            raise DataError(f"`{name}` must be a count matrix or a bag-of-words corpus, got {type(X).__name__}") from None
        return bow_to_csr(X, V, name=name)

    def _doc_proportions(self, model, out, G):
        a, a_rem = model.alloc.doc_prior(G)
        theta = out["doc_topic"] + a[None, :]
        return theta, (0.0 if a_rem is None else float(a_rem))

    def transform(self, X) -> np.ndarray:
        r"""Document-topic proportions :math:`\mathbb E_q[\pi_{dk}]` over the K represented
        topics, renormalised to sum to 1 (one document step with the fitted globals; the HDP's
        rest mass :math:`\alpha\beta_{>K}` is left out). An empty document gets the prior mean.

        Parameters
        ----------
        X : counts (sparse, dense or a 2-D array-like such as a DataFrame) of shape (n_docs, n_vocab) or a bag-of-words corpus

        Returns
        -------
        ndarray of shape (n_docs, n_components)
        """
        X = self._as_csr(X)
        model = self._make_model(self.obs_model_)
        G = self.summaries_
        out = np.empty((X.shape[0], G.K))
        chunk = max(1, (1 << 22) // max(G.K, 1))
        shared = shared_options(model, G, -(-X.shape[0] // chunk), n_threads=self.n_threads)
        for lo in range(0, X.shape[0], chunk):
            hi = min(lo + chunk, X.shape[0])
            Xc = make_csr(
                X.data[X.indptr[lo] : X.indptr[hi]],
                X.indices[X.indptr[lo] : X.indptr[hi]],
                X.indptr[lo : hi + 1] - X.indptr[lo],
                (hi - lo, X.shape[1]),
            )
            res = model.local_step(Xc, G, n_threads=self.n_threads, return_doc_topic=True, **shared)
            theta, _ = self._doc_proportions(model, res, G)
            out[lo:hi] = theta / theta.sum(axis=1, keepdims=True)
        return out

    def score(self, X, y=None, *, random_state=None) -> float:
        r"""Held-out log predictive probability per token by *document completion* (nats per
        token; higher is better; Hughes thesis eq. 5.59).

        Split rule: of every document's :math:`T_d` tokens a uniformly random subset of
        :math:`\lfloor T_d/2\rfloor` is *observed* and the other :math:`\lceil T_d/2\rceil` are
        *held out*, drawn with a generator seeded by ``random_state`` (default 0, so repeated
        calls agree) as sequential hypergeometric counts per word type, without expanding the
        tokens (time and memory linear in the stored entries, whatever the counts). With point
        estimates :math:`\hat\phi_k` (``topics_``), the document step on the observed half
        gives :math:`\hat\pi_d=\mathbb E_q[\pi_d]`; the score is
        :math:`\sum_d\sum_{n\in\text{held out}}\ln\big(\sum_k\hat\pi_{dk}\hat\phi_{kx_n}
        +\hat\pi_{d,\rm rem}/V\big)` divided by the number of held-out tokens (the HDP's rest
        mass predicts uniformly, the prior predictive of a new topic).

        Parameters
        ----------
        X : counts of shape (n_docs, n_vocab) or a bag-of-words corpus (held-out documents)
        y : ignored
        random_state : int or None

        Returns
        -------
        float
        """
        X = self._as_csr(X)
        seed = SCORE_SEED if random_state is None else random_state
        seen, held = _split_tokens(X, np.random.default_rng(seed))
        n_held = float(held.data.sum())
        if n_held <= 0:
            raise DataError("`X` has no tokens to score (document completion needs documents with at least one token)")
        model = self._make_model(self.obs_model_)
        G = self.summaries_
        phi = np.ascontiguousarray(self.topics_)
        table = np.ascontiguousarray(phi.T)
        res = model.local_step(seen, G, n_threads=self.n_threads, return_doc_topic=True, table=table, top_l=None)
        theta, a_rem = self._doc_proportions(model, res, G)
        tot = theta.sum(axis=1) + a_rem
        pi = theta / tot[:, None]
        pi_rem = a_rem / tot
        rows = np.repeat(np.arange(X.shape[0]), np.diff(held.indptr))
        V = X.shape[1]
        total = 0.0
        chunk = max(1, (1 << 22) // max(G.K, 1))
        for lo in range(0, rows.shape[0], chunk):
            r, w, c = rows[lo : lo + chunk], held.indices[lo : lo + chunk], held.data[lo : lo + chunk]
            p = np.einsum("ij,ji->i", pi[r], phi[:, w]) + pi_rem[r] / V
            total += float(c @ np.log(p))
        return total / n_held

    def perplexity(self, X, *, random_state=None) -> float:
        """Document-completion perplexity per held-out token, ``exp(-score(X))``.

        Parameters
        ----------
        X : scipy.sparse matrix, array-like or corpus of shape (n_docs, n_vocab)
            Held-out documents (see :meth:`score` for the split).
        random_state : int or None
            Seed of the token split (None: the fixed default split of :meth:`score`).

        Returns
        -------
        perplexity : float
            Lower is better.
        """
        return float(np.exp(-self.score(X, random_state=random_state)))

    def top_words(self, n: int = 10, vocabulary: Any = None) -> Any:
        """The ``n`` most probable words of every topic (rows of ``topics_``, most probable first).

        Parameters
        ----------
        n : int
        vocabulary : sequence of str of length n_vocab, mapping, or None
            The words in column order (any sequence or iterable), an id-to-word mapping
            (``{id: word}``, gensim's ``Dictionary``) or a word-to-id mapping (gensim's
            ``token2id``, scikit-learn's ``CountVectorizer.vocabulary_``) covering the ids
            ``0 .. n_vocab - 1``.

        Returns
        -------
        ndarray of int of shape (n_components, n) (word ids), or a list of lists of words when
        ``vocabulary`` is given.

        Raises
        ------
        ParameterError
            If ``vocabulary`` does not give one word for each of the ``n_vocab`` ids.
        """
        self._check_fitted()
        check_param("n", n, kind="int", low=1, low_inclusive=True)
        idx = np.argsort(-self.topics_, axis=1, kind="stable")[:, : int(n)]
        if vocabulary is None:
            return idx
        vocab = check_vocabulary(vocabulary, self.topics_.shape[1])
        return [[vocab[i] for i in row] for row in idx]

    def coherence(self, X: Any, *, n_words: int = 10, measure: str = "u_mass") -> np.ndarray:
        r"""Coherence of every topic's ``n_words`` most probable words (rows of ``topics_``) on
        the documents of ``X``: how often they occur in the same documents
        (:func:`bnpcore.metrics.topic_coherence`, which gives the formulas; ``"u_mass"`` is the
        value of gensim's ``CoherenceModel(coherence="u_mass")`` for the same top words).

        Parameters
        ----------
        X : scipy.sparse matrix, array-like or bag-of-words corpus of shape (n_docs, n_vocab)
            Reference documents over the fitted vocabulary (the training corpus or held-out
            documents); only whether a word occurs in a document matters.
        n_words : int, default=10
            Top words per topic (≥ 2).
        measure : {"u_mass", "npmi"}, default="u_mass"
            Mimno et al.'s log conditional probability (at most about 0), or the normalised
            pointwise mutual information of document co-occurrence (in [−1, 1]); higher is
            more coherent for both.

        Returns
        -------
        ndarray of shape (n_components,)
            Per topic; ``.mean()`` is the model's coherence.
        """
        from bnpcore.metrics import MEASURES, _coherence_of

        check_param("measure", measure, kind="str", options=MEASURES)
        check_param("n_words", n_words, kind="int", low=2, high=self.topics_.shape[1], low_inclusive=True)
        X = self._as_csr(X)  # validated once here: the metric's own checks would repeat it
        return _coherence_of(self.top_words(int(n_words)), X, measure)


_DOC_COMMON = """
    prior_count : float, default=0.1
        Symmetric Dirichlet pseudocount :math:`\\bar\\lambda` of the topic-word distributions.
    algorithm : {"full", "memoized", "stochastic", "auto"}, default="memoized"
        Full-dataset coordinate ascent, memoized (exact objective from cached batch summaries)
        or stochastic variational inference (Hughes thesis §5.4).
        ``"auto"`` is ``"memoized"`` (the same fit, defaults included).
    n_batches : int or None, default=None
        Batches of whole documents (memoized and stochastic), contiguous and balanced by tokens.
        None: for memoized learning, from the corpus — at most 10, each with at least 25
        (document, word) entries per vocabulary word, so that a batch's document step outweighs
        its per-batch work on the K × V topics (one batch, a full-dataset lap, for small
        corpora such as gensim's Lee corpus; :func:`bnpcore.data.documents.auto_document_batches`);
        for the stochastic algorithms 10 (at most the number of documents). A list of batches
        or a stream brings its own batches.
    max_laps : int, default=100
        Maximum number of passes through the data (in addition to previous ones with ``warm_start``).
    min_laps : int, default=2
        Minimum number of laps before convergence is tested, counted over all the model's
        laps: a warm start or a resume from a checkpoint continues the count (so that 3 + 3 laps
        are 6 laps), and a fit continuing a converged model may stop after one lap.
    tol : float, default=1e-6
        Converged when the relative change of the objective over a lap is at most ``tol``
        and no move was accepted.
    init : {"random_docs", "kmeans++"}, default="random_docs"
        Initial topics: the word counts of ``n_components`` random documents, or of documents
        chosen by Bregman (KL) k-means++. With fewer non-empty documents than topics (among
        the ``init_subsample`` read), every non-empty document gives one topic and each
        further topic is a random redraw of one of them (a Dirichlet draw around it; seeded
        by ``random_state``; :func:`bnpcore.topic.init_topic_stats`).
    init_subsample : int, default=100000
        Documents read to choose the initial topics.
    moves : None or subset of ("birth", "merge", "delete") (HDP) or of ("swap",) (LDA), default=None
        Proposal moves (:mod:`bnpcore.moves.topic`), each accepted only if the objective
        rises; None means, for full and memoized learning, all three for
        :class:`HDPTopicModel` and ``"swap"`` for :class:`FiniteTopicModel`, and none for
        stochastic learning. ``"delete"`` deletes whole topics and, once per set of topics
        after the fit meets its convergence test, every document's allocations below 5 % of
        its tokens at once (``delete_small`` in ``move_options``), and then too the smallest
        topics again with the documents that used them restarted from the prior
        (``delete_settled``). ``"swap"`` keeps the number of topics: the largest topic and the
        smallest other one are replaced by two topics split from the largest (Bregman 2-means
        of its documents' histograms); once a swap is rejected none is proposed again.
    birth_start_lap : int, default=2
        First lap at which births (``FiniteTopicModel``: swaps) are tried.
    merge_start_lap : int, default=2
        First lap at which merges are tried.
    delete_start_lap : int, default=2
        First lap at which deletes are tried.
    max_merges_per_lap : int, default=25
        Candidate pairs tracked per lap.
    max_deletes_per_lap : int, default=2
        Delete candidates evaluated per lap (each costs one document-step pass over the data).
    max_births_per_lap : int, default=1
        Birth (``FiniteTopicModel``: swap) proposals per lap (each costs one document-step pass
        over the data); 0 disables them.
    move_options : dict or None, default=None
        Advanced move settings, keys of
        :attr:`bnpcore.moves.topic.TopicMoveManager.DEFAULT_OPTIONS` (e.g. ``birth_n_new``,
        the number of topics a birth proposes, default 10; ``warm_start``, default True: delete
        and birth candidates start each document from the lap's topic counts rather than from
        the prior); the values each key accepts are in ``TopicMoveManager.OPTION_RANGES``. An
        unknown key or a value out of its range raises
        :class:`~bnpcore.exceptions.ParameterError` before fitting.
    top_l : int or None, default=None
        L-sparse document steps: each word type keeps its ``top_l`` most responsible topics
        (thesis Alg. 7.4). None is dense. It pays off when the number of topics is much larger
        than ``top_l``: on a 1,500-document, 10,000-word corpus (``benches/bench_doc_topic.py``)
        ``top_l=8`` is about 3x faster per lap than dense at K = 400 and 4.6-4.9x at K = 800,
        but no faster than dense at K = 100 (0.87-1.05x), and ``top_l=4`` with K = 10 is about
        2.7x slower (the toy bars).
    dense_laps : int, default=1
        With ``top_l``, the first laps are dense.
    doc_max_iter : int, default=100
        Iterations of the per-document coordinate ascent.
    doc_tol : float, default=0.05
        Stop a document when no document-topic count changes by more than ``doc_tol``.
    restarts : bool, default=True
        Sparse restart proposals in the document step (thesis Alg. 5.2).
    overrelax : float, default=2.0
        Largest over-relaxation factor eta of full and memoized laps
        (``bnpcore.algorithms.overrelax``, after Salakhutdinov & Roweis 2003): a lap's document
        steps use the topic-word counts ``max(S + (eta - 1) (S - S_prev), 0)``, extrapolated
        along the last lap's change, with eta growing x1.5 per lap from 1 up to
        ``overrelax``. The objective stays exact and never decreases: a batch whose
        over-relaxed step would lower it is redone with the plain counts and eta falls back
        to 1; a lap that changes the topics leaves no direction. It shortens the slow linear
        tail of a fit (the bars: 27 -> about 20 laps, to a higher objective). 1 is plain
        coordinate ascent; stochastic learning ignores it.
""" + DOC_LEARNING_RATE + DOC_SEED_THREADS + """    verbose : bool or int, default=False
        Show a progress bar with the objective and the number of topics (on standard error) when true or a
        positive integer (scikit-learn's levels; every level above 0 shows the same bar).
    warm_start : bool, default=False
        Continue from the fitted state on the next ``fit`` (``prior_count`` must be unchanged:
        the fitted prior is part of that state).
    callback : callable(model, info) or None, default=None
        Called after every lap with a dict ``info`` (lap, elbo, n_components, accepted_moves);
        returning ``True`` (or ``numpy.True_``) stops the fit cleanly after that lap.
""" + DOC_CHECKPOINT + """    schedule : {"sequential", "parallel"}, default="sequential"
        Visiting order of a memoized lap: each batch with the topics left by the previous one,
        or every batch of a lap against the lap's starting topics (what a cluster runs), as
        for :class:`bnpcore.DPMixture`.
    backend : {"local", "dask"}, default="local"
        Where the document steps run: rayon threads in this process, or the workers of a Dask
        cluster (``docs/distributed.md``), to which the batches are scattered once; delete and
        birth candidates fetch them back for their extra passes.
""" + DOC_CLIENT + """
    Attributes
    ----------
    n_components_ : int
        Topics with an expected token count of at least 1.
    topics_ : ndarray of shape (K, n_vocab)
        Posterior-mean word probabilities of the K represented topics (rows sum to 1).
    components_ : ndarray of shape (K, n_vocab)
        Posterior Dirichlet parameters :math:`\\bar\\lambda+S_k` (scikit-learn LDA's name).
    topic_weights_ : ndarray of shape (K,)
        HDP: expected global topic probabilities :math:`\\mathbb E[\\pi^G_k]=\\beta_k` (they sum
        to :math:`1-\\beta_{>K}`); LDA: the fixed uniform 1/K.
    counts_ : ndarray of shape (K,)
        Expected tokens per topic.
    elbo_ : float
        Final objective (total nats; the HDP's is the surrogate bound of thesis eq. 5.25).
    history_ : dict of ndarray
        Per lap: ``lap``, ``elbo``, ``n_components``, ``seconds``; for full and memoized laps
        also ``overrelax``, the factor eta the lap's document steps used (1: plain; a lap
        whose over-relaxed step was rejected, and redone plain, records 1).
    moves_log_ : list of dict
        One record per evaluated move.
    n_iter_ : int
    converged_ : bool

    Notes
    -----
    In full and memoized learning the objective never decreases once every batch has been
    visited: a revisited batch whose new (cold-started, non-convex) document step would lower
    the objective keeps its previous summaries (:mod:`bnpcore.moves.topic`).
"""


class HDPTopicModel(TruncationFreeMixin, _BaseTopicModel):
    __doc__ = (
        r"""Hierarchical Dirichlet process topic model fitted by variational inference.

    Documents :math:`\pi_d\sim\mathrm{DP}(\alpha,\pi^G)` over global topic probabilities
    :math:`\pi^G` from a stick-breaking prior :math:`\mathrm{GEM}(\gamma)`, topics
    :math:`\phi_k\sim\mathrm{Dir}(\bar\lambda)`. Mean-field posterior with a nested truncation at
    K topics, full posterior on the top-level sticks and the surrogate bound of Hughes thesis
    §5.2 (eq. 5.25), computed exactly from batch summaries; merge and delete moves remove
    redundant topics (thesis §5.5).

    Parameters
    ----------
    n_components : int or None, default=None
        Initial number of topics K (moves change it). None: 1 when birth moves are on (the
        default for full and memoized learning: births split topics off, merges and deletes
        remove redundant ones), 50 otherwise (also for streams — :meth:`partial_fit` and
        one-shot iterators run no moves). On the toy bars and on gensim's Lee corpus,
        growing from one topic by births reaches markedly better optima than shrinking from
        50 random-document topics (Lee: objective about 4 % higher, held-out score −7.49 vs
        −7.62 nats per token; see docs/topic_models.md). It may exceed the number of
        documents (see ``init``).
    alpha : float, default=0.5
        Document-level concentration.
    gamma : float, default=10.0
        Top-level concentration.
"""
        + _DOC_COMMON.replace(
            """    max_laps : int, default=100
""",
            """    max_laps : int or None, default=None
        None: 200 laps for full and memoized learning, whose moves keep finding topics for a
        while (default fits on the ``lda`` package's Reuters converged after 85–153 laps),
        100 for the stochastic algorithms (passes over the data for ``"truncation_free"``).
""",
        ).replace(
            """        or stochastic variational inference (Hughes thesis §5.4).""",
            """        or stochastic variational inference (Hughes thesis §5.4); HDP only,
        ``"truncation_free"``: the truncation-free stochastic algorithm of Wang & Blei (2012),
        which starts from zero topics (``n_components``, ``n_batches``, ``init`` and the
        document-step options, ``top_l`` included, are ignored while it learns; ``transform``
        and ``score`` of the fitted model use them), samples each minibatch of ``batch_size``
        documents with a locally collapsed Gibbs sampler that can open new topics, and
        updates the topics with the rate :math:`\\rho_t=\\max(S/n_{\\rm seen},S/D)`
        (``docs/truncation_free.md``).""",
        ).replace(
            """
    Attributes
    ----------""",
            """    batch_size : int, default=100
        ``algorithm="truncation_free"``: documents per minibatch S.
    n_sweeps : int, default=5
        ``algorithm="truncation_free"``: Gibbs sweeps per minibatch after the sequential
        initial pass (the last sample is used).
    prune_every : int, default=20000
        ``algorithm="truncation_free"``: topics with fewer than one expected word are removed
        (and the rest re-ordered by size) every ``prune_every`` documents, and at least once
        per pass.

    Attributes
    ----------""",
        )
        + """
    Examples
    --------
    >>> from bnpcore import HDPTopicModel
    >>> from bnpcore.datasets import make_bars
    >>> X, true_topics = make_bars(n_docs=200, random_state=0)  # 10 bar topics, 900 words
    >>> model = HDPTopicModel(n_components=1, n_batches=2, random_state=0).fit(X)
    >>> model.n_components_  # births, merges and deletes find the 10 bars
    10
    >>> X_test, _ = make_bars(n_docs=50, random_state=1)
    >>> round(model.score(X_test), 2)  # held-out nats per token (document completion)
    -5.82
"""
    )

    _max_laps_auto = True

    def _max_laps(self) -> int:
        if self.max_laps is not None:
            return int(self.max_laps)
        return 200 if self._algorithm() in ("full", "memoized") else 100

    def __init__(
        self,
        n_components: int | None = None,
        *,
        alpha: float = 0.5,
        gamma: float = 10.0,
        prior_count: float = 0.1,
        algorithm: str = "memoized",
        n_batches: int | None = None,
        max_laps: int | None = None,
        min_laps: int = 2,
        tol: float = 1e-6,
        init: str = "random_docs",
        init_subsample: int = 100_000,
        moves: str | Iterable[str] | None = None,
        birth_start_lap: int = 2,
        merge_start_lap: int = 2,
        delete_start_lap: int = 2,
        max_births_per_lap: int = 1,
        max_merges_per_lap: int = 25,
        max_deletes_per_lap: int = 2,
        move_options: dict[str, Any] | None = None,
        top_l: int | None = None,
        dense_laps: int = 1,
        doc_max_iter: int = 100,
        doc_tol: float = 0.05,
        restarts: bool = True,
        overrelax: float = 2.0,
        learning_rate_delay: float = 1.0,
        learning_rate_decay: float = 0.6,
        random_state: RandomStateLike = None,
        n_threads: int | None = None,
        verbose: bool = False,
        warm_start: bool = False,
        callback: Callable[[Any, dict[str, Any]], Any] | None = None,
        checkpoint_path: str | os.PathLike[str] | None = None,
        schedule: str = "sequential",
        backend: str = "local",
        client: Any = None,
        batch_size: int = 100,
        n_sweeps: int = 5,
        prune_every: int = 20_000,
    ) -> None:
        self.n_components = n_components
        self.alpha = alpha
        self.gamma = gamma
        self.prior_count = prior_count
        self.algorithm = algorithm
        self.n_batches = n_batches
        self.max_laps = max_laps
        self.min_laps = min_laps
        self.tol = tol
        self.init = init
        self.init_subsample = init_subsample
        self.moves = moves
        self.birth_start_lap = birth_start_lap
        self.merge_start_lap = merge_start_lap
        self.delete_start_lap = delete_start_lap
        self.max_births_per_lap = max_births_per_lap
        self.max_merges_per_lap = max_merges_per_lap
        self.max_deletes_per_lap = max_deletes_per_lap
        self.move_options = move_options
        self.top_l = top_l
        self.dense_laps = dense_laps
        self.doc_max_iter = doc_max_iter
        self.doc_tol = doc_tol
        self.restarts = restarts
        self.overrelax = overrelax
        self.learning_rate_delay = learning_rate_delay
        self.learning_rate_decay = learning_rate_decay
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose
        self.warm_start = warm_start
        self.callback = callback
        self.checkpoint_path = checkpoint_path
        self.schedule = schedule
        self.backend = backend
        self.client = client
        self.batch_size = batch_size
        self.n_sweeps = n_sweeps
        self.prune_every = prune_every

    _extra_algorithms = (TRUNCATION_FREE,)
    _tf_kind = "hdp"

    def _make_alloc(self):
        if self.algorithm == TRUNCATION_FREE:
            return TruncationFreeHDPAlloc(float(self.alpha), float(self.gamma))
        return HDPTopicAlloc(float(self.alpha), float(self.gamma))

    def _validate_params(self) -> None:
        super()._validate_params()
        self._validate_tf_params()

    def _tf_eta(self) -> float:
        return float(self.prior_count)

    def _tf_alpha(self) -> float:
        return float(self.alpha)


class FiniteTopicModel(_BaseTopicModel):
    __doc__ = (
        r"""Latent Dirichlet allocation (finite topic model) fitted by variational inference.

    Documents :math:`\pi_d\sim\mathrm{Dir}_K(\alpha/K)`, topics
    :math:`\phi_k\sim\mathrm{Dir}(\bar\lambda)` (Hughes & Sudderth 2016, App. C); the objective
    (their eq. 47–49) is the exact ELBO, computed from batch summaries. Its one move keeps the
    number of topics: a *swap* replaces the largest topic and the smallest other one by two
    topics split from the largest, and is accepted only if the objective rises (``moves``;
    :mod:`bnpcore.moves.topic`). It moves a fit out of the local optima where one topic holds
    two true topics and another is empty or redundant.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics K; it may exceed the number of documents (see ``init``).
    alpha : float, default=0.5
        Total document concentration: each of the K topics gets the Dirichlet pseudocount
        ``alpha / K``.
"""
        + _DOC_COMMON
    )

    def __init__(
        self,
        n_components: int = 10,
        *,
        alpha: float = 0.5,
        prior_count: float = 0.1,
        algorithm: str = "memoized",
        n_batches: int | None = None,
        max_laps: int = 100,
        min_laps: int = 2,
        tol: float = 1e-6,
        init: str = "random_docs",
        init_subsample: int = 100_000,
        moves: str | Iterable[str] | None = None,
        birth_start_lap: int = 2,
        merge_start_lap: int = 2,
        delete_start_lap: int = 2,
        max_births_per_lap: int = 1,
        max_merges_per_lap: int = 25,
        max_deletes_per_lap: int = 2,
        move_options: dict[str, Any] | None = None,
        top_l: int | None = None,
        dense_laps: int = 1,
        doc_max_iter: int = 100,
        doc_tol: float = 0.05,
        restarts: bool = True,
        overrelax: float = 2.0,
        learning_rate_delay: float = 1.0,
        learning_rate_decay: float = 0.6,
        random_state: RandomStateLike = None,
        n_threads: int | None = None,
        verbose: bool = False,
        warm_start: bool = False,
        callback: Callable[[Any, dict[str, Any]], Any] | None = None,
        checkpoint_path: str | os.PathLike[str] | None = None,
        schedule: str = "sequential",
        backend: str = "local",
        client: Any = None,
    ) -> None:
        self.n_components = n_components
        self.alpha = alpha
        self.prior_count = prior_count
        self.algorithm = algorithm
        self.n_batches = n_batches
        self.max_laps = max_laps
        self.min_laps = min_laps
        self.tol = tol
        self.init = init
        self.init_subsample = init_subsample
        self.moves = moves
        self.birth_start_lap = birth_start_lap
        self.merge_start_lap = merge_start_lap
        self.delete_start_lap = delete_start_lap
        self.max_births_per_lap = max_births_per_lap
        self.max_merges_per_lap = max_merges_per_lap
        self.max_deletes_per_lap = max_deletes_per_lap
        self.move_options = move_options
        self.top_l = top_l
        self.dense_laps = dense_laps
        self.doc_max_iter = doc_max_iter
        self.doc_tol = doc_tol
        self.restarts = restarts
        self.overrelax = overrelax
        self.learning_rate_delay = learning_rate_delay
        self.learning_rate_decay = learning_rate_decay
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose
        self.warm_start = warm_start
        self.callback = callback
        self.checkpoint_path = checkpoint_path
        self.schedule = schedule
        self.backend = backend
        self.client = client

    def _make_alloc(self) -> LDAAlloc:
        return LDAAlloc(float(self.alpha))


# Persistence by registry (docs/model_format.md): bnpcore.io finds these classes by model-type name.
register_model_type("HDPTopicModel", HDPTopicModel)
register_model_type("FiniteTopicModel", FiniteTopicModel)
