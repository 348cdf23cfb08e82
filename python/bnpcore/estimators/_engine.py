"""The generic variational-inference estimator: everything a fit does that no model family
changes (as ``sklearn/mixture/_base.py`` is for scikit-learn).

:class:`VBEstimator` owns ``fit`` (in-memory, on-disk and one-shot data), ``partial_fit``,
warm starts, checkpoints, the progress bar, the per-lap callback, the fitted attributes every
family shares (``summaries_``, ``history_``, ``elbo_``, ``n_components_``, ``moves_log_``,
``n_iter_``, ``converged_``) and save/load. The lap loop, the dense→sparse schedule and the
convergence test live in :mod:`bnpcore.algorithms.loop`; moves in :mod:`bnpcore.moves`. Both
receive frozen configuration objects (:class:`~bnpcore.algorithms.loop.FitConfig`,
:class:`~bnpcore.algorithms.stochastic.StochasticConfig`, :class:`~bnpcore.moves.MoveConfig`)
built here from the constructor parameters, never the estimator.

A model family is a subclass that defines its constructor parameters and supplies the hooks:

``_make_alloc()``
    the allocation model (e.g. :class:`~bnpcore.alloc.DPAlloc`);
``_make_obs(X0)``
    the observation model, with priors scaled from an initial sample ``X0``;
``_make_source(X, seed)`` and ``_check_batch(X, name)``, ``_batch_source(X)``
    batch sources over the data the family accepts (rows, documents, sequences);
``_init_stats(model, X0, rng)``
    summaries of the initial components;
``_set_fitted(model, stats)``
    family-specific fitted attributes (weights, means, ...);
``_validate_params()``
    checks of its own parameters (it should call :meth:`_validate_engine_params`);
``_default_moves()``, ``_move_kinds()``
    the moves used when ``moves=None`` and those ``moves`` accepts (by default: birth, merge and
    delete for a nested allocation, the swap for a finite one; with full or memoized learning);
``_auto_algorithm()``
    the algorithm ``algorithm="auto"`` stands for (``"memoized"`` unless overridden);
``_move_manager``
    the class of its move manager (:class:`~bnpcore.moves.MoveManager` unless overridden), whose
    option table validates ``move_options``.

The parameters the engine reads (subclasses take them in ``__init__`` under these names):
``algorithm``, ``n_batches``, ``max_laps``, ``min_laps``, ``tol``, ``init_subsample``,
``moves``, ``{birth,merge,delete}_start_lap``, ``max_{births,merges,deletes}_per_lap``,
``move_options``, ``top_l``, ``dense_laps``, ``learning_rate_delay``, ``learning_rate_decay``,
``random_state``, ``n_threads``, ``verbose``, ``warm_start``, ``callback`` and
``checkpoint_path``; and, when the family has them, ``schedule`` (``"sequential"`` or
``"parallel"``), ``backend`` (``"local"`` or ``"dask"``) and ``client``. A family that runs on
Dask supplies ``_make_dask_source(X, seed, client)`` (see :mod:`bnpcore.distributed`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any, TypeVar, Union

import numpy as np
from bnpcore._validation import check_not_lazy, check_param, check_random_state, same_file
from bnpcore.algorithms._base import FitState, is_remote
from bnpcore.algorithms.loop import ALGORITHMS, FitConfig, lap_top_l, run_laps, warn_not_converged
from bnpcore.algorithms.memoized import stream_batch
from bnpcore.algorithms.stochastic import StochasticConfig
from bnpcore.estimators._base import BaseEstimator, _feature_names
from bnpcore.exceptions import NotFittedError, ParameterError, ShapeError
from bnpcore.model import Model
from bnpcore.moves._base import SWAP_KINDS
from bnpcore.moves.manager import MOVE_KINDS, MoveConfig, MoveManager

if TYPE_CHECKING:
    from bnpcore.obs import ObsModel
    from bnpcore.stats import SuffStats

__all__ = ["VBEstimator", "auto_n_batches", "is_one_shot"]

#: ``n_batches=None``: about this many rows per batch ...
AUTO_ROWS_PER_BATCH = 5_000
#: ... at most this many batches ...
AUTO_MAX_BATCHES = 10
#: ... unless batches would then hold more rows than this
AUTO_MAX_ROWS_PER_BATCH = 500_000


#: numpydoc entries of the engine's parameters, the same in every family's estimator docstring
DOC_LEARNING_RATE = """    learning_rate_delay : float, default=1.0
        ``algorithm="stochastic"``: the delay of the learning rate ρ_t = (t + delay)^(−decay),
        t = 1, 2, ... counting batch steps; at least 0.
    learning_rate_decay : float, default=0.6
        ``algorithm="stochastic"``: the decay of that rate, in (0.5, 1] (Robbins–Monro).
"""
DOC_SEED_THREADS = """    random_state : None, int, numpy.random.SeedSequence, numpy.random.Generator or numpy.random.RandomState, default=None
        Seed of every random choice (initialisation, batch order, moves). None draws fresh
        entropy; a Generator or RandomState is advanced by one draw that seeds the fit.
    n_threads : int or None, default=None
        Threads of the Rust kernels (None: ``BNPCORE_NUM_THREADS`` or all cores), at most
        ``max(64, 4 × cores)`` (more are capped; above 65536 refused): every call of ``fit``
        and ``partial_fit`` (local steps, objective terms, move candidates) runs on at most
        this many. Results do not depend on it.
