"""``algorithm="truncation_free"``: the estimator side of truncation-free SVI (Wang & Blei 2012)
for :class:`bnpcore.HDPTopicModel` and :class:`bnpcore.DPMixture` (``obs="mult"``).

The fit runs passes of :func:`bnpcore.algorithms.truncation_free.run_pass` over the corpus held
as one CSR matrix (whatever form it was given in), records one ``history_`` entry per pass
(number of components, seconds, and the held-out score of ``eval_X`` when given: the method
optimises no objective, so ``elbo`` is NaN), and keeps its state in the shared
:class:`~bnpcore.algorithms._base.FitState` (summaries ``S = λ − η``, sticks ``tf_u``/``tf_v``,
counters in ``FitState.truncation_free``), so ``save``/``load``, checkpoints, ``warm_start`` and
``partial_fit`` work as for the other algorithms.
"""

from __future__ import annotations

import numpy as np
from bnpcore._validation import check_param, is_sparse, make_csr
from bnpcore.algorithms._base import FitState
from bnpcore.algorithms.truncation_free import (
    Clock,
    TFConfig,
    TFState,
    run_pass,
    run_stream_batch,
    state_from_stats,
    state_info,
    stats_from_state,
)
from bnpcore.exceptions import DataError, ParameterError
from bnpcore.obs import ObsModel

__all__ = ["TRUNCATION_FREE", "TruncationFreeMixin"]

TRUNCATION_FREE = "truncation_free"


def _as_int_csr(X, name: str):
    """``X`` (sparse or dense counts, validated non-negative and finite by the family) as a
    canonical CSR matrix of integer-valued float64 counts."""
    import scipy.sparse as sp

    if not is_sparse(X):
        X = sp.csr_array(np.asarray(X, dtype=np.float64))
    X = sp.csr_array(X)
    X.sum_duplicates()
    data = np.asarray(X.data, dtype=np.float64)
    bad = np.flatnonzero(data != np.floor(data))
    if bad.size:
        row = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
        raise DataError(
            f"`{name}` must hold integer counts for algorithm='truncation_free' (its Gibbs sampler draws one topic per "
            f"token); row {row}, column {int(X.indices[bad[0]])} has {data[bad[0]]!r}"
        )
    return make_csr(data, np.asarray(X.indices, dtype=np.int64), np.asarray(X.indptr, dtype=np.int64), X.shape)


