"""DP mixture and finite mixture estimators (scikit-learn style front doors)."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from bnpcore._validation import check_array, check_param
from bnpcore.alloc import DPAlloc, FiniteAlloc
from bnpcore.data.documents import BagOfWordsBatches
from bnpcore.data.sources import ArrayBatches, ListBatches, NpyFile, ReiterableBatches, _check_lazy_2d, is_batch_list, open_npy_rows
from bnpcore.estimators._engine import (
    DOC_CHECKPOINT,
    DOC_CLIENT,
    DOC_GAUSSIAN_PRIORS,
    DOC_LEARNING_RATE,
    DOC_SEED_THREADS,
    VBEstimator,
    is_one_shot,
)
from bnpcore.estimators._truncation_free import TRUNCATION_FREE, TruncationFreeMixin
from bnpcore.exceptions import DataError, ParameterError, ShapeError
from bnpcore.io import register_model_type
from bnpcore.model import Model
from bnpcore.moves._base import SWAP_KINDS
from bnpcore.moves.manager import MoveManager
from bnpcore.moves.swap import MixtureSwapManager
from bnpcore.obs import OBS_KINDS, ObsModel, check_magnitude, check_rows_reachable, data_shift, default_prior

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from bnpcore.estimators._engine import RandomStateLike

__all__ = ["DPMixture", "FiniteMixture"]

_M = TypeVar("_M", bound="_BaseMixture")


def _dense_sample(X0):
    """The initialisation sample as a dense array (a sparse one is cut to a bounded number of
    rows first: at most 2^22 entries, and at least 256 rows)."""
    if hasattr(X0, "tocsr") and hasattr(X0, "nnz"):
        rows = max(min(X0.shape[0], 256), min(X0.shape[0], (1 << 22) // max(int(X0.shape[1]), 1)))
        return np.ascontiguousarray(X0[:rows].toarray(), dtype=np.float64)
    return X0


class _BaseMixture(VBEstimator):
    """Mixtures of i.i.d. rows: the observation model, row data sources, k-means++
    initialisation and row-level inference on top of the generic engine; subclasses pick the
    allocation model (:meth:`_make_alloc`)."""

    _records_feature_names = True

    # fitted attributes (declared for type checkers; set by ``fit``, see the class docstring)
    weights_: np.ndarray
    means_: np.ndarray
    covariances_: np.ndarray
    precisions_: np.ndarray
    precisions_cholesky_: np.ndarray
    coef_: np.ndarray
    counts_: np.ndarray
    weight_concentration_: np.ndarray | tuple[np.ndarray, np.ndarray]
    mean_precision_: np.ndarray
    degrees_of_freedom_: np.ndarray

    def __init__(
        self,
        obs: str = "gauss",
        n_components: int | None = None,
        *,
        gamma: float = 1.0,
        algorithm: str = "auto",
        n_batches: int | None = None,
        max_laps: int = 100,
        min_laps: int = 2,
        tol: float = 1e-6,
        init: str = "kmeans++",
        init_subsample: int = 100_000,
        moves: str | Iterable[str] | None = None,
        birth_start_lap: int = 2,
        merge_start_lap: int = 2,
        delete_start_lap: int = 2,
        max_births_per_lap: int = 3,
        max_merges_per_lap: int = 25,
        max_deletes_per_lap: int = 1,
        move_options: dict[str, Any] | None = None,
        top_l: int | None = None,
        dense_laps: int = 1,
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
        prior_dof: float | None = None,
        prior_mean_precision: float | None = None,
        prior_mean: Any = "data",
        prior_covariance: Any = "data",
        prior_scale: float = 1.0,
        prior_count: Any = None,
        batch_size: int = 100,
        n_sweeps: int = 5,
        prune_every: int = 20_000,
    ) -> None:
        self.obs = obs
        self.n_components = n_components
        self.gamma = gamma
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
        self.prior_dof = prior_dof
        self.prior_mean_precision = prior_mean_precision
        self.prior_mean = prior_mean
        self.prior_covariance = prior_covariance
        self.prior_scale = prior_scale
        self.prior_count = prior_count
        self.batch_size = batch_size
        self.n_sweeps = n_sweeps
        self.prune_every = prune_every

    # ------------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        check_param("obs", self.obs, kind="str", options=(*OBS_KINDS, "ar_gauss"))
        check_param("n_components", self.n_components, kind="int", low=1, low_inclusive=True, allow_none=True)
        check_param("gamma", self.gamma, kind="real", low=0)
        check_param("init", self.init, kind="str", options=("kmeans++", "random_from_data"))
        self._refuse_other_family_moves(nested_cls="DPMixture", finite_cls="FiniteMixture", truncation="DP", units="clusters")
        self._validate_engine_params()
        self._moves_tuple()

    # ------------------------------------------------------------------ building
    def _prior_hyper(self) -> dict:
        return dict(
            prior_dof=self.prior_dof,
            prior_mean_precision=self.prior_mean_precision,
            prior_mean=self.prior_mean,
            prior_covariance=self.prior_covariance,
            prior_scale=self.prior_scale,
            prior_count=self.prior_count,
        )

    #: initial K when ``n_components=None`` and births can grow the model (else 10)
    _auto_n_components = 10

    def _n_components(self) -> int:
        """``n_components`` with None resolved: :attr:`_auto_n_components` where births can grow
        the model (:meth:`_births_grow`), else 10 (moves without births, or a stream)."""
        if self.n_components is not None:
            return int(self.n_components)
        return self._auto_n_components if self._births_grow() else max(self._auto_n_components, 10)

    def _make_moves(self):
        config = self._move_config()
        if not config.kinds:
            return None
        if config.kinds != SWAP_KINDS:
            return MoveManager(config)
        manager = MixtureSwapManager(dataclasses.replace(
            config, start_lap={"swap": int(self.birth_start_lap)}, max_per_lap={"swap": int(self.max_births_per_lap)}))
        return manager

    def _make_obs(self, X0) -> ObsModel:
        X0 = _dense_sample(X0)
        # far-from-origin Gaussian data are fitted centred (bnpcore.obs.data_shift); a prior
        # mean given in the user's coordinates is translated with them
        shift = data_shift(self.obs, X0)
        hyper = self._prior_hyper()
        if shift is not None:
            X0 = X0 - shift
            if not isinstance(hyper["prior_mean"], str):
                hyper["prior_mean"] = np.broadcast_to(np.asarray(hyper["prior_mean"], dtype=np.float64), shift.shape) - shift
        obs_model = ObsModel(self.obs, default_prior(self.obs, X0, **hyper), shift=shift)
        # validate the whole first sample against the model's support (counts, binary...)
        obs_model.core.check_data(X0, "X")
        return obs_model

    def _init_stats(self, model: Model, X0, rng):
        return model.init_stats(_dense_sample(X0), self._n_components(), self.init, rng, n_threads=self.n_threads)

    def _is_one_shot(self, X) -> bool:
        """Only an iterator is consumed once; any other iterable (a gensim-style corpus whose
        ``__iter__`` starts a new pass) is re-read on every lap."""
        if not is_one_shot(X):
            return False
        try:
            return iter(X) is X
        except TypeError:  # pragma: no cover - not iterable at all: the source reports it
            return False

    def _reiterable_source(self, X, n_features):
        """A re-iterable corpus: documents as ``(word_id, count)`` lists (``obs="mult"``: CSR
        batches of whole documents, :class:`~bnpcore.data.documents.BagOfWordsBatches`), or
        2-D batches (re-read on every lap, :class:`~bnpcore.data.sources.ReiterableBatches`)."""
        first = next(iter(X), None)
        if first is None:
            raise ShapeError("`X` is an empty iterable")
        if hasattr(first, "shape") and len(getattr(first, "shape", ())) == 2:
            return ReiterableBatches(X, n_features=n_features, obs=self.obs)
        if self.obs != "mult":
            raise DataError(f"a corpus of (word_id, count) documents needs obs='mult', got obs={self.obs!r}")
        probe = BagOfWordsBatches(X, 1, n_vocab=n_features)
        n_batches = 1 if self._algorithm() == "full" else min(self._n_batches(probe.n_rows), probe.n_rows)
        return BagOfWordsBatches(X, n_batches, n_vocab=n_features if n_features is not None else probe.n_features)

    def _make_source(self, X, seed=None):
        """A batch source over ``X`` (see :mod:`bnpcore.data.sources`).

        In-memory arrays are validated once here; a ``numpy.memmap``, a ``.npy`` path (read by
        explicit row-range reads, :class:`~bnpcore.data.sources.NpyFile`) and a list of batches
        are validated one batch at a time when visited, so data on disk are never copied whole.
        """
        n_features = self.n_features_in_ if self._continuing() else None
        full = self._algorithm() == "full"
        if not isinstance(X, (np.ndarray, str, bytes, os.PathLike, list, tuple)) and is_one_shot(X) and not self._is_one_shot(X):
            return self._reiterable_source(X, n_features)
        if isinstance(X, (str, os.PathLike)):
            X = open_npy_rows(X, name="X")
        if is_batch_list(X):
            if full:
                raise ParameterError(
                    "algorithm='full' needs the data as one array; use algorithm='memoized' (or 'stochastic') "
                    "for a list of batches"
                )
            return ListBatches(X, n_features=n_features, obs=self.obs)
        if isinstance(X, NpyFile) or (isinstance(X, np.ndarray) and (isinstance(X, np.memmap) or isinstance(X.base, np.memmap))):
            _check_lazy_2d(X, "X", n_features)
            n_batches = 1 if full else self._n_batches(X.shape[0])
            if n_batches > X.shape[0]:
                raise ParameterError(f"`n_batches`={n_batches} exceeds the number of rows ({X.shape[0]})")
            return ArrayBatches(X, n_batches)
        X = check_array(X, name="X", n_features=n_features, obs=self.obs, keep_sparse=True)
        check_magnitude(self.obs, X, "X")  # every row, not only the initialisation sample's
        n_batches = 1 if full else self._n_batches(X.shape[0])
        if n_batches > X.shape[0]:
            raise ParameterError(f"`n_batches`={n_batches} exceeds the number of rows ({X.shape[0]})")
        return ArrayBatches(X, n_batches, seed=seed, validated=True)

    def _make_dask_source(self, X, seed, client):
        """Row batches on the Dask workers (:func:`bnpcore.distributed.row_batches_on_dask`):
        a list of ``.npy`` paths (one batch each, read by the workers), a dask array or
        DataFrame (its row chunks), or an in-memory array (split into ``n_batches`` exactly as
        for ``backend="local"``, then scattered once)."""
        from bnpcore.distributed import _is_dask_collection, row_batches_on_dask

        n_features = self.n_features_in_ if self._continuing() else None
        if isinstance(X, (list, tuple)) and X and all(isinstance(x, (str, os.PathLike)) for x in X):
            return row_batches_on_dask(client, list(X), n_features=n_features)
        if _is_dask_collection(X, "array") or _is_dask_collection(X, "dataframe"):
            return row_batches_on_dask(client, X, n_features=n_features)
        return super()._make_dask_source(X, seed, client)

    def _check_batch(self, X, name: str):
        fitted = hasattr(self, "state_")
        Xb = check_array(X, name=name, n_features=self.n_features_in_ if fitted else None, obs=self.obs, keep_sparse=True)
        if fitted and isinstance(Xb, np.ndarray):  # sparse rows were checked by check_sparse_rows
            self.obs_model_.check_data(Xb, name)
        return Xb

    def _batch_source(self, X):
        return ArrayBatches(X, 1, validated=True)

    def _set_fitted(self, model: Model, G) -> None:
        self.weights_ = model.alloc.weights(G)
        pe = self.obs_model_.core.point_estimates(G.N, G.S)
        shift = getattr(self.obs_model_, "shift", None)
        if shift is not None and "means" in pe:  # back to the user's coordinates
            pe = dict(pe, means=pe["means"] + shift)
        if "ar_coefs" in pe:  # auto-regressive regimes: coefficients A_k, no means
            pe = dict(pe, coef=pe["ar_coefs"])
        for name in ("means", "covariances", "coef"):
            if name in pe:
                setattr(self, name + "_", pe[name])
            elif hasattr(self, name + "_"):
                delattr(self, name + "_")
        self._set_precisions()
        self.counts_ = G.N.copy()
        self._set_posterior_parameters(model, G)

    def _set_posterior_parameters(self, model: Model, G) -> None:
        """scikit-learn's ``BayesianGaussianMixture`` names for the posterior parameters:
        ``weight_concentration_`` (DP: the stick parameters ``(1 + N_k, γ + Σ_{l>k} N_l)`` as a
        pair of arrays; finite: the Dirichlet parameters ``γ/K + N_k``), ``mean_precision_``
        (κ_k = κ̄ + N_k) and ``degrees_of_freedom_`` (ν_k = ν̄ + N_k), where the model has them."""
        post = model.alloc.global_step(G)
        self.weight_concentration_ = (post["eta1"], post["eta0"]) if "eta1" in post else post["theta"]
        prior = self.obs_model_.prior
        for name, key in (("mean_precision_", "kappa"), ("degrees_of_freedom_", "nu")):
            if key in prior:
                setattr(self, name, float(prior[key]) + G.N)
            elif hasattr(self, name):
                delattr(self, name)

    def _set_precisions(self) -> None:
        """``precisions_`` = inverse of ``covariances_`` and ``precisions_cholesky_`` (upper
        triangular U with ``precisions_ = U @ U.T``), in scikit-learn's conventions."""
        cov = getattr(self, "covariances_", None)
        if cov is None:
            for name in ("precisions_", "precisions_cholesky_"):
                if hasattr(self, name):
                    delattr(self, name)
            return
        if cov.ndim == 2:  # diagonal
            self.precisions_ = 1.0 / cov
            self.precisions_cholesky_ = 1.0 / np.sqrt(cov)
            return
        eye = np.eye(cov.shape[1])
        chol = np.linalg.cholesky(cov)
        # U = L^{-T} for cov = L L^T, so U U^T = (L L^T)^{-1}
        self.precisions_cholesky_ = np.stack([np.linalg.solve(L, eye).T for L in chol]) if cov.shape[0] else np.empty_like(cov)
        self.precisions_ = self.precisions_cholesky_ @ np.transpose(self.precisions_cholesky_, (0, 2, 1))

    # ----------------------------------------------------------------------- fit
    def fit(self: _M, X: Any, y: Any = None, *, eval_X: Any = None) -> _M:
        """Fit the model to ``X``.

        Parameters
        ----------
        X : array-like, numpy.memmap, path to a ``.npy`` file, list of batches, or iterator of batches
            Training data of shape (n_samples, n_features) (counts for ``obs="mult"``, 0/1 for
            ``obs="bern"``). Data on disk are never copied whole:

            * an in-memory array is validated once and split into ``n_batches`` batches by a
              seeded random assignment of rows;
            * a ``numpy.memmap`` or a ``.npy`` path is split into ``n_batches`` contiguous row
              ranges, each read and validated when visited (a path is read with explicit
              row-range reads, so only the current batch is resident; default priors and the
              initial clusters come from an ``init_subsample`` of rows read in one pass);
            * a list or tuple of 2-D arrays, memmaps or ``.npy`` paths: each element is one batch
              (``n_batches`` is ignored), kept by reference and read when visited;
            * any other iterable (e.g. a generator reading files) is *one-shot*: it is consumed
              once, each batch processed as by :meth:`partial_fit` (local step with the current
              globals, its summaries added to the whole-dataset ones and frozen, exact global
              step), so the fit is one streaming lap; nothing is kept in memory but the
              summaries. Pass a list of paths to get memoized laps over data on disk.

            A non-finite value or a batch with the wrong number of columns raises a
            ``ValueError`` naming the batch; the model is then left in the state it had before
            that batch.
        y : ignored
        eval_X : array-like or None
            Held-out rows, checked before the first lap (errors name ``eval_X``), scored
            with :meth:`score` after every lap; kept in
            ``history_["score"]`` (the way to follow ``algorithm="truncation_free"``, which
            has no objective).

        Returns
        -------
        self
        """
        return super().fit(X, y, eval_X=eval_X)

    # ----------------------------------------------------------------- inference
    def _check_X(self, X):
        self._check_fitted()
        self._check_feature_names(X)
        return self.obs_model_.to_model(self._checked_rows(X, "X"))

    def _checked_rows(self, X, name: str):
        """Rows to score or label, validated for the fitted model (shape, values, support)."""
        X = check_array(X, name=name, n_features=self.n_features_in_, obs=self.obs, keep_sparse=True)
        if isinstance(X, np.ndarray):  # sparse rows were checked by check_sparse_rows
            self.obs_model_.check_data(X, name)
        else:
            check_magnitude(self.obs, X, name)
        return X

    def _check_eval_X(self, eval_X):
        self._checked_rows(eval_X, "eval_X")
        return eval_X

    def predict_proba(self, X) -> np.ndarray:
        r"""Variational responsibilities :math:`r_{nk}` of one local step with the fitted globals.

        :math:`r_{nk}\propto\exp\big(E_q[\ln\pi_k]+E_q[\ln F(x_n\mid\phi_k)]\big)`, normalised
        over the K represented clusters (L-sparse when the model's ``top_l`` is set).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            Rows to assign (sparse only for ``obs`` in ``("mult", "bern")``).

        Returns
        -------
        resp : ndarray of shape (n_samples, K)
            Rows sum to 1; column k is cluster k of ``weights_``.
        """
        X = self._check_X(X)
        model = self._make_model(self.obs_model_)
        out = model.local_step(X, self.summaries_, n_threads=self.n_threads, return_resp=True)
        resp = model.resp_from_output(out, self.summaries_.N.shape[0])
        if self.obs in ("gauss", "diag_gauss", "zero_mean_gauss") and resp.shape[1] > 1:
            # a row the local step could not weigh (every log weight -inf) comes out uniform over
            # its slots: such rows (only they can be) are checked by their log-densities
            even = np.flatnonzero(np.isclose(resp.max(axis=1) * (resp > 0).sum(axis=1), 1.0, rtol=1e-12, atol=0.0))
            if even.size:
                G = self.summaries_
                check_rows_reachable(np.asarray(self.obs_model_.core.log_density(X[even], G.N, G.S)), "X", rows=even)
        return resp

    def top_l_mass(self, X, top_l=(1, 2, 4, 8, 16)) -> np.ndarray:
        r"""Share of each row's dense responsibility that an L-sparse step would keep.

        With the fitted global parameters, the dense responsibilities
        :math:`r_{nk}\propto\exp W_{nk}` of each row are computed and, for each L in ``top_l``,
        the mass of its L largest entries, :math:`m_n(L)=\sum_{k\in\mathrm{top}_L(n)} r_{nk}`.
        Then :math:`1-m_n(L)` is the total-variation distance between the L-sparse and the
        dense responsibilities of row n, and :math:`-\log m_n(L)` is what the L-sparse step
        gives up in that row's ELBO at these global parameters (Hughes & Sudderth 2016 App. A), so
        ``-np.log(m).mean(axis=0)`` is the per-row objective cost of each L. Use it (or
        :func:`bnpcore.plotting.plot_top_l_mass`) to choose ``top_l``. The fitted model's own
        ``top_l`` is ignored; rows are processed in chunks so no ``(n_samples, K)`` array is
        held.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        top_l : int or sequence of int
            Sparsity levels, each ≥ 1 (levels ≥ K keep all the mass).

        Returns
        -------
        ndarray of shape (n_samples, len(top_l))
            :math:`m_n(L)` in (0, 1], one column per level, in the given order.
        """
        def cap(v):
            # Python integers beyond a machine integer are levels ≥ K (all the mass), as the
            # estimators' own top_l: capped before the conversion to an integer array
            return min(v, 1 << 62) if isinstance(v, int) and not isinstance(v, bool) else v

        levels = np.atleast_1d(np.asarray([cap(v) for v in top_l] if isinstance(top_l, (list, tuple)) else cap(top_l)))
        if levels.ndim != 1 or levels.size == 0 or not np.issubdtype(levels.dtype, np.integer) or np.any(levels < 1):
            raise ParameterError(f"`top_l` must be a positive integer or a non-empty sequence of them, got {top_l!r}")
        X = self._check_X(X)
        model = self._make_model(self.obs_model_)
        K = self.summaries_.N.shape[0]
        chunk = max(1, (1 << 22) // max(K, 1))  # ~32 MB of dense responsibilities at a time
        out = np.empty((X.shape[0], levels.size))
        for start in range(0, X.shape[0], chunk):
            Xc = X[start : start + chunk]
            res = model.local_step(Xc, self.summaries_, n_threads=self.n_threads, return_resp=True, top_l=None)
            R = -np.sort(-model.resp_from_output(res, K), axis=1)
            cum = np.cumsum(R, axis=1)
            cum /= cum[:, -1:]  # rows sum to 1 up to round-off; make m_n(K) exactly 1
            out[start : start + chunk] = cum[:, np.minimum(levels, K) - 1]
        return out

    def predict(self, X) -> np.ndarray:
        """Most responsible cluster of each row (argmax of :meth:`predict_proba`).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            Rows to label.

        Returns
        -------
        labels : ndarray of int64, shape (n_samples,)
            Cluster indices in ``range(K)`` (the order of ``weights_``).
        """
        return np.argmax(self.predict_proba(X), axis=1)

    def score_samples(self, X) -> np.ndarray:
        r"""Plug-in log density :math:`\log\sum_k w_k F(x_n\mid\hat\phi_k)` of each row, with
        ``weights_`` and the posterior-mean parameters (``means_``, ``covariances_``).

        For ``obs="mult"``, :math:`F` is the multinomial probability of the row's counts
        including the coefficient :math:`\log(n!/\prod_v x_v!)`, :math:`n=\sum_v x_v` (as
        :func:`scipy.stats.multinomial.logpmf`); the objective ``elbo_`` leaves that constant
        out. For ``obs="bern"`` it is the product of Bernoulli probabilities. It is a normalised
        density; scikit-learn's ``BayesianGaussianMixture.score_samples`` is another quantity,
        the log normaliser of its E-step :math:`\log\sum_k\exp(E_q[\ln\pi_k]+E_q[\ln F(x_n\mid\phi_k)])`
        (``docs/sklearn_mapping.md``).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            Rows to score.

        Returns
        -------
        log_density : ndarray of shape (n_samples,)
            Natural-log density of each row (nats).
        """
        X = self._check_X(X)
        return self._make_model(self.obs_model_).score_samples(X, self.summaries_, n_threads=self.n_threads)

    def score(self, X, y=None) -> float:
        """Mean plug-in log density of the rows of ``X`` (scikit-learn's ``DensityMixin``).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            Rows to score.
        y : ignored
            Present for scikit-learn's API (pipelines, ``GridSearchCV``).

        Returns
        -------
        score : float
            Mean of :meth:`score_samples` (nats per row, the multinomial coefficient included
            for ``obs="mult"``); higher is better.
        """
        return float(np.mean(self.score_samples(X)))

    def fit_predict(self, X, y=None) -> np.ndarray:
        """Fit the model to ``X`` and return the most responsible cluster of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            ``self.fit(X).predict(X)``.
        """
        return self.fit(X).predict(X)

    @property
    def lower_bound_(self) -> float:
        """The final ELBO, under the name scikit-learn's ``BayesianGaussianMixture`` uses
        (alias of ``elbo_``; total nats, not per row)."""
        return self.elbo_

    def sample(self, n_samples: int = 1, random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
        r"""Draw rows from the fitted plug-in mixture :math:`\sum_k w_k F(x\mid\hat\phi_k)`.

        Uses ``weights_`` and the posterior-mean parameters: ``means_`` and ``covariances_``
        (Gaussian models) or the Bernoulli probabilities ``means_`` (``obs="bern"``).
        Multinomial clusters need a number of tokens per row and are not sampled.

        Parameters
        ----------
        n_samples : int, default=1
        random_state : int, numpy Generator or None
            Seed of the draws (independent of the fit's ``random_state``).

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        labels : ndarray of shape (n_samples,)
            The cluster each row was drawn from; rows are grouped by cluster, as in
            scikit-learn.
        """
        from bnpcore._validation import check_param

        self._check_fitted()
        check_param("n_samples", n_samples, kind="int", low=1, low_inclusive=True)
        if self.obs == "mult":
            raise ParameterError("sample() is not available for obs='mult' (a row's number of tokens is not modelled)")
        if self.obs == "ar_gauss":
            raise ParameterError("sample() is not available for obs='ar_gauss' (the regressors x_(t-1) are not modelled)")
        rng = np.random.default_rng(random_state)
        w = np.asarray(self.weights_, dtype=np.float64)
        counts = rng.multinomial(int(n_samples), w / w.sum())
        rows, labels = [], []
        for k, c in enumerate(counts):
            if c == 0:
                continue
            if self.obs == "bern":
                rows.append((rng.random((c, self.means_.shape[1])) < self.means_[k]).astype(np.float64))
            elif self.obs == "diag_gauss":
                rows.append(self.means_[k] + rng.standard_normal((c, self.means_.shape[1])) * np.sqrt(self.covariances_[k]))
            else:  # full covariance; zero_mean_gauss has no means_
                mean = self.means_[k] if self.obs == "gauss" else np.zeros(self.covariances_.shape[1])
                rows.append(rng.multivariate_normal(mean, self.covariances_[k], size=int(c)))
            labels.append(np.full(c, k, dtype=np.int64))
        return np.concatenate(rows), np.concatenate(labels)


_DOC_PARAMS = r"""
    Parameters
    ----------
    obs : {"gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern", "ar_gauss"}, default="gauss"
        Observation model: full-covariance Gaussian (Normal-Wishart prior), diagonal Gaussian
        (Normal-Gamma), zero-mean Gaussian (Wishart), multinomial counts (Dirichlet), binary
        vectors (Beta), or auto-regressive Gaussian regimes (Matrix-Normal-Wishart): rows
        :math:`[x_t, x_{t-1}]` (:func:`bnpcore.obs.ar_rows`), cluster k regressing
        :math:`x_t\sim N(A_k x_{t-1},\Lambda_k^{-1})`; fitted ``coef_`` (K, F, F) and
        ``covariances_`` (no ``means_``). Its k-means++ and births use the likelihood-gap
        divergence of one-row posteriors (a regression has no Bregman divergence).
    n_components : int or None, default=None
        Initial number of clusters K. None means 1 for :class:`DPMixture`, whose default moves
        then grow and prune the clusters (every cluster added by a birth is one the exact ELBO
        asked for; starting from one cluster costs a few laps of births) — 10 where no birth
        can run (``moves`` without ``"birth"``, ``max_births_per_lap=0``, or a stream:
        :meth:`partial_fit` and one-shot iterators run no moves) — and 10 for
        :class:`FiniteMixture`, whose K stays fixed (there it is the model, not a start).
    gamma : float, default=1.0
        Concentration of the allocation prior.
    algorithm : {"auto", "full", "memoized", "stochastic", "truncation_free"}, default="auto"
        Full-dataset coordinate ascent, memoized (exact, batched) or stochastic variational
        inference; for :class:`DPMixture` with ``obs="mult"`` also ``"truncation_free"``, the
        truncation-free stochastic algorithm of Wang & Blei (2012): it starts from zero
        clusters (``n_components``, ``n_batches`` and ``init`` are ignored), samples each
        minibatch of ``batch_size`` rows (integer counts) with a locally collapsed Gibbs
        sampler that may open new clusters and updates the globals with the rate
        :math:`\rho_t=\max(S/n_{\rm seen},S/D)` (``docs/truncation_free.md``).
        ``"auto"`` is ``"memoized"`` for :class:`DPMixture` (the moves' home: on the
        100,000 × 16, 25-cluster benchmark it finds the 25 clusters in 17–19 laps, seeds 0–2,
        where full laps with the same moves need 21 laps and about 1.6× the CPU time) and ``"full"`` for
        :class:`FiniteMixture` (scikit-learn's algorithm, unchanged; pass ``"memoized"`` for
        large data). Memoized learning with one batch *is* the full algorithm, moves included,
        trace for trace, so small data lose nothing.
    n_batches : int or None, default=None
        Number of fixed batches (memoized and stochastic). None chooses it from the number of
        rows n: ``max(1, min(10, n // 5000), ceil(n / 500000))`` — one
        batch below 10,000 rows, ten from 50,000 (ten global updates per pass), batches of at
        most 500,000 rows beyond 5,000,000 (see :func:`bnpcore.estimators._engine.auto_n_batches`).
        Rows of an in-memory array are assigned to batches at random (seeded by
        ``random_state``); a memmap or ``.npy`` file is split into contiguous row ranges; a list
        of batches defines its own batches.
    max_laps : int, default=100
        Maximum number of passes through the data (in addition to previous ones with ``warm_start``).
    min_laps : int, default=2
        Minimum number of laps before convergence is tested, counted over all the model's
        laps: a warm start or a resume from a checkpoint continues the count (so that 3 + 3 laps
        are 6 laps), and a fit continuing a converged model may stop after one lap.
    tol : float, default=1e-6
        Convergence when the relative ELBO change of a lap is at most ``tol`` and no move was
        accepted in that lap.
    init : {"kmeans++", "random_from_data"}, default="kmeans++"
        Initial clusters: Bregman k-means++ with the model's divergence, or random rows.
    init_subsample : int, default=100000
        At most this many rows are used to choose the initial clusters.
    moves : None or subset of ("birth", "merge", "delete") (DP) or of ("swap",) (finite), default=None
        Proposal moves, each accepted only if the exact objective rises; None means all three
        for :class:`DPMixture` with memoized or full laps (what lets the defaults find the
        number of clusters), ``"swap"`` for :class:`FiniteMixture` with memoized or full laps
        (it keeps K: the worst-explained cluster, split by the births' fresh-cluster fit,
        replaces itself and the smallest other clusters; :mod:`bnpcore.moves.swap`), and none
        for ``"stochastic"`` (its ELBO is not exact). ``moves=()`` proposes no change, as
        scikit-learn keeps ``n_components``; but a
        :class:`DPMixture` still drops, after each memoized or full lap, the clusters whose
        expected count has fallen to zero (at most 1e-10 rows) when that does not lower the
        ELBO, so ``weights_`` may have fewer than ``n_components`` entries (a
        :class:`FiniteMixture` keeps all K).
    birth_start_lap : int, default=2
        First lap at which births (``FiniteMixture``: swaps) are tried.
    merge_start_lap : int, default=2
        First lap at which merges are tried.
    delete_start_lap : int, default=2
        First lap at which deletes are tried.
    max_births_per_lap : int, default=3
        Cap on the births evaluated per lap; 0 disables births (``FiniteMixture``: swaps, one
        a lap).
    max_merges_per_lap : int, default=25
        Cap on the merge candidate pairs tracked per lap; 0 disables merges.
    max_deletes_per_lap : int, default=1
        Cap on the deletes evaluated per lap; 0 disables deletes.
    move_options : dict or None, default=None
        Advanced move settings, see ``bnpcore.moves.MoveManager.DEFAULT_OPTIONS`` (e.g.
        ``{"birth_n_fresh": 10, "delete_max_absorb": 10}``); the values each key accepts are
        in ``MoveManager.OPTION_RANGES``. An unknown key or a value out of its range raises
        :class:`~bnpcore.exceptions.ParameterError` before fitting.
    top_l : int or None, default=None
        Keep at most this many clusters per row (L-sparse responsibilities); None is dense.
        Choose it with :meth:`top_l_mass` on a fitted model.
    dense_laps : int, default=1
        With ``top_l``, the first ``dense_laps`` laps after initialisation use dense
        responsibilities. From the initial clusters, many rows' responsibilities are diffuse (on
        image patches at K = 200 the top 4 clusters keep 66 % of a row's mass on average, the top
        64 only 85 %), and truncating them in the first lap sends the fit down a different path;
        after one dense lap the top 4 keep all but 5e-5 of it, and the L-sparse fit then follows
        the dense one (``benches/plot_top_l_mass.py``, ``benches/bench_sparse.py``). Costs one
        dense lap; 0 is L-sparse throughout. The ELBO is monotone from the end of the first
        L-sparse lap on (that lap replaces dense memos by L-sparse ones).
""" + DOC_LEARNING_RATE + DOC_SEED_THREADS + r"""    verbose : bool or int, default=False
        Show a progress bar with the ELBO and the number of clusters (on standard error) when true or a
        positive integer (scikit-learn's levels; every level above 0 shows the same bar).
    warm_start : bool, default=False
        Continue from the fitted state (summaries, random streams, history) on the next ``fit``.
        The observation model and its prior are part of that state: changing ``obs`` or a
        ``prior_*`` argument before continuing is a ``ParameterError`` (so is a ``partial_fit``
        after such a change).
    callback : callable(model, info) or None, default=None
        Called after every lap with a dict ``info`` (lap, elbo, n_components, accepted_moves).
        Returning ``True`` (or ``numpy.True_``) stops the fit cleanly after that lap (like Keras and LightGBM
        callbacks): the model is fitted and saveable, ``converged_`` is False and no
        ``ConvergenceWarning`` is issued; any other return value is ignored.
""" + DOC_CHECKPOINT + r"""    schedule : {"sequential", "parallel"}, default="sequential"
        Visiting order of a memoized lap: each batch with the globals left by the previous one
        (Hughes & Sudderth 2013), or every batch of a lap against the lap's starting globals
        (what a cluster runs; still monotone lap to lap). With ``backend="dask"`` the
        parallel schedule keeps the batch memos on the workers and brings back only G, once per
        lap; the sequential one brings every batch's memo to the driver.
    backend : {"local", "dask"}, default="local"
        Where the local steps run: rayon threads in this process, or the workers of a Dask
        cluster (``docs/distributed.md``). With ``"dask"``, ``X`` may be a list of ``.npy``
        paths the workers read, a ``dask.array.Array`` or a ``dask.dataframe.DataFrame``
        (row chunks are the batches). For the same batches, ``schedule`` and
        ``random_state`` the result equals the local one.
""" + DOC_CLIENT + DOC_GAUSSIAN_PRIORS + r"""    prior_count : float, array, pair or None, default=None
        Dirichlet pseudo-counts of ``"mult"`` (None: 0.1; with ``algorithm="truncation_free"``
        a positive scalar) or Beta pseudo-counts (λ̄₁, λ̄₀) of ``"bern"`` (None: (0.1, 0.1)).
        The data-scaled defaults are described in full at :func:`bnpcore.obs.default_prior`;
        ``"ar_gauss"`` reads only ``prior_dof`` and ``prior_scale``.
    batch_size : int, default=100
        ``algorithm="truncation_free"``: rows per minibatch S.
    n_sweeps : int, default=5
        ``algorithm="truncation_free"``: Gibbs sweeps per minibatch after the sequential
        initial pass (the last sample is used).
    prune_every : int, default=20000
        ``algorithm="truncation_free"``: clusters with fewer than one expected row are removed
        (the rest re-ordered by size) every ``prune_every`` rows, and at least once per pass.

    Attributes
    ----------
    n_components_ : int
        Number of clusters with expected count ≥ 1 (``counts_ >= 1``): the clusters that
        count. It can be smaller than K, the number of clusters the fitted model represents
        (``K = weights_.shape[0]``): a cluster with less than one expected row is kept when
        removing it would lower the ELBO (e.g. a finite mixture, or ``moves=()``). Every
        fitted array, the columns of ``predict_proba`` and the labels of ``predict`` (in
        ``range(K)``) are indexed by the K represented clusters, so they always agree with
        each other; sort ``counts_`` to find the ones that count.
    weights_ : ndarray of shape (K,)
        Posterior-mean mixture weights (renormalised over the K represented clusters), sorted by
        decreasing cluster size for DP mixtures.
    coef_ : ndarray of shape (K, F, F)
        Posterior-mean regression matrices :math:`A_k` (``obs="ar_gauss"`` only).
    means_ : ndarray of shape (K, n_features)
        Posterior means (Gaussian models), word probabilities (``mult``) or Bernoulli
        probabilities (``bern``).
    covariances_ : ndarray of shape (K, n_features, n_features) or (K, n_features)
        Posterior-mean covariances E_q[Σ_k] (Gaussian models).
    precisions_ : ndarray of shape (K, n_features, n_features) or (K, n_features)
        Inverse of ``covariances_`` (Gaussian models), as scikit-learn defines it.
    precisions_cholesky_ : ndarray, same shape as ``precisions_``
        Upper-triangular ``U_k`` with ``precisions_[k] = U_k @ U_k.T`` (full) or
        ``1 / sqrt(covariances_)`` (diagonal), as in scikit-learn.
    counts_ : ndarray of shape (K,)
        Expected number of rows per cluster N_k.
    weight_concentration_ : tuple of two ndarrays of shape (K,), or ndarray of shape (K,)
        Parameters of q(weights), under scikit-learn's name: :class:`DPMixture`, the stick
        posteriors :math:`\mathrm{Beta}(1+N_k,\ \gamma+\sum_{\ell>k}N_\ell)` as the pair
        ``(1 + N_k, γ + Σ_{l>k} N_l)``; :class:`FiniteMixture`, the Dirichlet parameters
        :math:`\gamma/K+N_k`.
    mean_precision_ : ndarray of shape (K,)
        Posterior precision scales of the means :math:`\kappa_k=\bar\kappa+N_k`
        (``obs`` in ``("gauss", "diag_gauss")``), as in scikit-learn.
    degrees_of_freedom_ : ndarray of shape (K,)
        Posterior degrees of freedom :math:`\nu_k=\bar\nu+N_k` of the Wishart (Gamma for
        ``"diag_gauss"``) (Gaussian models), as in scikit-learn.
    elbo_ : float
        Final ELBO (total nats).
    lower_bound_ : float
        Alias of ``elbo_`` (scikit-learn's name).
    feature_names_in_ : ndarray of shape (n_features,)
        Column names, when fitted on a DataFrame whose column names are all strings;
        ``predict``/``score`` then require the same names (``ValueError`` otherwise) and warn on
        data without names, as scikit-learn does.
    history_ : dict of ndarray
        Per lap: ``lap``, ``elbo``, ``n_components``, ``seconds`` (cumulative).
    moves_log_ : list of dict
        One record per evaluated proposal move.
    n_iter_ : int
        Laps run by the last ``fit``.
    converged_ : bool
"""


class DPMixture(TruncationFreeMixin, _BaseMixture):
    __doc__ = (
        r"""Dirichlet-process mixture model fitted by variational inference.

    Stick-breaking prior :math:`u_k\sim\mathrm{Beta}(1,\gamma)`, :math:`\pi_k=u_k\prod_{\ell<k}(1-u_\ell)`,
    with a conjugate exponential-family observation model; mean-field posterior with nested
    truncation at K clusters. The ELBO is computed exactly from summary statistics.
"""
        + _DOC_PARAMS
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from bnpcore import DPMixture
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(-5, 1, (200, 2)), rng.normal(5, 1, (200, 2))])
    >>> model = DPMixture(random_state=0).fit(X)  # from one cluster, memoized, with moves
    >>> model.n_components_
    2
"""
    )

    _auto_n_components = 1

    def _make_alloc(self) -> DPAlloc:
        return DPAlloc(self.gamma)

    _extra_algorithms = (TRUNCATION_FREE,)
    _tf_kind = "dp_mult"

    def _validate_params(self) -> None:
        super()._validate_params()
        self._validate_tf_params()
        if self.algorithm == TRUNCATION_FREE:
            if self.obs != "mult":
                raise ParameterError(f"algorithm='truncation_free' is for obs='mult' (count data), got obs={self.obs!r}")
            if self.prior_count is not None and (np.ndim(self.prior_count) != 0 or not float(self.prior_count) > 0):
                raise ParameterError(f"algorithm='truncation_free' needs a positive scalar `prior_count`, got {self.prior_count!r}")

    def _tf_eta(self) -> float:
        return 0.1 if self.prior_count is None else float(self.prior_count)

    def _auto_algorithm(self) -> str:
        return "memoized"


class FiniteMixture(_BaseMixture):
    __doc__ = (
        r"""Finite Bayesian mixture with a symmetric Dirichlet(γ/K) prior on the weights,
    fitted by variational inference (the finite counterpart of :class:`DPMixture`). Its default
    move, the swap, keeps K while it moves the fit out of local optima where one component holds
    several clusters and others are empty (``moves``; :mod:`bnpcore.moves.swap`).
"""
        + _DOC_PARAMS
    )

    _auto_n_components = 10

    def _make_alloc(self) -> FiniteAlloc:
        return FiniteAlloc(self.gamma)

    def _auto_algorithm(self) -> str:
        return "full"


# Persistence by registry (docs/model_format.md): bnpcore.io finds these classes by model-type name.
register_model_type("DPMixture", DPMixture)
register_model_type("FiniteMixture", FiniteMixture)