"""
DOC_CHECKPOINT = """    checkpoint_path : str or None, default=None
        Write a checkpoint there after every lap and when the fit ends, atomically (temporary
        file + rename). To resume a killed run: ``m = bnpcore.load(path)``; if
        ``m.converged_`` the run had finished, else ``m.set_params(warm_start=True,
        max_laps=remaining); m.fit(X)`` with ``remaining = max_laps − m.n_iter_`` reproduces
        the uninterrupted run exactly. A path naming a data file of the fit (``X`` or
        ``eval_X`` given as a path, a list of paths or a memory-mapped array) is a
        ``ParameterError``.
"""
DOC_CLIENT = """    client : dask.distributed.Client, str or None, default=None
        The Dask client (or scheduler address) of ``backend="dask"`` (unused with
        ``backend="local"``, so that ``backend`` alone switches); None starts a
        ``LocalCluster`` for the fit and closes it afterwards. Not saved in model files, and a
        ``Client`` is not pickled either (an unpickled estimator has ``client=None``);
        :func:`sklearn.base.clone` and :func:`copy.deepcopy` share the same ``Client``.
"""
#: the Gaussian observation models' prior entries (mixtures and HMMs)
DOC_GAUSSIAN_PRIORS = """    prior_dof : float or None, default=None
        Degrees of freedom ν̄ of the Wishart (``"gauss"``, ``"zero_mean_gauss"``, above
        n_features − 1), Gamma (``"diag_gauss"``) or Matrix-Normal-Wishart (``"ar_gauss"``)
        prior; None: n_features + 2, 3 for ``"diag_gauss"``.
    prior_mean_precision : float or None, default=None
        κ̄, the precision scale of the prior mean (``"gauss"``, ``"diag_gauss"``); None: 1e-4.
    prior_mean : "data", float or array of shape (n_features,), default="data"
        m̄, the prior mean (``"gauss"``, ``"diag_gauss"``), in the data's coordinates; "data"
        is the mean of the initialisation sample.
    prior_covariance : "data", "eye" or array, default="data"
        E₀, the prior expected covariance before ``prior_scale`` (``"gauss"``,
        ``"diag_gauss"``, ``"zero_mean_gauss"``): the empirical covariance (zero-mean: the
        second moment) of the initialisation sample plus a small floor, the identity, or the
        given matrix (variances for ``"diag_gauss"``).
    prior_scale : float, default=1.0
        Multiplies E₀ (Gaussian models) or the innovation covariance scale of ``"ar_gauss"``.
