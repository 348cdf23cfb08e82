"""Stochastic variational inference (spec 01 §5.2)."""


import numpy as np
import pytest
from _helpers import fit_quietly, seeded_data
from bnpcore import DPMixture, FiniteMixture
from bnpcore.algorithms import stochastic
from bnpcore.data.sources import ArrayBatches


def test_learning_rate():
    assert stochastic.learning_rate(1, 1.0, 0.6) == 2.0 ** -0.6
    assert stochastic.learning_rate(10, 0.0, 1.0) == 0.1


@pytest.mark.parametrize("obs", ["gauss", "mult"])
def test_one_batch_and_unit_rate_equals_full_coordinate_ascent(obs, monkeypatch):
    """P25: with one batch equal to the dataset and ρ ≡ 1, SVI is full-dataset CA. Its lap-t
    evaluation pass is full CA's local step t+1, so elbo_svi[t] == elbo_full[t+1]."""
    X = seeded_data(obs, n=500)
    monkeypatch.setattr(stochastic, "learning_rate", lambda t, delay, decay: 1.0)
    common = dict(obs=obs, n_components=5, random_state=4, tol=0)
    # (full coordinate ascent without the finite mixture's swap move: the property is about CA)
    full = fit_quietly(FiniteMixture(algorithm="full", max_laps=6, moves=(), **common), X)
    svi = fit_quietly(FiniteMixture(algorithm="stochastic", n_batches=1, max_laps=5, **common), X)
    assert np.array_equal(svi.history_["elbo"], full.history_["elbo"][1:])
    full5 = fit_quietly(FiniteMixture(algorithm="full", max_laps=5, moves=(), **common), X)
    assert np.array_equal(svi.summaries_.N, full5.summaries_.N)
    assert np.array_equal(svi.summaries_.S, full5.summaries_.S)
    assert svi.state_.stochastic_step == 5


def test_step_is_interpolation_of_scaled_batch_summaries(monkeypatch):
    """Replay the steps of one lap by hand: (N, S) ← (1−ρ_t)(N, S) + ρ_t (N/N_b)(N_b, S_b)."""
    X = seeded_data("gauss", n=403)
    est = DPMixture(algorithm="stochastic", n_batches=4, n_components=5, random_state=0, max_laps=1,
                    learning_rate_delay=3.0, learning_rate_decay=0.7)
    visited = []
    orig = ArrayBatches.get

    def get(self, b):
        visited.append(b)
        return orig(self, b)

    monkeypatch.setattr(ArrayBatches, "get", get)
    # initial state of the same seed
    ref = DPMixture(algorithm="stochastic", n_batches=4, n_components=5, random_state=0)
    seeds = ref._seeds()
    src = ref._make_source(X, seed=int(seeds[3].generate_state(1, np.uint64)[0] >> np.uint64(1)))
    ref._initialize(src, seeds)
    model = ref._make_model(ref.obs_model_)
    fit_quietly(est, X)
    order = visited[:4]
    N, S = ref.state_.stats.N.copy(), ref.state_.stats.S.copy()
    g = ref.state_.stats.copy()
    for t, b in enumerate(order, start=1):
        Xb = orig(src, b)
        out = model.local_step(Xb, g)
        rho = (t + 3.0) ** -0.7
        N = (1 - rho) * N + rho * (403 / len(Xb)) * out["N"]
        S = (1 - rho) * S + rho * (403 / len(Xb)) * out["S"]
        g.N, g.S = N.copy(), S.copy()
    np.testing.assert_allclose(est.state_.stats.N, N, rtol=1e-12)
    np.testing.assert_allclose(est.state_.stats.S, S, rtol=1e-12, atol=1e-9)
    assert est.state_.stochastic_step == 4
    # the evaluation pass is not counted: exactly 4 batch reads per lap + 4 evaluation reads
    assert len(visited) == 8


def test_stochastic_fits_and_counts_steps():
    X = seeded_data("gauss", n=2000, k=4, seed=3)
    est = fit_quietly(DPMixture(algorithm="stochastic", n_batches=5, n_components=8, random_state=0, max_laps=6, tol=0), X)
    assert est.state_.stochastic_step == 30
    assert est.history_["lap"].tolist() == [1, 2, 3, 4, 5, 6]
    assert np.all(np.isfinite(est.history_["elbo"]))
    assert est.history_["elbo"][-1] > est.history_["elbo"][0]


@pytest.mark.slow
def test_stochastic_ends_near_the_full_data_optimum():
    """A quality property (30 full-data laps for comparison), not a correctness invariant."""
    X = seeded_data("gauss", n=2000, k=4, seed=3)
    est = fit_quietly(DPMixture(algorithm="stochastic", n_batches=5, n_components=8, random_state=0, max_laps=6, tol=0), X)
    full = fit_quietly(DPMixture(n_components=8, random_state=0, max_laps=30, tol=0), X)
    assert est.score(X) > full.score(X) - 0.05


def test_stochastic_warm_start_3_plus_3_equals_6(tmp_path):
    import bnpcore

    X = seeded_data("gauss", n=600, seed=2)
    kw = dict(algorithm="stochastic", n_batches=3, n_components=5, random_state=1, tol=0)
    six = fit_quietly(DPMixture(max_laps=6, **kw), X)
    a = fit_quietly(DPMixture(max_laps=3, **kw), X)
    a.save(tmp_path / "a.npz")
    b = bnpcore.load(tmp_path / "a.npz")
    b.set_params(warm_start=True)
    fit_quietly(b, X)
    for k in ("lap", "elbo", "n_components"):
        assert np.array_equal(b.history_[k], six.history_[k])
    assert np.array_equal(b.summaries_.S, six.summaries_.S)
    assert b.state_.stochastic_step == 18
