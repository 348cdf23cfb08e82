"""A model family that lives only in this file, fitted by the unchanged engine.

The allocation model below (a mixture with *known* weights w: no prior on π, so
E[ln π_k] = ln w_k and the allocation term of the ELBO is E[ln p(z | π)] = Σ_k N_k ln w_k) is
written in Python against the allocation protocol (:class:`bnpcore.alloc.AllocModel`), and the
estimator is a subclass of the generic :class:`~bnpcore.estimators._engine.VBEstimator` that
supplies the family hooks. Nothing under ``python/bnpcore`` knows about either: this is the
proof that a family can be added without touching the engine (issue "One engine for three
model families").
"""

from __future__ import annotations

import bnpcore
import numpy as np
import pytest
from bnpcore import ConvergenceWarning
from bnpcore.alloc import AllocModel, PythonAlloc
from bnpcore.data.sources import ArrayBatches
from bnpcore.estimators._engine import VBEstimator
from bnpcore.io import register_model_type
from bnpcore.model import Model
from bnpcore.obs import ObsModel, default_prior
from bnpcore.stats import SuffStats
from scipy.special import logsumexp


class FixedWeights(PythonAlloc):
    r"""Known mixture weights: :math:`\mathbb E[\ln\pi_k]=\ln w_k`,
    :math:`\mathcal L_{alloc}=\sum_k N_k\ln w_k`."""

    name = "fixed_weights"
    nested = False

    def __init__(self, weights):
        w = np.asarray(weights, dtype=np.float64)
        self.log_w = np.log(w / w.sum())

    def to_dict(self) -> dict:
        return {"name": self.name, "weights": np.exp(self.log_w).tolist()}

    def e_log_pi(self, stats) -> np.ndarray:
        return self.log_w.copy()

    def elbo(self, stats) -> float:
        return float(np.dot(stats.N, self.log_w))

    def weights(self, stats) -> np.ndarray:
        return np.exp(self.log_w)

    def merge_delta(self, stats) -> np.ndarray:
        # the merged component keeps the weight of the first: N_j moves from ln w_j to ln w_i
        K = self.log_w.shape[0]
        out = np.full((K, K), -np.inf)
        iu, ju = np.triu_indices(K, 1)
        out[iu, ju] = stats.N[ju] * (self.log_w[iu] - self.log_w[ju])
        return out


class FixedWeightMixture(VBEstimator):
    """Gaussian mixture with known weights, fitted by the generic engine."""

    def __init__(
        self, weights=(0.5, 0.5), *, algorithm="memoized", n_batches=3, max_laps=200, min_laps=2, tol=1e-12,
        top_l=None, dense_laps=1, random_state=0, n_threads=None, warm_start=False, callback=None,
        checkpoint_path=None, verbose=False,
    ):
        self.weights = weights
        self.algorithm = algorithm
        self.n_batches = n_batches
        self.max_laps = max_laps
        self.min_laps = min_laps
        self.tol = tol
        self.top_l = top_l
        self.dense_laps = dense_laps
        self.random_state = random_state
        self.n_threads = n_threads
        self.warm_start = warm_start
        self.callback = callback
        self.checkpoint_path = checkpoint_path
        self.verbose = verbose
        # engine parameters this family does not expose
        self.init_subsample = 10_000
        self.moves = ()
        self.move_options = None
        self.birth_start_lap = self.merge_start_lap = self.delete_start_lap = 2
        self.max_births_per_lap = self.max_merges_per_lap = self.max_deletes_per_lap = 0
        self.learning_rate_delay, self.learning_rate_decay = 1.0, 0.6

    # the family hooks
    def _make_alloc(self):
        return FixedWeights(self.weights)

    def _make_obs(self, X0):
        return ObsModel("gauss", default_prior("gauss", X0))

    def _make_source(self, X, seed=None):
        X = np.ascontiguousarray(X, dtype=np.float64)
        return ArrayBatches(X, 1 if self.algorithm == "full" else self.n_batches, seed=seed, validated=True)

    def _check_batch(self, X, name):
        return np.ascontiguousarray(X, dtype=np.float64)

    def _batch_source(self, X):
        return ArrayBatches(X, 1, validated=True)

    def _init_stats(self, model, X0, rng):
        # one atom per component: the first and the last row (deterministic)
        pick = np.ascontiguousarray(X0[[int(np.argmin(X0[:, 0])), int(np.argmax(X0[:, 0]))]])
        N, S = model.obs.core.summarize(pick, np.eye(2))
        return SuffStats(N, S, np.zeros(2), 0.0, np.arange(2))

    def _set_fitted(self, model, stats):
        self.weights_ = model.alloc.weights(stats)
        self.counts_ = stats.N.copy()