class TruncationFreeMixin:
    """Adds ``algorithm="truncation_free"`` to a :class:`~bnpcore.estimators._engine.VBEstimator`
    family whose data are bags of words. The family supplies :attr:`_tf_kind` (``"hdp"`` or
    ``"dp_mult"``), :meth:`_tf_eta`, :meth:`_tf_alpha` and, through ``_make_source`` and
    ``_check_batch``, its data handling."""

    _tf_kind = "hdp"

    # ------------------------------------------------------------------ hooks
    def _tf_eta(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _tf_alpha(self) -> float:
        return 1.0

    def _is_truncation_free(self) -> bool:
        return self.algorithm == TRUNCATION_FREE

    def _validate_tf_params(self) -> None:
        check_param("batch_size", self.batch_size, kind="int", low=1, low_inclusive=True)
        check_param("n_sweeps", self.n_sweeps, kind="int", low=0, low_inclusive=True)
        check_param("prune_every", self.prune_every, kind="int", low=1, low_inclusive=True)
        if self._is_truncation_free() and self._moves_tuple():
            raise ParameterError("`moves` cannot be used with algorithm='truncation_free' (it has no objective to check them against)")
        if self._is_truncation_free() and self._backend() != "local":
            raise ParameterError("algorithm='truncation_free' runs in this process: use backend='local'")

    def _tf_config(self) -> TFConfig:
        return TFConfig(
            kind=self._tf_kind,
            eta=float(self._tf_eta()),
            gamma=float(self.gamma),
            alpha=float(self._tf_alpha()),
            batch_size=int(self.batch_size),
            n_sweeps=int(self.n_sweeps),
            prune_every=int(self.prune_every),
            n_threads=self.n_threads,
        )

    # ------------------------------------------------------------------ data
    def _tf_corpus(self, X):
        """The whole corpus as one CSR matrix (a list of batches or a re-iterable corpus is
        read once and stacked; the sampler visits documents in a random order)."""
        import scipy.sparse as sp

        source = self._make_source(X, None)
        parts = [source.get(b) for b in range(len(source))]
        parts = [p if is_sparse(p) else sp.csr_array(np.asarray(p, dtype=np.float64)) for p in parts]
        X = parts[0] if len(parts) == 1 else sp.vstack(parts, format="csr")
        return _as_int_csr(X, "X")

    # ------------------------------------------------------------------ state
    def _tf_start(self, n_vocab: int, n_rows: int) -> None:
        _s_init, s_order, s_moves, _s_batch = self._seeds()
        config = self._tf_config()
        self.obs_model_ = ObsModel("mult", {"lam": np.full(int(n_vocab), config.eta)})
        self._obs_params_ = self._obs_param_values()
        st = FitState(
            stats=stats_from_state(TFState.empty(int(n_vocab)), config),
            memos=[],
            next_uid=0,
            rng_order=np.random.default_rng(s_order),
            rng_moves=np.random.default_rng(s_moves),
            n_rows=int(n_rows),
        )
        st.truncation_free = state_info(TFState.empty(int(n_vocab)))
        self.state_ = st
        self.n_features_in_ = int(n_vocab)

    def _tf_check_continuing(self) -> bool:
        if not self._continuing():
            return False
        if not getattr(self.state_, "truncation_free", None):
            raise ParameterError("warm_start cannot continue a fit of another algorithm with algorithm='truncation_free'")
        return True

    def _tf_record(self, tf: TFState, config: TFConfig, seconds: float, eval_X) -> None:
        st = self.state_
        st.stats = stats_from_state(tf, config)
        st.truncation_free = state_info(tf)
        st.next_uid = int(tf.next_uid)
        st.seconds += seconds
        st.lap += 1
        st.record(float("nan"))
        model = self._make_model(self.obs_model_)
        self._finalize(model)
        score = float("nan")
        if eval_X is not None:
            score = float(self.score(eval_X))
        st.record_value("score", score)
        self._finalize(model)

    def _tf_after_lap(self) -> bool:
        stop = False
        if self.callback is not None:
            st = self.state_
            from bnpcore.estimators._engine import callback_stops

            stop = callback_stops(self.callback(
                self, {"lap": st.lap, "elbo": float("nan"), "n_components": self.n_components_, "accepted_moves": 0,
                       "score": st.history["score"][-1]}
            ))
        if self.checkpoint_path is not None:
            self.save(self.checkpoint_path)
        return stop

    # ------------------------------------------------------------------ fit
    def _fit_truncation_free(self, X, eval_X=None):
        if self._is_one_shot(X):
            return self._fit_truncation_free_stream(X)
        continuing = self._tf_check_continuing()
        corpus = self._tf_corpus(X)
        if corpus.data.sum() <= 0:
            raise DataError("`X` has no tokens: truncation-free SVI needs at least one word")
        if continuing and corpus.shape[1] != self.n_features_in_:
            raise DataError(f"`X` has {corpus.shape[1]} features, the fitted model {self.n_features_in_}")
        if not continuing:
            self._tf_start(corpus.shape[1], corpus.shape[0])
        else:
            self.state_.n_rows = int(corpus.shape[0])
        if eval_X is not None:  # before the first pass, errors naming `eval_X`
            eval_X = self._check_eval_X(eval_X)
        config = self._tf_config()
        st = self.state_
        tf = state_from_stats(st.stats, st.truncation_free)
        bar = self._progress(self._max_laps(), unit="pass")
        laps = 0
        try:
            for _ in range(self._max_laps()):
                clock = Clock()
                run_pass(tf, corpus, config, st.rng_order)
                self._tf_record(tf, config, clock.lap(), eval_X)
                laps += 1
                if bar is not None:
                    bar.set_postfix(K=self.n_components_, score=f"{st.history['score'][-1]:.4g}", refresh=False)
                    bar.update(1)
                if self._tf_after_lap():
                    break
        finally:
            if bar is not None:
                bar.close()
            # also when a pass or the callback raised: the passes completed so far
            self.n_iter_ = laps
            self.converged_ = False
        return self

    def _fit_truncation_free_stream(self, batches):
        if not self._continuing():
            for name in ("state_", "summaries_"):
                if hasattr(self, name):
                    delattr(self, name)
        n = 0
        for b, Xb in enumerate(batches):
            self._partial_fit_truncation_free(Xb, name=f"X (batch {b})", allow_empty=True)
            n += 1
        if n == 0:
            raise DataError("`X` is an empty iterable of batches")
        if not np.sum(self.state_.stats.S) > 0:  # every batch was empty (and nothing was fitted before)
            for name in ("state_", "summaries_"):
                delattr(self, name)
            raise DataError("`X` has no tokens: truncation-free SVI needs at least one word")
        self.n_iter_ = n
        return self

    def _partial_fit_truncation_free(self, X, name: str = "X", allow_empty: bool = False):
        """One batch; an unfitted model refuses a batch without a word unless ``allow_empty``
        (a stream's first batches, checked once the stream ends)."""
        Xb = _as_int_csr(self._check_batch(X, name), name)
        fitted = hasattr(self, "state_")
        if fitted and not getattr(self.state_, "truncation_free", None):
            raise ParameterError("partial_fit cannot continue a fit of another algorithm with algorithm='truncation_free'")
        if not fitted and not allow_empty and not Xb.data.sum() > 0:
            raise DataError(f"`{name}` has no tokens: truncation-free SVI needs at least one word")
        if not fitted:
            self._tf_start(Xb.shape[1], 0)
        st = self.state_
        config = self._tf_config()
        tf = state_from_stats(st.stats, st.truncation_free)
        clock = Clock()
        run_stream_batch(tf, Xb, config, st.rng_order)
        st.n_rows += int(Xb.shape[0])
        self._tf_record(tf, config, clock.lap(), None)
        self._tf_after_lap()
        self.n_iter_ = 1
        self.converged_ = False
        return self

