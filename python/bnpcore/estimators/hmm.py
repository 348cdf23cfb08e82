"""The sticky HDP-HMM and the finite HMM (hmmlearn-style front doors)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from bnpcore import _core
from bnpcore._validation import check_array, check_lengths, check_param, is_sequence_list, read_lengths
from bnpcore.data._base import SeqBatch
from bnpcore.data.sequences import SequenceBatches
from bnpcore.estimators._engine import DOC_CHECKPOINT, DOC_CLIENT, DOC_GAUSSIAN_PRIORS, DOC_LEARNING_RATE, DOC_SEED_THREADS, VBEstimator
from bnpcore.exceptions import ParameterError
from bnpcore.hmm import FiniteHMMAlloc, HDPHMMAlloc, HMMModel, init_hmm_stats
from bnpcore.io import register_model_type
from bnpcore.moves.hmm import HMMMoveConfig, HMMMoveManager
from bnpcore.obs import OBS_KINDS, ObsModel, ar_rows, check_magnitude, check_rows_reachable, data_shift, default_prior

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable

    from bnpcore.estimators._engine import RandomStateLike

__all__ = ["HDPHMM", "ConvergenceMonitor", "FiniteHMM"]

_H = TypeVar("_H", bound="_BaseHMM")


class _Sequences(SequenceBatches):
    """Sequence batches whose support check the engine sets (``source._check.check_data``)."""

    @property
    def _check(self):
        return self


@dataclass(frozen=True)
class ConvergenceMonitor:
    """How the last fit of an HMM ended, with the attributes of hmmlearn's ``monitor_``
    (read-only; :attr:`HDPHMM.monitor_` builds it from the fitted attributes on access).

    Parameters
    ----------
    tol : float
        The estimator's ``tol``: a bound on the *relative* ELBO change of a lap (hmmlearn's is
        an absolute log-likelihood gain).
    n_iter : int
        The estimator's ``max_laps``, the most laps a fit runs.
    verbose : bool
        The estimator's ``verbose``.
    history : collections.deque of float
        The ELBO after each lap of the last fit (``history_["elbo"]``'s last ``iter`` values,
        total nats), oldest first.
    iter : int
        Laps run by the last fit (``n_iter_``).
    converged : bool
        ``converged_``: the ELBO met ``tol`` with no move pending. Unlike hmmlearn's, it is
        False when the fit stopped at ``n_iter`` laps without converging.
    """

    tol: float
    n_iter: int
    verbose: bool
    history: deque
    iter: int
    converged: bool


class _BaseHMM(VBEstimator):
    """HMMs over sequences given as hmmlearn's ``(X, lengths)`` or a list of 2-D arrays."""

    _records_feature_names = True

    _alloc_class: type = HDPHMMAlloc

    # fitted attributes (declared for type checkers; set by ``fit``, see the class docstring)
    startprob_: np.ndarray
    transmat_: np.ndarray
    weights_: np.ndarray
    means_: np.ndarray
    covariances_: np.ndarray
    coef_: np.ndarray
    counts_: np.ndarray

    def __init__(
        self,
        obs: str = "gauss",
        n_components: int = 10,
        *,
        gamma: float = 1.0,
        alpha: float = 1.0,
        kappa: float = 0.0,
        start_alpha: float = 1.0,
        algorithm: str = "memoized",
        n_batches: int | None = 1,
        max_laps: int = 100,
        min_laps: int = 2,
        tol: float = 1e-6,
        init: str = "random_blocks",
        init_block_len: int = 20,
        init_subsample: int = 100_000,
        moves: str | Iterable[str] | None = None,
        birth_start_lap: int = 2,
        merge_start_lap: int = 2,
        delete_start_lap: int = 2,
        max_births_per_lap: int = 1,
        max_merges_per_lap: int = 3,
        max_deletes_per_lap: int = 1,
        move_options: dict[str, Any] | None = None,
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
    ) -> None:
        self.obs = obs
        self.n_components = n_components
        self.gamma = gamma
        self.alpha = alpha
        self.kappa = kappa
        self.start_alpha = start_alpha
        self.algorithm = algorithm
        self.n_batches = n_batches
        self.max_laps = max_laps
        self.min_laps = min_laps
        self.tol = tol
        self.init = init
        self.init_block_len = init_block_len
        self.init_subsample = init_subsample
        self.moves = moves
        self.birth_start_lap = birth_start_lap
        self.merge_start_lap = merge_start_lap
        self.delete_start_lap = delete_start_lap
        self.max_births_per_lap = max_births_per_lap
        self.max_merges_per_lap = max_merges_per_lap
        self.max_deletes_per_lap = max_deletes_per_lap
        self.move_options = move_options
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

    # the engine reads these; forward-backward is dense in the states
    top_l = None
    dense_laps = 0
    _move_manager = HMMMoveManager

    # ------------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        check_param("obs", self.obs, kind="str", options=(*OBS_KINDS, "ar_gauss"))
        check_param("n_components", self.n_components, kind="int", low=1, low_inclusive=True)
        for name in ("gamma", "alpha", "start_alpha"):
            check_param(name, getattr(self, name), kind="real", low=0)
        check_param("kappa", self.kappa, kind="real", low=0, low_inclusive=True)
        check_param("init", self.init, kind="str", options=("random_blocks",))
        check_param("init_block_len", self.init_block_len, kind="int", low=1, low_inclusive=True)
        self._refuse_other_family_moves(nested_cls="HDPHMM", finite_cls="FiniteHMM", truncation="HDP-HMM", units="states")
        self._validate_engine_params()
        self._moves_tuple()

    def _make_moves(self):
        kinds = self._moves_tuple()
        if not kinds:
            return None
        config = HMMMoveConfig(
            kinds=kinds,
            start_lap={"birth": self.birth_start_lap, "merge": self.merge_start_lap, "delete": self.delete_start_lap, "swap": self.birth_start_lap},
            max_per_lap={"birth": self.max_births_per_lap, "merge": self.max_merges_per_lap, "delete": self.max_deletes_per_lap,
                         "swap": self.max_births_per_lap},
            options=dict(self.move_options or {}),
            n_threads=self.n_threads,
        )
        manager = HMMMoveManager(config)
        return manager

    def _auto_algorithm(self) -> str:
        return "memoized"

    # ------------------------------------------------------------------ building
    def _make_alloc(self):
        return self._alloc_class(alpha=self.alpha, kappa=self.kappa, gamma=self.gamma, start_alpha=self.start_alpha)

    def _make_model(self, obs_model):
        return HMMModel(self._make_alloc(), obs_model)

    def _make_obs(self, X0) -> ObsModel:
        X0 = X0.X if isinstance(X0, SeqBatch) else X0
        if self.obs == "ar_gauss":
            return ObsModel("ar_gauss", default_prior("ar_gauss", X0, prior_scale=self.prior_scale, prior_dof=self.prior_dof))
        shift = data_shift(self.obs, X0)
        hyper = dict(prior_dof=self.prior_dof, prior_mean_precision=self.prior_mean_precision, prior_mean=self.prior_mean,
                     prior_covariance=self.prior_covariance, prior_scale=self.prior_scale, prior_count=self.prior_count)
        if shift is not None:
            X0 = X0 - shift
            if not isinstance(hyper["prior_mean"], str):
                hyper["prior_mean"] = np.broadcast_to(np.asarray(hyper["prior_mean"], dtype=np.float64), shift.shape) - shift
        obs_model = ObsModel(self.obs, default_prior(self.obs, X0, **hyper), shift=shift)
        obs_model.core.check_data(X0, "X")
        return obs_model

    def _init_stats(self, model, X0, rng):
        return init_hmm_stats(model.obs, X0, int(self.n_components), rng, block_len=int(self.init_block_len))

    def _make_source(self, X, seed=None):
        n_features = self.n_features_in_ if self._continuing() else None
        lengths = getattr(self, "_fit_lengths", None)
        if self.obs == "ar_gauss":  # rows [x_t, x_{t-1}]: twice the user's columns
            X, lengths = ar_rows(X, lengths, n_features=n_features)
            n_features = None if n_features is None else 2 * n_features
        probe = SequenceBatches(X, lengths, 1, n_features=n_features, obs=self.obs)
        if not probe._lazy:  # in memory: every row, not only the initialisation sample's (lazy ones per batch)
            check_magnitude(self.obs, probe.X, "X")
        B = 1 if self._algorithm() == "full" else self._n_batches(probe.n_rows)
        if self.n_batches is not None and self._algorithm() != "full" and probe.n_segments < B:
            raise ParameterError(f"`n_batches`={B} exceeds the number of sequences ({probe.n_segments}): a batch holds whole sequences")
        B = min(B, probe.n_segments)  # the automatic number: at most one batch per sequence
        src = _Sequences(probe.X, probe.lengths, B, n_features=n_features)
        if hasattr(self, "obs_model_"):
            src.check_data = self.obs_model_.check_data
        return src

    def _check_batch(self, X, name: str):
        """The sequences of one :meth:`partial_fit` call as a :class:`SeqBatch` (rows
        ``[x_t, x_{t-1}]`` for ``"ar_gauss"``), checked against the fitted model if any."""
        if not hasattr(self, "_partial_lengths"):
            raise ParameterError(
                f"{type(self).__name__} does not stream one-shot iterators; pass (X, lengths) or a list of sequences, "
                "or call partial_fit(X, lengths) once per batch of sequences"
            )
        fitted = hasattr(self, "state_")
        n_features = self.n_features_in_ if fitted else None
        lengths = self._partial_lengths
        if self.obs == "ar_gauss":
            X, lengths = ar_rows(X, lengths, n_features=n_features)
            n_features = None if n_features is None else 2 * n_features
        batch = SequenceBatches(X, lengths, 1, n_features=n_features, name=name, obs=self.obs).get(0)
        if fitted:
            self.obs_model_.check_data(batch.X, name)
        return batch

    def _batch_source(self, X):
        return _Sequences(X.X, X.lengths, 1)

    def _check_first_batch(self, Xb, name: str) -> None:
        self.obs_model_.check_data(Xb.X, name)

    def _set_fitted(self, model, G) -> None:
        self.startprob_ = model.alloc.startprob(G)
        self.transmat_ = model.alloc.transmat(G)
        self.weights_ = model.alloc.weights(G)
        pe = self.obs_model_.core.point_estimates(G.N, G.S)
        shift = getattr(self.obs_model_, "shift", None)
        if shift is not None and "means" in pe:
            pe = dict(pe, means=pe["means"] + shift)
        if "ar_coefs" in pe:
            pe = dict(pe, coef=pe["ar_coefs"])
            self.n_features_in_ = int(pe["coef"].shape[1])  # the user's columns (rows pair x_t with x_{t-1})
        for name in ("means", "covariances", "coef"):
            if name in pe:
                setattr(self, name + "_", pe[name])
            elif hasattr(self, name + "_"):
                delattr(self, name + "_")
        self.counts_ = np.asarray(G.N, dtype=np.float64).copy()

    @property
    def covars_(self) -> np.ndarray:
        r"""The state covariances as full matrices, shape (K, n_features, n_features), under
        hmmlearn's name: ``covariances_`` (the posterior means :math:`E_q[\Sigma_k]`, the
        point estimates that ``score`` and ``predict`` use) with the variances of
        ``obs="diag_gauss"`` on the diagonals, as hmmlearn's ``covars_`` is full whatever
        ``covariance_type``. A new array on every access (assigning to it is refused). Gaussian
        observation models only (for ``"ar_gauss"`` the noise covariances); an
        ``AttributeError`` otherwise and before ``fit``."""
        cov = getattr(self, "covariances_", None)
        if cov is None:
            if hasattr(self, "obs_model_"):
                raise AttributeError(f"covars_ exists for the Gaussian observation models only, not obs={self.obs_model_.kind!r}")
            raise AttributeError(f"this {type(self).__name__} is not fitted yet: covars_ is set by fit")
        if cov.ndim == 2:  # obs="diag_gauss": (K, D) variances, on the diagonals
            return cov[:, :, None] * np.eye(cov.shape[1])
        return np.array(cov)

    @property
    def n_features(self) -> int:
        """hmmlearn's name of ``n_features_in_``: the number of columns of ``X`` the model was
        fitted on (for ``"ar_gauss"`` the series' own columns); an ``AttributeError`` before
        ``fit``."""
        if not hasattr(self, "n_features_in_"):
            raise AttributeError(f"this {type(self).__name__} is not fitted yet: n_features is set by fit")
        return int(self.n_features_in_)

    @property
    def monitor_(self) -> ConvergenceMonitor:
        """hmmlearn's convergence report of the last fit (``monitor_.converged``,
        ``monitor_.history``, ``monitor_.iter``, ...), a read-only
        :class:`~bnpcore.estimators.hmm.ConvergenceMonitor` built on access from
        ``converged_``, ``n_iter_``, ``history_``, ``tol``, ``max_laps`` and ``verbose`` (so a
        loaded model has it too); an ``AttributeError`` before ``fit``. Unlike hmmlearn's it
        cannot be replaced to change the convergence test (use ``tol`` and ``min_laps``)."""
        if not hasattr(self, "n_iter_"):
            raise AttributeError(f"this {type(self).__name__} is not fitted yet: monitor_ is set by fit")
        elbo = self.history_["elbo"]
        last = elbo[len(elbo) - int(self.n_iter_):]
        return ConvergenceMonitor(
            tol=self.tol, n_iter=self.max_laps, verbose=self.verbose, history=deque(float(v) for v in last),
            iter=int(self.n_iter_), converged=bool(self.converged_),
        )

    # ----------------------------------------------------------------------- fit
    def fit(self: _H, X: Any, lengths: Any = None) -> _H:
        """Fit the model to the sequences ``X``.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features), or list of 2-D arrays
            The rows of all sequences concatenated (hmmlearn's convention), or one array per
            sequence (then ``lengths`` must be None). Sparse X is densified for
            ``obs="mult"``/``"bern"`` (the forward-backward kernels read dense rows; a dense
            copy of X is made once) and refused with a
            :class:`~bnpcore.exceptions.DataError` for the Gaussian and auto-regressive models.
        lengths : array-like or iterator of int, or None
            Length of every sequence (positive, summing to ``len(X)``); None is one sequence.

        Returns
        -------
        self
        """
        self._fit_lengths = read_lengths(lengths)  # a generator is read once
        try:
            return super().fit(X)
        finally:
            self._fit_lengths = None

    def partial_fit(self: _H, X: Any, lengths: Any = None) -> _H:
        r"""Add one batch of new sequences (streaming memoized update).

        Forward-backward of every sequence of the batch with the current global parameters;
        its summaries (state counts, transition counts, emission statistics) are added to the
        whole-dataset summaries and kept as a *frozen* memo: the sequences are not retained and
        never revisited. Then the exact global step: :math:`\hat\theta, \hat u, \hat\omega`
        are recomputed from the summaries, so ``elbo_`` stays the exact objective of every
        sequence seen so far (the ELBO of the summed summaries). The first call initialises
        the model (data-scaled priors, ``n_components`` states from random contiguous blocks)
        from its batch. Each call counts as one lap in ``history_``; moves are not run (use
        :meth:`fit` with ``warm_start=True`` on revisitable data for them). The
        forward-backward runs in this process whatever ``backend``.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features), or list of 2-D arrays
            The rows of the batch's sequences concatenated (hmmlearn's convention), or one
            array per sequence (then ``lengths`` must be None). A sequence must not be split
            across calls: each call's sequences are whole. Sparse X is densified for
            ``obs="mult"``/``"bern"`` and refused for the other models, as in :meth:`fit`.
        lengths : array-like of int or None
            Length of every sequence of the batch (positive, summing to ``len(X)``); None is
            one sequence.

        Returns
        -------
        self
        """
        self._partial_lengths = read_lengths(lengths)
        try:
            return super().partial_fit(X)
        finally:
            del self._partial_lengths

    # ----------------------------------------------------------------- inference
    def _sequences(self, X, lengths) -> SeqBatch:
        self._check_fitted()
        self._check_feature_names(X)
        if self.obs == "ar_gauss":
            Y, lens = ar_rows(X, lengths, n_features=self.n_features_in_)
            return SequenceBatches(Y, lens, 1, n_features=2 * self.n_features_in_, obs=self.obs).get(0)
        if is_sequence_list(X):
            src = SequenceBatches(X, lengths, 1, n_features=self.n_features_in_, obs=self.obs)
        else:
            Xa = check_array(X, name="X", n_features=self.n_features_in_, obs=self.obs)
            lens = np.array([Xa.shape[0]]) if lengths is None else check_lengths(lengths, Xa.shape[0], rows_name="X")
            src = SequenceBatches(Xa, lens, 1, n_features=self.n_features_in_, obs=self.obs)
        batch = src.get(0)
        self.obs_model_.check_data(batch.X, "X")
        return SeqBatch(self.obs_model_.to_model(batch.X), batch.seq_range)

    def _log_density_constant(self, batch: SeqBatch) -> float:
        """Sum over the rows of the emission term the kernels leave out (the multinomial
        coefficient for ``obs="mult"``, :meth:`~bnpcore.obs.ObsModel.log_density_constant`): the
        same for every state, so it shifts the log-likelihoods and not the states or marginals."""
        constant = self.obs_model_.log_density_constant(batch.X)
        return 0.0 if constant is None else float(np.sum(constant))

    def _plugin(self, batch: SeqBatch):
        """Emission log-densities at the point estimates, log start and log transition
        probabilities of the fitted model (hmmlearn's point-estimate semantics)."""
        G = self.summaries_
        logB = np.asarray(self.obs_model_.core.log_density(batch.X, G.N, G.S, n_threads=self.n_threads))
        check_rows_reachable(logB, "X")
        with np.errstate(divide="ignore"):
            return logB, np.log(self.startprob_), np.log(self.transmat_)

    def predict(self, X, lengths=None) -> np.ndarray:
        """Most likely state sequence of every sequence (Viterbi at the point estimates).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features), or list of 2-D arrays
            The rows of all sequences concatenated, or one array per sequence. Sparse X is
            densified for ``obs="mult"``/``"bern"`` and refused for the other models, as in
            :meth:`fit`.
        lengths : array-like of int or None
            Length of every sequence (summing to ``len(X)``); None is one sequence.

        Returns
        -------
        states : ndarray of int64, shape (n_samples,)
            State of every time step, in ``range(K)`` (rows of ``transmat_``).
        """
        return self.decode(X, lengths)[1]

    def _ar_full(self, batch, a):
        """Rows of the auto-regressive model start at the second step of each sequence: the
        first step gets the values of the second (``a`` has one row per modelled step)."""
        if self.obs != "ar_gauss":
            return a
        sr = np.asarray(batch.seq_range, dtype=np.int64)
        first = sr[:-1]
        return np.insert(a, first, a[first], axis=0)

    def decode(self, X: Any, lengths: Any = None, algorithm: str | None = "viterbi") -> tuple[float, np.ndarray]:
        r"""The most likely state path by Viterbi at the point estimates (hmmlearn's ``decode``).

        For ``obs="ar_gauss"`` the path is conditional on each sequence's first step, whose
        state is that of the second.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features), or list of 2-D arrays
            The rows of all sequences concatenated, or one array per sequence. Sparse X is
            densified for ``obs="mult"``/``"bern"`` and refused for the other models, as in
            :meth:`fit`.
        lengths : array-like of int or None
            Length of every sequence (summing to ``len(X)``); None is one sequence.
        algorithm : {"viterbi"} or None, default="viterbi"
            The decoder, as hmmlearn's argument (only Viterbi is offered: hmmlearn's ``"map"``
            path is ``predict_proba(X, lengths).argmax(axis=1)``). None, hmmlearn's default,
            is Viterbi too (the estimator's own ``algorithm`` is the learning algorithm).

        Returns
        -------
        log_prob : float
            Log probability :math:`\log p(x, z^*)` of the best path (summed over sequences);
            for ``obs="mult"`` the emissions are probabilities of the count vectors, with the
            multinomial coefficient (as in :meth:`score`).
        states : ndarray of int64, shape (n_samples,)
            State of every time step.
        """
        if algorithm not in (None, "viterbi"):
            raise ParameterError(f"`algorithm` of decode must be 'viterbi' (the only decoder offered), got {algorithm!r}")
        batch = self._sequences(X, lengths)
        logB, ls, lt = self._plugin(batch)
        states, score = _core.viterbi(logB, batch.seq_range, ls, lt, n_threads=self.n_threads)
        return float(np.sum(score)) + self._log_density_constant(batch), self._ar_full(batch, np.asarray(states, dtype=np.int64))

    def score_samples(self, X: Any, lengths: Any = None) -> tuple[float, np.ndarray]:
        r"""Log-likelihood and posterior state marginals by forward-backward at the point
        estimates (hmmlearn's ``score_samples``).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features), or list of 2-D arrays
            The rows of all sequences concatenated, or one array per sequence. Sparse X is
            densified for ``obs="mult"``/``"bern"`` and refused for the other models, as in
            :meth:`fit`.
        lengths : array-like of int or None
            Length of every sequence (summing to ``len(X)``); None is one sequence.

        Returns
        -------
        log_prob : float
            :math:`\sum_s \log p(x^{(s)})` over the sequences (nats). For ``obs="mult"`` the
            emission of a step is the probability of its count vector, multinomial coefficient
            :math:`\log(n!/\prod_v x_v!)` included (as :func:`scipy.stats.multinomial.logpmf` and
            hmmlearn's ``MultinomialHMM``; the objective ``elbo_`` leaves it out).
        posteriors : ndarray of shape (n_samples, K)
            :math:`p(z_t = k \mid x)` of every time step; rows sum to 1.
        """
        batch = self._sequences(X, lengths)
        logB, ls, lt = self._plugin(batch)
        out = _core.forward_backward(logB, batch.seq_range, ls, lt, return_resp=True, n_threads=self.n_threads)
        return float(out["log_z_sum"]) + self._log_density_constant(batch), self._ar_full(batch, np.asarray(out["resp"]))

    def score(self, X, lengths=None) -> float:
        """Log-likelihood of ``X`` by the forward algorithm at the point estimates.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features), or list of 2-D arrays
            The rows of all sequences concatenated, or one array per sequence. Sparse X is
            densified for ``obs="mult"``/``"bern"`` and refused for the other models, as in
            :meth:`fit`.
        lengths : array-like of int or None
            Length of every sequence (summing to ``len(X)``); None is one sequence.

        Returns
        -------
        log_prob : float
            Total over the sequences (nats), as hmmlearn's ``score``; for ``obs="mult"`` with
            the multinomial coefficient of every step (see :meth:`score_samples`).
        """
        return self.score_samples(X, lengths)[0]

    def predict_proba(self, X, lengths=None) -> np.ndarray:
        r"""Posterior state marginals of every time step (forward-backward at the point estimates).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features), or list of 2-D arrays
            The rows of all sequences concatenated, or one array per sequence. Sparse X is
            densified for ``obs="mult"``/``"bern"`` and refused for the other models, as in
            :meth:`fit`.
        lengths : array-like of int or None
            Length of every sequence (summing to ``len(X)``); None is one sequence.

        Returns
        -------
        posteriors : ndarray of shape (n_samples, K)
            :math:`p(z_t = k \mid x)`; rows sum to 1.
        """
        return self.score_samples(X, lengths)[1]

    def get_stationary_distribution(self) -> np.ndarray:
        r"""The stationary distribution of the fitted chain, as hmmlearn's method.

        The distribution :math:`\pi` over the K states with :math:`\pi^\top P = \pi^\top`
        for :math:`P` = ``transmat_`` and :math:`\sum_k \pi_k = 1` (unique: the
        posterior-mean transition rows are positive), the long-run share of time in each state.

        Returns
        -------
        stationary : ndarray of shape (K,)
            Non-negative, sums to 1; indexed as the rows of ``transmat_``.
        """
        self._check_fitted()
        P = np.asarray(self.transmat_, dtype=np.float64)
        K = P.shape[0]
        # pi (P - I) = 0 with the normalisation as one more equation, by least squares
        A = np.vstack([P.T - np.eye(K), np.ones((1, K))])
        b = np.zeros(K + 1)
        b[-1] = 1.0
        pi = np.clip(np.linalg.lstsq(A, b, rcond=None)[0], 0.0, None)
        return pi / pi.sum()

    def sample(self, n_samples: int = 1, random_state: Any = None, currstate: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw one sequence from the fitted point-estimate HMM (Gaussian and Bernoulli
        observation models).

        Parameters
        ----------
        n_samples : int, default=1
            Number of time steps.
        random_state : int, numpy.random.Generator or None
            Seed of the draw; None draws fresh entropy (not the estimator's ``random_state``,
            unlike hmmlearn: pass a seed for a reproducible draw).
        currstate : int or None, default=None
            State of the first step, in ``range(K)`` (the rows of ``transmat_``), as
            hmmlearn's argument: ``X2, z2 = model.sample(n, currstate=z[-1])`` goes on from
            the last state of a previous draw (``z2[0] == z[-1]``). None draws it from
            ``startprob_``.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
            The observations.
        states : ndarray of int64, shape (n_samples,)
            The hidden states.
        """
        check_param("n_samples", n_samples, kind="int", low=1, low_inclusive=True)
        check_param("currstate", currstate, kind="int", allow_none=True)
        self._check_fitted()
        if self.obs not in ("gauss", "diag_gauss", "zero_mean_gauss", "bern"):  # not mult, ar_gauss
            raise ParameterError(f"sample() is not available for obs={self.obs!r}")
        rng = np.random.default_rng(random_state)
        K = self.transmat_.shape[0]
        if currstate is not None and not 0 <= currstate < K:
            raise ParameterError(f"`currstate` must be a state in range({K}) (the rows of transmat_), got {currstate!r}")
        z = np.empty(int(n_samples), dtype=np.int64)
        z[0] = rng.choice(K, p=self.startprob_) if currstate is None else currstate
        for t in range(1, int(n_samples)):
            z[t] = rng.choice(K, p=self.transmat_[z[t - 1]])
        d = self.n_features_in_
        X = np.empty((int(n_samples), d))
        for k in range(K):
            idx = np.flatnonzero(z == k)
            if idx.size == 0:
                continue
            if self.obs == "bern":
                X[idx] = (rng.random((idx.size, d)) < self.means_[k]).astype(np.float64)
            elif self.obs == "diag_gauss":
                X[idx] = self.means_[k] + rng.standard_normal((idx.size, d)) * np.sqrt(self.covariances_[k])
            else:
                mean = self.means_[k] if self.obs == "gauss" else np.zeros(d)
                X[idx] = rng.multivariate_normal(mean, self.covariances_[k], size=idx.size)
        return X, z


_DOC = r"""
    Parameters
    ----------
    obs : {"gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern", "ar_gauss"}, default="gauss"
        Emission model with its conjugate prior (as for the mixtures). ``"ar_gauss"`` is the
        first-order auto-regressive Gaussian :math:`x_t\mid z_t=k\sim N(A_k x_{t-1},\Lambda_k^{-1})`
        with a Matrix-Normal-Wishart prior (Hughes thesis Eq. 6.3; Fox et al. 2014): each
        sequence's first step is conditioned on (its state is reported as that of the second),
        and the fitted ``coef_`` (K, F, F) holds the posterior-mean :math:`A_k`. Its default
        prior scales with the data (``bnpcore.obs.default_prior``), so rescaling a series
        leaves the coefficients and states unchanged; the model has no intercept, so a series
        far from 0 next to its steps must be centred by the caller.
    n_components : int, default=10
        Initial number of states K (the HDP-HMM keeps states with expected count ≥ 1). Unlike
        hmmlearn's, it is where ``HDPHMM`` starts, not its fitted number of states: the fitted
        arrays, the columns of ``predict_proba`` and the states of ``predict`` are over
        K = ``transmat_.shape[0]`` states (``FiniteHMM``: ``n_components``).
    gamma : float, default=1.0
        Top-level concentration (HDP-HMM only).
    alpha : float, default=1.0
        Transition concentration.
    kappa : float, default=0.0
        Sticky self-transition mass κ ≥ 0 (Fox et al. 2011).
    start_alpha : float, default=1.0
        Concentration of the start distribution.
    algorithm : {"memoized", "full", "stochastic", "auto"}, default="memoized"
        Memoized VI over batches of whole sequences (Hughes et al. 2015), full-dataset
        coordinate ascent, or stochastic VI. ``"auto"`` is ``"memoized"`` for both HMMs (the
        same fit as the default). Moves run with memoized and full laps only.
    n_batches : int or None, default=1
        Batches of whole sequences, balanced by time steps (at most the number of sequences).
        None chooses it from the number of time steps n as for the mixtures,
        ``max(1, min(10, n // 5000), ceil(n / 500000))``
        (:func:`bnpcore.estimators._engine.auto_n_batches`). ``algorithm="full"`` uses one batch.
    max_laps : int, default=100
        Maximum number of passes through the data (in addition to previous ones with ``warm_start``).
    min_laps : int, default=2
        Minimum number of laps before convergence is tested, counted over all the model's
        laps: a warm start or a resume from a checkpoint continues the count (so that 3 + 3 laps
        are 6 laps), and a fit continuing a converged model may stop after one lap.
    tol : float, default=1e-6
        Convergence when the relative ELBO change of a lap is at most ``tol`` and no move was
        accepted in that lap (nor is a birth still to be tried).
    init : {"random_blocks"}, default="random_blocks"
        Random contiguous blocks (Hughes thesis §6.6): state k starts from ``init_block_len``
        consecutive steps of a randomly chosen sequence, with those steps' observation
        summaries and their self-transitions (:func:`bnpcore.hmm.init_hmm_stats`).
    init_block_len : int, default=20
        Length of each initial block, in time steps (a whole sequence when it is shorter).
    init_subsample : int, default=100000
        At most this many time steps, in whole sequences, are used to choose the initial states
        and to scale the default prior: all sequences when they fit, otherwise sequences taken in
        a random order while they fit (the first ``init_subsample`` steps of one random sequence
        when none fits).
    moves : None, () or tuple of {"birth", "merge", "delete"} (HDPHMM) or of {"swap"} (FiniteHMM), default=None
        Proposal moves (Hughes, Stephenson & Sudderth 2015; Hughes thesis §6.5), each accepted
        only if the exact objective rises; None is all three for ``HDPHMM`` and ``"swap"`` for
        ``FiniteHMM`` with memoized or full laps, and none for ``"stochastic"`` (its ELBO is not
        exact). Merges are scored from the merge tables the forward-backward kernel tracks
        during a lap (no extra pass); births, deletes and further merges of the same lap are
        judged by whole-dataset passes from candidate globals. ``"swap"`` keeps the number of
        states: the largest state and the smallest other one are replaced by two fresh states
        fitted to the largest state's time steps; once a swap is rejected none is proposed
        again. See ``docs/hmm.md``.
    birth_start_lap : int, default=2
        First lap at which births (``FiniteHMM``: swaps) are tried.
    merge_start_lap : int, default=2
        First lap at which merges are tried.
    delete_start_lap : int, default=2
        First lap at which deletes are tried.
    max_births_per_lap : int, default=1
        0 disables births (``FiniteHMM``: swaps); any positive value allows the one birth a lap
        proposes (its target is the largest state not yet tried, whose time steps the lap
        collects).
    max_merges_per_lap : int, default=3
        Merge candidates judged per lap (pairs of states, best-ranked first; beyond the one
        scored from the lap's merge tables, each costs ``passes`` whole-dataset passes); 0
        disables merges.
    max_deletes_per_lap : int, default=1
        Delete candidates evaluated per lap (each costs ``passes`` whole-dataset passes); 0
        disables deletes.
    move_options : dict or None, default=None
        Overrides of the move settings: ``passes`` (2: local-step passes per judged
        candidate), ``merge_candidates`` (10: pairs tracked per lap), ``delete_max_size`` (0.1:
        largest share of the time steps a deleted state may hold), ``birth_n_fresh`` (3),
        ``birth_max_rows`` (3000), ``birth_refine_iters`` (20), ``birth_collect_threshold``
        (0.5), ``accept_rtol``; the values each key accepts are in
        ``bnpcore.moves.hmm.HMMMoveManager.OPTION_RANGES``. An unknown key or a value out of
        its range raises :class:`~bnpcore.exceptions.ParameterError` before fitting.
""" + DOC_LEARNING_RATE + DOC_SEED_THREADS + r"""    verbose : bool or int, default=False
        Show a progress bar with the ELBO and the number of states (on standard error) when true or a
        positive integer (scikit-learn's levels; every level above 0 shows the same bar).
    warm_start : bool, default=False
        Continue from the fitted state (summaries, random streams, history) on the next ``fit``.
        The observation model and its prior are part of that state: changing ``obs`` or a
        ``prior_*`` argument before continuing is a ``ParameterError`` (so is a ``partial_fit``
        after such a change).
    callback : callable(model, info) or None, default=None
        Called after every lap with a dict ``info`` (lap, elbo, n_components, accepted_moves).
        Returning ``True`` (or ``numpy.True_``) stops the fit cleanly after that lap: the model is fitted and
        saveable, ``converged_`` is False and no ``ConvergenceWarning`` is issued; any other
        return value is ignored.
""" + DOC_CHECKPOINT + r"""    schedule : {"sequential", "parallel"}, default="sequential"
        Visiting order of a memoized lap: each batch with the globals left by the previous one,
        or every batch of a lap against the lap's starting globals (what a cluster runs; still
        monotone lap to lap), as for :class:`bnpcore.DPMixture`.
    backend : {"local", "dask"}, default="local"
        Where the forward-backward local steps run: rayon threads in this process, or the
        workers of a Dask cluster (``docs/distributed.md``), to which the batches of sequences
        are scattered once; the moves' whole-dataset passes run there too. Needs
        ``n_batches >= 2`` and memoized or stochastic laps. For the same batches, ``schedule``
        and ``random_state`` the result equals the local one.
""" + DOC_CLIENT + DOC_GAUSSIAN_PRIORS + r"""    prior_count : float, array, pair or None, default=None
        Dirichlet pseudo-counts of ``"mult"`` (None: 0.1) or Beta pseudo-counts (λ̄₁, λ̄₀) of
        ``"bern"`` (None: (0.1, 0.1)). The prior is described in full at
        :func:`bnpcore.obs.default_prior`; ``"ar_gauss"`` reads only ``prior_dof`` and
        ``prior_scale``.

    Attributes
    ----------
    n_components_ : int
        States with expected count ≥ 1.
    startprob_ : ndarray of shape (K,)
        Expected start distribution.
    transmat_ : ndarray of shape (K, K)
        Expected transition matrix (rows sum to 1) over the K represented states.
    means_, covariances_ : ndarray
        Posterior-mean emission parameters (Gaussian models; ``means_`` holds word or
        Bernoulli probabilities for ``mult`` / ``bern``). ``covariances_`` has shape
        (K, n_features) for ``"diag_gauss"`` and (K, n_features, n_features) otherwise.
    covars_ : ndarray of shape (K, n_features, n_features)
        hmmlearn's name: ``covariances_`` as full matrices whatever ``obs`` (the variances of
        ``"diag_gauss"`` on the diagonals), the same posterior means :math:`E_q[\Sigma_k]`;
        Gaussian models only (read-only, computed on access).
    coef_ : ndarray of shape (K, n_features, n_features)
        Auto-regressive matrices :math:`A_k` (``obs="ar_gauss"``).
    n_features_in_, n_features : int
        Columns of ``X`` (``n_features`` is hmmlearn's name, read-only).
    elbo_, history_, n_iter_, converged_, moves_log_
        As for :class:`bnpcore.DPMixture`.
    monitor_ : ConvergenceMonitor
        hmmlearn's convergence report (``converged``, ``history``, ``iter``, ``tol``,
        ``n_iter``, ``verbose``), read-only and built from ``converged_``, ``history_`` and
        ``n_iter_`` on access; ``converged`` is ``converged_`` (False when ``max_laps`` ran
        out, unlike hmmlearn's) and ``tol`` is relative.

    Notes
    -----
    ``score``, ``score_samples``, ``decode``, ``predict``, ``predict_proba`` and ``sample``
    use the point estimates ``startprob_``, ``transmat_`` and the posterior-mean emission
    parameters: a hmmlearn ``GaussianHMM`` (``covariance_type="full"``) given ``startprob_``,
    ``transmat_``, ``means_`` and ``covars_`` computes the same numbers. Where this differs
    from hmmlearn on purpose: ``n_components`` is the initial K of ``HDPHMM``; there is no
    ``aic``/``bic`` (the number of states is inferred: compare ``elbo_``, or ``score`` on
    held-out sequences); ``decode`` offers Viterbi only; ``sample`` with
    ``random_state=None`` draws fresh entropy; ``params``/``init_params`` do not exist and
    fitted attributes set by hand before ``fit`` are not a starting point (``warm_start``
    continues a fit); ``monitor_`` is a read-only report whose ``converged`` means converged.

    Examples
    --------
    >>> import bnpcore
    >>> X, lengths, z = bnpcore.datasets.make_sticky_hmm(n_seqs=4, seq_len=300, random_state=0)
    >>> model = bnpcore.HDPHMM(n_components=12, kappa=50.0, random_state=0, max_laps=30).fit(X, lengths)
    >>> states = model.predict(X, lengths)
"""


class HDPHMM(_BaseHMM):
    # the summary's continuation lines are indented as _DOC is, so that inspect.getdoc / help()
    # remove the common indentation and find the numpydoc sections
    __doc__ = (
        """Sticky HDP hidden Markov model fitted by memoized variational inference.

    Sticky HDP-HMM (Hughes, Stephenson & Sudderth 2015; Fox et al. 2011) with hmmlearn's
    ``fit(X, lengths)`` conventions.
"""
        + _DOC
    )
    _alloc_class = HDPHMMAlloc


class FiniteHMM(_BaseHMM):
    __doc__ = (
        "Finite hidden Markov model (symmetric Dirichlet transitions) fitted by variational inference.\n\n"
        "    Its default move, the swap, keeps the number of states: two fresh states fitted to the\n"
        "    largest state's time steps replace it and the smallest other state, accepted only if the\n"
        "    objective rises (``moves``; ``docs/hmm.md``).\n"
        + _DOC
    )
    _alloc_class = FiniteHMMAlloc


register_model_type("HDPHMM", HDPHMM)
register_model_type("FiniteHMM", FiniteHMM)