def _data(seed=0, n=600):
    rng = np.random.default_rng(seed)
    z = rng.random(n) < 0.5
    return np.column_stack([np.where(z, -1.0, 1.0) + rng.normal(size=n), rng.normal(size=n)])


def _reference_resp(est, X):
    """Responsibilities from their definition: softmax_k(E[ln F(x_n | φ_k)] + ln w_k)."""
    G = est.summaries_
    W = est.obs_model_.core.e_log_lik(np.ascontiguousarray(X), G.N, G.S) + np.log(np.asarray(est.weights) / np.sum(est.weights))
    return np.exp(W - logsumexp(W, axis=1, keepdims=True))


def test_the_plugin_satisfies_the_allocation_protocol():
    assert isinstance(FixedWeights([1, 1]), AllocModel)


@pytest.mark.parametrize("algorithm", ["memoized", "full"])
def test_plugin_family_fits_with_memoized_vi(algorithm):
    X = _data()
    est = FixedWeightMixture(weights=(0.8, 0.2), algorithm=algorithm).fit(X)
    assert est.converged_ and est.n_iter_ >= 2
    elbo = est.history_["elbo"]
    assert np.all(np.isfinite(elbo))
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[:-1]))  # memoized VI never lowers the ELBO
    np.testing.assert_allclose(est.weights_, [0.8, 0.2], rtol=1e-12)
    # the allocation term is the plug-in's, and the ELBO is the model's from the summaries
    G = est.summaries_
    model = Model(est._make_alloc(), est.obs_model_)
    assert est.elbo_terms()["alloc"] == pytest.approx(float(G.N @ np.log([0.8, 0.2])), rel=1e-12)
    assert est.elbo_ == pytest.approx(model.elbo(G), rel=1e-12)
    # at convergence the summaries are those of the responsibilities the fixed weights define
    R = _reference_resp(est, X)
    np.testing.assert_allclose(G.N, R.sum(axis=0), rtol=1e-6)


def test_plugin_weights_enter_the_local_step():
    X = _data(1)
    even = FixedWeightMixture(weights=(0.5, 0.5)).fit(X)
    skew = FixedWeightMixture(weights=(0.95, 0.05)).fit(X)
    # overlapping clusters: the heavier prior weight pulls rows into component 0
    assert skew.counts_[0] > even.counts_[0] + 10
    model = Model(skew._make_alloc(), skew.obs_model_)
    out = model.local_step(np.ascontiguousarray(X), skew.summaries_, return_resp=True)
    np.testing.assert_allclose(model.resp_from_output(out, 2), _reference_resp(skew, X), rtol=1e-9, atol=1e-12)


def test_plugin_family_streams_and_warm_starts():
    X = _data(2)
    est = FixedWeightMixture(weights=(0.7, 0.3))
    for chunk in np.array_split(X, 3):
        est.partial_fit(chunk)
    assert est.summaries_.N.sum() == pytest.approx(X.shape[0])
    assert len(est.history_["elbo"]) == 3
    full = FixedWeightMixture(weights=(0.7, 0.3), max_laps=3, tol=0.0)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        full.fit(X)
    full.set_params(warm_start=True, max_laps=2)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        full.fit(X)
    assert full.history_["lap"].tolist() == [1, 2, 3, 4, 5]


def test_plugin_family_saves_and_resumes(tmp_path):
    register_model_type("FixedWeightMixture", FixedWeightMixture)
    X = _data(3)
    est = FixedWeightMixture(weights=(0.6, 0.4), max_laps=3, tol=0.0)
    with pytest.warns(ConvergenceWarning):
        est.fit(X)
    path = tmp_path / "fixed.npz"
    est.save(path)
    loaded = bnpcore.load(path)
    assert type(loaded) is FixedWeightMixture and loaded.weights == (0.6, 0.4)
    np.testing.assert_array_equal(loaded.summaries_.N, est.summaries_.N)
    assert loaded.elbo_ == est.elbo_
    # continuing the loaded model equals continuing the original
    for m in (est, loaded):
        m.set_params(warm_start=True, max_laps=2)
        with pytest.warns(ConvergenceWarning):
            m.fit(X)
    np.testing.assert_array_equal(loaded.history_["elbo"], est.history_["elbo"])