"""


def auto_n_batches(n_rows: int) -> int:
    r"""The number of batches ``n_batches=None`` gives ``n_rows`` rows:
    :math:`\max(1, \min(10, \lfloor n/5000\rfloor), \lceil n/500000\rceil)`.

    One batch (a full-dataset lap) below 10,000 rows, where a lap costs little and every
    global step sees all the data; ten batches from 50,000 rows, so the global parameters are
    updated ten times per pass (memoized laps converge in fewer passes than full ones) while
    each batch still holds enough rows for the moves' per-batch summaries; beyond 5,000,000
    rows, batches of at most 500,000 rows bound the memory of a batch read from disk. The
    number of laps to convergence hardly depends on the exact number (4, 10 or 20 batches on
    the 100,000 × 16, 25-cluster benchmark, seed 0: 19, 18 and 20 laps, the same 25 clusters).
    """
    n = int(n_rows)
    return int(max(1, min(AUTO_MAX_BATCHES, n // AUTO_ROWS_PER_BATCH), -(-n // AUTO_MAX_ROWS_PER_BATCH)))


@contextlib.contextmanager
def caller_threads(n_threads):
    """Make ``n_threads`` the thread count of every Rust call this Python thread makes without
    its own (objective terms, move candidates, tables of the global parameters) for the
    duration of the block; None leaves ``BNPCORE_NUM_THREADS`` or all cores. Per Python
    thread, so concurrent fits in several threads keep their own counts."""
    from bnpcore import _core

    previous = _core._set_caller_threads(0 if n_threads is None else int(n_threads))
    try:
        yield
    finally:
        _core._set_caller_threads(previous)


def callback_stops(value) -> bool:
    """Whether a ``callback``'s return value asks to stop the fit: ``True``, also numpy's
    (``return delta < 1e-3`` on numpy floats gives ``np.True_``); truthy non-bools do not stop."""
    return isinstance(value, (bool, np.bool_)) and bool(value)


def _seed_int(seq: np.random.SeedSequence) -> int:
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))


def is_one_shot(X) -> bool:
    """An iterable that is not an array, a path or a list of batches (a generator, an iterator
    or any other iterable) is consumed once as a stream of batches."""
    if isinstance(X, (np.ndarray, str, bytes, os.PathLike, list, tuple)) or hasattr(X, "__array__"):
        return False
    if hasattr(X, "toarray") and hasattr(X, "nnz"):  # scipy.sparse
        return False
    try:
        iter(X)
    except TypeError:
        return False
    return True


def _data_files(X) -> list:
    """The files ``X`` reads: a path, the paths of a list of batches, a memory-mapped array."""
    files = []
    for x in X if isinstance(X, (list, tuple)) else [X]:
        if isinstance(x, (str, os.PathLike)):
            files.append(os.fspath(x))
        elif isinstance(x, np.memmap) and x.filename is not None:
            files.append(x.filename)
    return files


_E = TypeVar("_E", bound="VBEstimator")

#: what ``random_state`` accepts (:func:`bnpcore._validation.check_random_state`)
RandomStateLike = Union[int, np.random.Generator, np.random.RandomState, np.random.SeedSequence, None]


class VBEstimator(BaseEstimator):
    """Base class of the variational estimators; knows no model family (module docstring)."""

    # fitted attributes every family sets (declared for type checkers; set by ``fit``)
    n_components_: int
    n_features_in_: int
    feature_names_in_: np.ndarray
    elbo_: float
    history_: dict[str, np.ndarray]
    moves_log_: list[dict[str, Any]]
    n_iter_: int
    converged_: bool
    summaries_: SuffStats
    obs_model_: ObsModel
    state_: FitState
    moves_manager_: Any

    #: whether ``fit`` / ``partial_fit`` record a DataFrame's string column names as
    #: ``feature_names_in_`` (the families whose inference checks them: mixtures, HMMs)
    _records_feature_names = False

    # ------------------------------------------------------------- family hooks
    def _make_alloc(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _make_obs(self, X0):  # pragma: no cover - abstract
        raise NotImplementedError

    def _make_source(self, X, seed=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_batch(self, X, name: str):  # pragma: no cover - abstract
        raise NotImplementedError

    def _batch_source(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def _init_stats(self, model, X0, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_fitted(self, model, stats) -> None:
        """Family-specific fitted attributes; none by default."""

    def _default_moves(self) -> tuple:
        """The moves of ``moves=None``: every kind of :meth:`_move_kinds` with full or memoized
        learning (birth, merge and delete of the nested models, the swap of the finite ones),
        none for stochastic learning, whose objective is not exact."""
        return self._move_kinds() if self._algorithm() in ("full", "memoized") else ()

    def _auto_algorithm(self) -> str:
        return "memoized"

    #: the move manager of the family: its ``OPTION_RANGES`` validate ``move_options``
    #: (:meth:`~bnpcore.moves._base.MoveOptions.check_options`)
    _move_manager = MoveManager

    #: algorithms a family adds to :data:`~bnpcore.algorithms.loop.ALGORITHMS` (e.g.
    #: ``"truncation_free"``, :mod:`bnpcore.estimators._truncation_free`)
    _extra_algorithms: tuple = ()

    def _algorithm(self) -> str:
        """``algorithm`` with ``"auto"`` resolved (:meth:`_auto_algorithm`)."""
        return self._auto_algorithm() if self.algorithm == "auto" else self.algorithm

    def _n_batches(self, n_rows: int) -> int:
        """``n_batches`` with None resolved from the number of rows (:func:`auto_n_batches`)."""
        return auto_n_batches(n_rows) if self.n_batches is None else int(self.n_batches)

    def _validate_params(self) -> None:
        self._validate_engine_params()

    def _make_model(self, obs_model) -> Model:
        return Model(self._make_alloc(), obs_model, top_l=self.top_l)

    def _is_one_shot(self, X) -> bool:
        """Whether ``fit`` consumes ``X`` once as a stream of batches (:func:`is_one_shot`;
        a family whose data may be re-iterable corpora narrows it)."""
        return is_one_shot(X)

    #: whether ``max_laps=None`` (a family's own default, :meth:`_max_laps`) is allowed
    _max_laps_auto = False

    def _max_laps(self) -> int:
        """The lap limit of a fit (``max_laps``; a family with ``_max_laps_auto`` resolves None)."""
        return int(self.max_laps)

    # --------------------------------------------------------------- validation
    def _validate_engine_params(self) -> None:
        check_param("algorithm", self.algorithm, kind="str", options=(*ALGORITHMS, *self._extra_algorithms, "auto"))
        check_param("n_batches", self.n_batches, kind="int", low=1, low_inclusive=True, allow_none=True)
        check_param("max_laps", self.max_laps, kind="int", low=1, low_inclusive=True, allow_none=self._max_laps_auto)
        check_param("min_laps", self.min_laps, kind="int", low=1, low_inclusive=True)
        check_param("tol", self.tol, kind="real", low=0, low_inclusive=True)
        check_param("init_subsample", self.init_subsample, kind="int", low=1, low_inclusive=True)
        check_param("learning_rate_delay", self.learning_rate_delay, kind="real", low=0, low_inclusive=True)
        check_param("learning_rate_decay", self.learning_rate_decay, kind="real", low=0.5, high=1.0)
        check_param("top_l", self.top_l, kind="int", low=1, low_inclusive=True, allow_none=True)
        check_param("dense_laps", self.dense_laps, kind="int", low=0, low_inclusive=True)
        # the kernels run on at most _core.max_num_threads() threads (results never depend on the
        # count); absurd requests are refused rather than capped silently
        check_param("n_threads", self.n_threads, kind="int", low=1, low_inclusive=True, high=1 << 16, allow_none=True)
        # a bool, or an int as in scikit-learn (0: silent, any positive level: the progress bar);
        # not anything with a truth value ("False" would show the bar)
        if not isinstance(self.verbose, (bool, np.bool_)):
            check_param("verbose", self.verbose, kind="int", low=0, low_inclusive=True)
        if self.callback is not None and not callable(self.callback):
            raise ParameterError(f"`callback` must be callable or None, got {self.callback!r}")
        for name in ("birth_start_lap", "merge_start_lap", "delete_start_lap"):
            check_param(name, getattr(self, name), kind="int", low=1, low_inclusive=True)
        for name in ("max_births_per_lap", "max_merges_per_lap", "max_deletes_per_lap"):
            check_param(name, getattr(self, name), kind="int", low=0, low_inclusive=True)
        self._move_manager.check_options(self.move_options)
        if self._moves_tuple() and self._algorithm() == "stochastic":
            raise ParameterError("`moves` cannot be used with algorithm='stochastic' (its ELBO is not exact)")
        from bnpcore.algorithms.executor import SCHEDULES
        from bnpcore.distributed import BACKENDS

        check_param("schedule", self._schedule(), kind="str", options=SCHEDULES)
        check_param("backend", self._backend(), kind="str", options=BACKENDS)
        client = getattr(self, "client", None)
        if client is not None and not isinstance(client, str) and not hasattr(client, "submit"):
            raise ParameterError(f"`client` must be a dask.distributed.Client, a scheduler address or None, got {client!r}")
        if self._backend() == "dask" and self._algorithm() == "full":
            raise ParameterError("backend='dask' distributes batches: use algorithm='memoized' (or 'stochastic') with n_batches >= 2")

    def _schedule(self) -> str:
        return getattr(self, "schedule", "sequential")

    def _backend(self) -> str:
        return getattr(self, "backend", "local")

    def _make_dask_source(self, X, seed, client):
        """Batches on the Dask workers. By default the family's own in-memory source is built
        (same batches as ``backend="local"``) and its batches are scattered once; families
        whose data the workers can read themselves override this (see
        :func:`bnpcore.distributed.row_batches_on_dask`)."""
        from bnpcore.distributed import row_batches_on_dask

        local = self._make_source(X, seed)
        if len(local) < 2:
            raise ParameterError("backend='dask' needs at least 2 batches: set n_batches >= 2")
        return row_batches_on_dask(client, None, local_source=local)

    def _move_kinds(self) -> tuple:
        """The move kinds this estimator accepts in ``moves``, in the order they are reported:
        birth, merge and delete for a nested allocation, the fixed-K swap for a finite one."""
        return tuple(MOVE_KINDS) if self._make_alloc().nested else SWAP_KINDS

    def _refuse_other_family_moves(self, *, nested_cls: str, finite_cls: str, truncation: str, units: str) -> None:
        """Refuse, in ``moves``, the kinds of the other estimator of the family, naming it: the
        nested model's birth, merge and delete (they change K; ``truncation`` names its nested
        truncation) or the finite model's fixed-K ``"swap"`` (``units``: what K counts)."""
        asked = self._asked_moves() if self.moves is not None else ()
        if asked is None:
            return  # not a collection: _moves_tuple says so
        if self._make_alloc().nested:
            if any(m in SWAP_KINDS for m in asked):
                raise ParameterError(f"`moves`: 'swap' keeps the number of {units} fixed and belongs to {finite_cls}; "
                                     f"{nested_cls} has birth, merge and delete")
        elif any(m in MOVE_KINDS for m in asked):
            raise ParameterError(f"`moves`: birth, merge and delete need the nested {truncation} truncation (use {nested_cls}); "
                                 f"{finite_cls} has the fixed-K move 'swap'")

    def _asked_moves(self) -> tuple | None:
        """``moves`` as given (not None), as a tuple: a string is one kind; None when it is not
        a collection."""
        if isinstance(self.moves, str):
            return (self.moves,)
        try:
            return tuple(self.moves)
        except TypeError:
            return None

    def _moves_tuple(self) -> tuple:
        if self.moves is None:
            return self._default_moves()
        kinds = self._move_kinds()
        moves = self._asked_moves()
        bad = [self.moves] if moves is None else [m for m in moves if m not in kinds]
        if bad:
            raise ParameterError(f"`moves` must be a subset of {kinds}, got {self.moves!r}")
        return tuple(m for m in kinds if m in moves)

    # ------------------------------------------------------------ configuration
    def _fit_config(self) -> FitConfig:
        return FitConfig(
            algorithm=self._algorithm(),
            max_laps=self._max_laps(),
            min_laps=int(self.min_laps),
            tol=float(self.tol),
            top_l=self.top_l,
            dense_laps=int(self.dense_laps),
            n_threads=self.n_threads,
            stochastic=StochasticConfig(delay=float(self.learning_rate_delay), decay=float(self.learning_rate_decay)),
            name=type(self).__name__,
            schedule=self._schedule(),
            overrelax=self._overrelax(),
        )

    def _overrelax(self) -> float:
        """The largest over-relaxation factor of the lap loop (1: none; topic models override)."""
        return 1.0

    def _move_config(self) -> MoveConfig:
        return MoveConfig(
            kinds=self._moves_tuple(),
            start_lap={"birth": self.birth_start_lap, "merge": self.merge_start_lap, "delete": self.delete_start_lap},
            max_per_lap={"birth": self.max_births_per_lap, "merge": self.max_merges_per_lap, "delete": self.max_deletes_per_lap},
            options=dict(self.move_options or {}),
            n_threads=self.n_threads,
        )

    def _make_moves(self):
        config = self._move_config()
        return MoveManager(config) if config.kinds else None

    def _lap_top_l(self):
        """The L of the next lap's local steps (the dense→sparse schedule of the lap loop)."""
        return lap_top_l(self._fit_config(), getattr(self, "state_", None))

    # ---------------------------------------------------------------- the state
    def _continuing(self) -> bool:
        return bool(self.warm_start) and hasattr(self, "state_")

    def _obs_param_values(self) -> dict:
        """The constructor arguments that build the observation model and its prior (``obs``
        and ``prior_*``), as they are now."""
        return {k: v for k, v in self.get_params(deep=False).items() if k == "obs" or k.startswith("prior_")}

    def _check_obs_params_unchanged(self) -> None:
        """A warm start or a further ``partial_fit`` continues the fitted observation model
        (its prior is part of the fit state): refuse ``obs``/``prior_*`` arguments changed since
        that model was built instead of silently keeping the old ones."""
        old = getattr(self, "_obs_params_", None)
        if old is None:
            return
        now = self._obs_param_values()
        for k, before in old.items():
            after = now.get(k)
            if isinstance(before, np.ndarray) or isinstance(after, np.ndarray):
                try:
                    same = np.array_equal(np.asarray(before), np.asarray(after))
                except (TypeError, ValueError):
                    same = False
            else:
                same = before == after
            if not same:
                raise ParameterError(
                    f"`{k}` changed from {before!r} to {after!r} since the fit that warm_start / partial_fit continues; "
                    "the fitted observation model and its prior stay those of that fit, so set warm_start=False "
                    "(or use a new estimator) to fit with the new value"
                )

    def _seeds(self):
        """Child seeds (init, batch order, moves, batch assignment) of ``random_state``."""
        return check_random_state(self.random_state).spawn(4)

    @property
    def _n_rows(self) -> int:
        st = getattr(self, "state_", None)
        return 0 if st is None else int(st.n_rows)

    @_n_rows.setter
    def _n_rows(self, value) -> None:
        self.state_.n_rows = int(value)

    def _initialize(self, source, seeds=None, *, revisit: bool = True) -> None:
        """Observation model, initial summaries and a fresh :class:`FitState`."""
        s_init, s_order, s_moves, s_batch = seeds if seeds is not None else self._seeds()
        rng_init = np.random.default_rng(s_init)
        X0 = source.sample_for_init(self.init_subsample, rng_init)
        self.obs_model_ = self._make_obs(X0)
        self._obs_params_ = self._obs_param_values()
        model = self._make_model(self.obs_model_)
        prep = getattr(model, "prepare", None)
        # a stream (partial_fit, a one-shot iterator) runs no moves: the initial K cannot rely on births
        self._init_streaming = not revisit
        try:
            init_stats = self._init_stats(model, X0 if prep is None else prep(X0), rng_init)
        finally:
            del self._init_streaming
        self.state_ = FitState(
            stats=init_stats,
            memos=[None] * len(source) if revisit else [],
            next_uid=int(init_stats.K),
            rng_order=np.random.default_rng(s_order),
            rng_moves=np.random.default_rng(s_moves),
            batch_seed=_seed_int(s_batch),
            n_rows=int(source.n_rows) if revisit else 0,
        )
        self.n_features_in_ = source.n_features

    def _births_grow(self) -> bool:
        """Whether births can grow the model from its initial K in this fit: birth among the
        moves and allowed per lap, and not a stream (whose batches run no moves)."""
        if getattr(self, "_init_streaming", False):
            return False
        return "birth" in self._moves_tuple() and int(getattr(self, "max_births_per_lap", 1)) > 0

    # ---------------------------------------------------------------------- fit
    def fit(self: _E, X: Any, y: Any = None, *, eval_X: Any = None) -> _E:
        """Fit the model to ``X`` (see the family's documentation for the accepted data).

        ``eval_X`` (held-out data, optional) is checked before the first lap (errors name
        ``eval_X``), scored with :meth:`score` after every lap and the values are kept in
        ``history_["score"]``.

        Returns
        -------
        self
        """
        check_not_lazy(X)
        names = _feature_names(X)
        self._validate_params()
        self._check_checkpoint_path(X, eval_X)
        if self._continuing():
            self._check_obs_params_unchanged()
        with caller_threads(self.n_threads):
            if self._algorithm() == "truncation_free":
                self._fit_truncation_free(X, eval_X)
            else:
                if self._continuing() and getattr(self.state_, "truncation_free", None):
                    raise ParameterError(f"warm_start cannot continue a truncation-free fit with algorithm={self.algorithm!r}")
                self._eval_X = eval_X
                try:
                    self._fit_dispatch(X)
                finally:
                    self._eval_X = None
        if self._records_feature_names:
            self._set_feature_names(names)
        return self

    def _check_checkpoint_path(self, X, eval_X) -> None:
        """Refuse a ``checkpoint_path`` naming a file the fit reads: the first checkpoint would
        replace the user's data."""
        if self.checkpoint_path is None:
            return
        for name, data in (("X", X), ("eval_X", eval_X)):
            for f in _data_files(data):
                if same_file(self.checkpoint_path, f):
                    raise ParameterError(
                        f"`checkpoint_path` {os.fspath(self.checkpoint_path)!r} is the file {f!r} of `{name}`: the checkpoints would "
                        "overwrite the data; give another path"
                    )

    def _fit_dispatch(self, X):
        if self._is_one_shot(X):
            if self._backend() == "dask":
                raise ParameterError("backend='dask' needs data the workers can read again: a list of .npy paths or a dask array")
            return self._fit_stream(X)
        if self._backend() == "dask":
            from bnpcore.distributed import dask_session

            with dask_session(getattr(self, "client", None), verbose=bool(self.verbose)) as client:
                return self._fit_source(X, client)
        return self._fit_source(X, None)

    def _fit_source(self, X, client):
        """``fit`` on revisitable data, in this process (``client`` None) or on Dask."""
        continuing = self._continuing()
        seeds = None if continuing else self._seeds()
        seed = self.state_.batch_seed if continuing else _seed_int(seeds[3])
        source = self._make_source(X, seed) if client is None else self._make_dask_source(X, seed, client)
        if not continuing:
            self._initialize(source, seeds)
        elif not self.state_.memos and self._algorithm() != "stochastic":
            # fitted by partial_fit / a stream only: the new batches join the frozen memos
            self.state_.memos = [None] * len(source)
            self.state_.n_rows += source.n_rows
        elif not self.state_.memos:
            raise ParameterError(
                "warm_start of a model fitted by partial_fit or a one-shot stream continues with algorithm='memoized' or "
                "'full' (its batches are not kept, and the stochastic algorithm revisits the batches of its previous fit)"
            )
        elif len(self.state_.memos) != len(source):
            raise ParameterError(
                f"warm_start needs the same number of batches as the previous fit ({len(self.state_.memos)}), "
                f"got {len(source)}"
            )
        check = getattr(source, "_check", None)
        if check is not None:  # sources validate each batch against the observation model
            check.check_data = self.obs_model_.check_data
        model = self._make_model(self.obs_model_)
        executor = None
        if client is not None:
            from bnpcore.distributed import DaskExecutor

            # the parallel schedule (what a cluster runs) keeps the batch memos on the
            # workers; the sequential one needs G after every batch, so its memos come here
            executor = DaskExecutor(client, source, keep_memos=self._schedule() == "parallel")
        try:
            self._run(model, source, self._max_laps(), executor=executor)
        finally:
            if executor is not None:
                self._localize_memos()
                executor.close()
        return self

    def _localize_memos(self) -> None:
        """Bring the memos a Dask fit kept on the workers into the fitted state (so it can be
        saved, warm-started on any backend, inspected). If the cluster cannot return them
        (it is gone), the memos are forgotten instead: G and the fitted model stay as they
        are, and a warm start summarises every batch again."""
        st = getattr(self, "state_", None)
        if st is None:
            return
        try:
            st.localize_memos()
        except Exception:
            if any(is_remote(m) for m in st.memos):
                st.memos = [None] * len(st.memos)
                st._tree = {}

    def _run(self, model, source, n_laps: int, executor=None) -> None:
        """``n_laps`` laps of the lap loop, with the fitted attributes, the callback and the
        checkpoint refreshed after every lap."""
        st = self.state_
        moves = self._make_moves()
        if moves is not None:
            moves.set_state(st.moves_state)
            if hasattr(moves, "_source"):
                # moves whose candidates pass over every batch do it where the lap's local steps
                # run (on Dask: on the workers that hold the batches; None: here)
                moves._source, moves._executor = source, executor
        self.moves_manager_ = moves
        if executor is not None and moves is not None and "birth_collect_threshold" in getattr(moves, "options", {}):
            executor.collect_threshold = float(moves.options["birth_collect_threshold"])
        config = dataclasses.replace(self._fit_config(), max_laps=int(n_laps))
        lap0 = st.lap
        bar = self._progress(n_laps)

        stopped = []

        eval_X = getattr(self, "_eval_X", None)
        if eval_X is not None:  # validated before the first lap, errors naming `eval_X`
            eval_X = self._check_eval_X(eval_X)

        # the fitted attributes are built from the summaries once at the end, and after a lap only
        # when something reads them then (at K = 372, D = 64 that is ~0.05 s of a 1.1 s lap)
        per_lap = self.callback is not None or self.checkpoint_path is not None or eval_X is not None

        def on_lap(info) -> bool:
            if not per_lap:
                return False
            self._finalize(model)
            if eval_X is not None:
                st.record_value("score", self.score(eval_X))
                self._finalize(model)
            stop = False
            if self.callback is not None:
                stop = callback_stops(self.callback(
                    self, {"lap": info.lap, "elbo": info.elbo, "n_components": self.n_components_, "accepted_moves": info.accepted}
                ))
            if self.checkpoint_path is not None:
                # a checkpoint of a run in progress: not converged, this many laps so far
                self.converged_, self.n_iter_ = False, st.lap - lap0
                self.save(self.checkpoint_path)
            if stop:
                stopped.append(info.lap)
            return stop

        try:
            converged = run_laps(model, source, st, config, moves=moves, on_lap=on_lap, progress=bar, executor=executor)
        except BaseException:
            # the lap loop made G the sum of the memos of the completed batches again: keep the
            # model usable and saveable in that state (not converged, the laps it completed)
            self._finalize(model)
            self.converged_, self.n_iter_ = False, st.lap - lap0
            raise
        finally:
            if bar is not None:
                bar.close()
            if moves is not None and hasattr(moves, "_source"):
                moves._source = moves._executor = None  # the fitted model keeps no reference to the data
            # the memo of data terms (and the topic model's last topic table) serve the fit
            # only; a fitted model does not keep them
            model.obs.core.clear_term_cache()
            clear = getattr(model, "clear_caches", None)
            if clear is not None:
                clear()
        self._finalize(model)
        self.converged_ = converged
        self.n_iter_ = st.lap - lap0
        if self.checkpoint_path is not None:  # the last checkpoint says how the run ended
            self.save(self.checkpoint_path)
        if not converged and not stopped:  # a callback that asked to stop gets no warning
            warn_not_converged(config, stacklevel=4)

    def _progress(self, n_laps, unit: str = "lap"):
        """A tqdm progress bar when ``verbose`` (``n_laps`` None: unknown length, e.g. a stream)."""
        if not self.verbose:
            return None
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover
            return None
        return tqdm(total=n_laps, desc=type(self).__name__, unit=unit, leave=True)

    def _bar_step(self, bar) -> None:
        if bar is not None:
            bar.set_postfix(elbo=f"{self.state_.history['elbo'][-1] if self.state_.history['elbo'] else float('nan'):.6g}",
                            K=int(np.sum(self.state_.stats.N >= 1.0)), refresh=False)
            bar.update(1)

    # ---------------------------------------------------------------- streaming
    def partial_fit(self: _E, X: Any, y: Any = None) -> _E:
        r"""Add one batch of new data (streaming memoized update, Hughes & Sudderth 2013 §3).

        Local step on ``X`` with the current global parameters, its summaries added to the
        whole-dataset summaries G and kept as a *frozen* memo (the data are not retained, so the
        batch is never revisited), then the exact global step and the end-of-lap housekeeping
        (empty clusters removed, clusters sorted by size for DP mixtures). Because G is the sum of
        all memos, ``elbo_`` stays the exact ELBO of everything seen so far. The first call
        initialises the model (default priors and initial clusters: with ``n_components=None``
        ten, since no birth runs in a stream) from ``X``. Each call counts as one lap in
        ``history_``. No moves run. The batch's local step runs in this process whatever
        ``backend`` (one batch: nothing to distribute).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        ParameterError
            With ``algorithm="stochastic"``, whose steps revisit their batches (use
            ``"memoized"``; ``"truncation_free"`` has its own streaming step).
        """
        check_not_lazy(X)
        first = not hasattr(self, "state_")
        if self._records_feature_names and not first:
            self._check_feature_names(X)
        with caller_threads(self.n_threads):
            self._partial_fit(X)
        if self._records_feature_names and first:
            self._set_feature_names(_feature_names(X))
        return self

    def _partial_fit(self, X) -> None:
        """:meth:`partial_fit` without the feature names."""
        self._validate_params()
        if hasattr(self, "state_"):
            self._check_obs_params_unchanged()
        if self._algorithm() == "truncation_free":
            self._partial_fit_truncation_free(X)
            return
        if self._algorithm() == "stochastic":
            raise ParameterError("partial_fit is the streaming memoized update; use algorithm='memoized' or 'full'")
        if hasattr(self, "state_") and getattr(self.state_, "truncation_free", None):
            raise ParameterError(f"partial_fit cannot continue a truncation-free fit with algorithm={self.algorithm!r}")
        bar = self._progress(1, unit="batch")
        t0 = time.perf_counter()
        try:
            try:
                model, elbo = self._stream_one(X, name="X", batch=None)
            except KeyboardInterrupt:
                self.state_.recompute_total()
                self._finalize(self._make_model(self.obs_model_))
                raise
            self._end_stream_lap(model, elbo, time.perf_counter() - t0)
            self.n_iter_ = 1
            self.converged_ = False
            self._bar_step(bar)
        finally:
            if bar is not None:
                bar.close()

    def _fit_stream(self, batches):
        """One streaming lap over a one-shot iterable of batches (see :meth:`fit`): the
        streaming memoized update of each batch (``algorithm`` "memoized" or "full"; the
        stochastic algorithm revisits its batches and is refused, as by :meth:`partial_fit`)."""
        if self._algorithm() == "stochastic":
            raise ParameterError(
                "a one-shot iterator of batches is fitted by the streaming memoized update; use algorithm='memoized', "
                "or give data that can be read again (an array, a list of batches or of .npy paths) for algorithm='stochastic'"
            )
        t0 = time.perf_counter()
        if not self._continuing():
            for name in ("state_", "summaries_"):
                if hasattr(self, name):
                    delattr(self, name)
        laps0 = self.state_.lap if hasattr(self, "state_") else 0
        model = None
        bar = self._progress(getattr(batches, "__len__", lambda: None)(), unit="batch")
        try:
            for b, Xb in enumerate(batches):
                model, elbo = self._stream_one(Xb, name=f"X (batch {b})", batch=b)
                if bar is not None:
                    bar.set_postfix(elbo=f"{elbo:.6g}", K=int(np.sum(self.state_.stats.N >= 1.0)), refresh=False)
                    bar.update(1)
        except BaseException:
            if hasattr(self, "state_"):
                self.state_.recompute_total()
                self._finalize(self._make_model(self.obs_model_))
            raise
        finally:
            if bar is not None:
                bar.close()
        if model is None:
            raise ShapeError("`X` is an empty iterable of batches")
        self._end_stream_lap(model, elbo, time.perf_counter() - t0)
        self.n_iter_ = self.state_.lap - laps0
        self.converged_ = False
        return self

    def _stream_one(self, X, *, name: str, batch):
        """Validate one batch, initialise from it if unfitted, then add its frozen memo.
        Returns the model and the exact ELBO after the batch."""
        fitted = hasattr(self, "state_")
        suffix = "" if batch is None else f" [batch {batch}]"

        def named(exc):  # the batch named once (the message may already name it)
            return type(exc)(f"{exc}" if f"batch {batch}" in str(exc) else f"{exc}{suffix}")

        try:
            Xb = self._check_batch(X, name)
        except ValueError as exc:
            raise named(exc) from None
        if not fitted:
            self._initialize(self._batch_source(Xb), revisit=False)
            try:
                self._check_first_batch(Xb, name)
            except ValueError as exc:
                for attr in ("state_", "obs_model_", "n_features_in_"):
                    if hasattr(self, attr):
                        delattr(self, attr)
                raise named(exc) from None
        model = self._make_model(self.obs_model_)
        model.top_l = self._lap_top_l()
        elbo = stream_batch(model, self.state_, Xb, n_threads=self.n_threads)
        return model, elbo

    def _check_first_batch(self, Xb, name: str) -> None:
        """Support check of a first streamed batch once the observation model exists (the
        families whose :meth:`_check_batch` can only check it against a fitted model)."""

    def _end_stream_lap(self, model, elbo: float, seconds: float) -> None:
        st = self.state_
        st.lap += 1
        st.seconds += seconds  # history_["seconds"]: cumulative, as for the laps of fit
        st.record(elbo)
        self._finalize(model)
        eval_X = getattr(self, "_eval_X", None)
        if eval_X is not None:  # fit of a one-shot stream: its lap scored as fit's laps are
            st.record_value("score", self.score(self._check_eval_X(eval_X)))
            self._finalize(model)
        if self.callback is not None:
            self.callback(self, {"lap": st.lap, "elbo": elbo, "n_components": self.n_components_, "accepted_moves": 0})
        if self.checkpoint_path is not None:
            self.save(self.checkpoint_path)

    # ---------------------------------------------------------- fitted results
    def _finalize(self, model) -> None:
        """Set the public fitted attributes from the current global summaries."""
        st = self.state_
        G = st.stats
        self.summaries_ = G
        self.history_ = {
            "lap": np.asarray(st.history["lap"], dtype=np.int64),
            "elbo": np.asarray(st.history["elbo"], dtype=np.float64),
            "n_components": np.asarray(st.history["n_components"], dtype=np.int64),
            "seconds": np.asarray(st.history["seconds"], dtype=np.float64),
        }
        n_laps = len(st.history["lap"])
        for k, v in st.history.items():  # e.g. "score" (held-out data given to fit), NaN-padded
            if k not in self.history_:
                self.history_[k] = np.asarray(list(v) + [float("nan")] * (n_laps - len(v)), dtype=np.float64)
        self.elbo_ = float(self.history_["elbo"][-1]) if len(self.history_["elbo"]) else float("nan")
        self.n_components_ = int(np.sum(G.N >= 1.0))
        self._set_fitted(model, G)
        self.moves_log_ = list(st.moves_log)

    def _check_eval_X(self, eval_X):
        """``eval_X`` of :meth:`fit` checked once the data's shape is known and before the first
        lap (errors name ``eval_X``); returns what :meth:`score` is given after every lap.
        Families override it; by default it is scored as given."""
        return eval_X

    def _check_fitted(self):
        if not hasattr(self, "summaries_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def elbo_terms(self) -> dict[str, float]:
        """The fitted ELBO split into its terms, computed from the summaries.

        Returns
        -------
        terms : dict of str to float
            The family's terms (data term, entropy, allocation terms, Σh); they add up to
            ``elbo_`` up to round-off.
        """
        self._check_fitted()
        return self._make_model(self.obs_model_).elbo_terms(self.summaries_)

    # -------------------------------------------------------------- persistence
    def _live_client(self):
        """The ``client`` parameter when it is a live connection (not None, not an address)."""
        client = self.__dict__.get("client")
        return None if client is None or isinstance(client, str) else client

    def __sklearn_clone__(self):
        # a Dask client is a live connection that cannot be copied: the clone shares it
        client = self._live_client()
        if client is None:
            return super().__sklearn_clone__()
        self.client = None
        try:
            new = super().__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def __deepcopy__(self, memo):
        client = self._live_client()
        if client is not None:
            memo[id(client)] = client  # shared, not copied (as by clone)
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    def __getstate__(self):
        # a pickled estimator does not hold a live Dask client (as in model files): it unpickles
        # with client=None; a scheduler address is kept
        state = super().__getstate__()
        if self._live_client() is not None:
            state = dict(state, client=None)
        return state

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the estimator (parameters, fitted state, random streams, history) to ``path``
        atomically (temporary file + rename); reload with :func:`bnpcore.load`. No pickle:
        the format is ``docs/model_format.md``.

        Parameters
        ----------
        path : str or os.PathLike
            Destination file (``.npz``).
        """
        from bnpcore.io import save

        save(self, path)
