"""Over-relaxation of the topic-word counts in full and memoized laps
(:mod:`bnpcore.algorithms.overrelax`): every objective exact, never decreasing, and the state
carried by warm starts and model files."""

import warnings

import bnpcore
import bnpcore.algorithms.loop as loop
import numpy as np
import pytest
from bnpcore import FiniteTopicModel, HDPTopicModel
from bnpcore.algorithms.memoized import MONOTONE_RTOL
from bnpcore.algorithms.overrelax import GROWTH
from bnpcore.datasets import make_bars
from bnpcore.exceptions import ELBODecreaseWarning, ParameterError

pytestmark = pytest.mark.filterwarnings("ignore::bnpcore.exceptions.ConvergenceWarning")  # tol=0 runs


@pytest.fixture(scope="module")
def bars():
    return make_bars(n_docs=300, n_tokens=80, random_state=2)[0]


def _laps(monkeypatch):
    """Record what every full or memoized lap reports (over-relaxed, rejected, η in and out)."""
    log = []
    orig = loop.run_memoized_lap

    def wrapped(model, source, state, **kw):
        eta_in = state.overrelax.get("eta")
        res = orig(model, source, state, **kw)
        log.append({**res, "eta_in": eta_in, "eta_out": state.overrelax.get("eta"), "batch_elbo": list(state.batch_elbo)})
        return res

    monkeypatch.setattr(loop, "run_memoized_lap", wrapped)
    return log


def _nondecreasing(values):
    v = np.asarray(values)
    return np.all(v[1:] >= v[:-1] - MONOTONE_RTOL * np.abs(v[:-1]))


@pytest.mark.parametrize(("algorithm", "schedule"), [("full", "sequential"), ("memoized", "sequential"), ("memoized", "parallel")])
@pytest.mark.parametrize("cls", [HDPTopicModel, FiniteTopicModel])
def test_overrelaxed_laps_never_lower_the_objective(bars, monkeypatch, cls, algorithm, schedule):
    """With a large factor many over-relaxed steps are rejected and redone plain (a batch, or
    the whole block of the parallel schedule): the lap and batch objectives still never
    decrease, and some over-relaxed laps are kept whole."""
    log = _laps(monkeypatch)
    est = cls(10, algorithm=algorithm, n_batches=None if algorithm == "full" else 4, schedule=schedule, moves=(), overrelax=8.0, tol=0, max_laps=25,
              random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ELBODecreaseWarning)
        est.fit(bars)
    assert _nondecreasing(est.history_["elbo"])
    assert _nondecreasing(est.state_.batch_elbo[len(log[0]["batch_elbo"]):])  # from the end of lap 1
    relaxed = [r for r in log if r["overrelaxed"]]
    assert any(not r["relax_rejected"] for r in relaxed) and any(r["relax_rejected"] for r in relaxed)
    assert max(r["eta_in"] or 1.0 for r in log) > 2.0
    # history_["overrelax"]: the factor each lap used, 1 for plain and rejected laps
    used = [1.0 if not r["overrelaxed"] or r["relax_rejected"] else r["eta_in"] for r in log]
    np.testing.assert_array_equal(est.history_["overrelax"], used)


def test_eta_schedule(bars, monkeypatch):
    """η: a plain lap, then ×1.5 per kept over-relaxed lap up to ``overrelax``, back to 1 after
    a rejection."""
    log = _laps(monkeypatch)
    FiniteTopicModel(10, algorithm="full", moves=(), overrelax=2.0, tol=0, max_laps=30, random_state=0).fit(bars)
    for r in log[1:]:
        if not r["overrelaxed"]:
            assert r["eta_out"] == GROWTH
        elif r["relax_rejected"]:
            assert r["eta_out"] == 1.0
        else:
            assert r["eta_out"] == min(r["eta_in"] * GROWTH, 2.0)
    assert any(r["overrelaxed"] and r["eta_in"] == 2.0 for r in log)


def test_overrelax_one_is_plain_coordinate_ascent(bars, monkeypatch):
    log = _laps(monkeypatch)
    est = FiniteTopicModel(10, n_batches=3, moves=(), overrelax=1.0, tol=0, max_laps=6, random_state=0).fit(bars)
    assert not any(r["overrelaxed"] for r in log) and est.state_.overrelax == {} and "overrelax" not in est.history_


def test_overrelaxation_shortens_the_linear_tail():
    """On the bars the default over-relaxed fit reaches the plain fit's converged objective in
    fewer laps, and converges at least as high."""
    X = make_bars(n_docs=600, random_state=0)[0]
    kw = dict(n_components=10, moves=(), random_state=0)
    plain = FiniteTopicModel(overrelax=1.0, **kw).fit(X)
    fast = FiniteTopicModel(**kw).fit(X)
    assert plain.converged_ and fast.converged_
    assert fast.elbo_ >= plain.elbo_
    first = int(np.argmax(np.asarray(fast.history_["elbo"]) >= plain.elbo_)) + 1
    assert first < plain.n_iter_


def test_a_move_forgets_the_direction(bars, monkeypatch):
    """A lap that changes the topics leaves no direction: the next lap is plain."""
    log = _laps(monkeypatch)
    HDPTopicModel(1, n_batches=3, tol=0, max_laps=8, random_state=0).fit(bars)
    changed = [i for i, r in enumerate(log) if r["accepted"]]
    assert changed
    for i in changed:
        assert log[i]["eta_out"] is None
        if i + 1 < len(log):
            assert not log[i + 1]["overrelaxed"]


def test_state_is_saved_and_resumed(bars, tmp_path):
    """The over-relaxation state (η, the counts at the last lap's start) goes into the model
    file: 9 laps, save, load, 3 more equal 12 laps, over-relaxed laps among the last 3."""
    kw = dict(n_components=10, n_batches=3, tol=0, random_state=4, moves=())
    twelve = FiniteTopicModel(max_laps=12, **kw).fit(bars)
    assert np.max(twelve.history_["overrelax"][9:]) > 1.0
    nine = FiniteTopicModel(max_laps=9, **kw).fit(bars)
    assert nine.state_.overrelax["eta"] > 1.0
    path = tmp_path / "m.bnp"
    nine.save(path)
    loaded = bnpcore.load(path)
    np.testing.assert_array_equal(loaded.state_.overrelax["S"], nine.state_.overrelax["S"])
    np.testing.assert_array_equal(loaded.state_.overrelax["uids"], nine.state_.overrelax["uids"])
    loaded.set_params(warm_start=True, max_laps=3)
    loaded.fit(bars)
    np.testing.assert_array_equal(loaded.history_["elbo"], twelve.history_["elbo"])
    np.testing.assert_array_equal(loaded.history_["overrelax"], twelve.history_["overrelax"])
    np.testing.assert_array_equal(loaded.topics_, twelve.topics_)


@pytest.mark.parametrize("value", [0.5, 0, -1, float("nan"), "2", True])
def test_bad_overrelax(bars, value):
    with pytest.raises(ParameterError, match="overrelax"):
        FiniteTopicModel(3, overrelax=value).fit(bars)


def test_a_run_killed_mid_lap_resumes_from_its_checkpoint(bars, tmp_path, monkeypatch):
    """Killed in the middle of an over-relaxed lap, a fit resumes from its last checkpoint to
    the uninterrupted fit, bit for bit (the over-relaxation state is in the checkpoint)."""
    from bnpcore.topic import TopicModel

    kw = dict(n_components=10, n_batches=3, tol=0, random_state=4, moves=())
    full = FiniteTopicModel(max_laps=12, **kw).fit(bars)
    assert full.history_["overrelax"][9] > 1.0  # lap 10, the one killed, over-relaxes
    ck = tmp_path / "ck.npz"
    armed = {"left": None}
    orig = TopicModel.local_step

    def dying(self, *a, **k):
        if armed["left"] is not None:
            armed["left"] -= 1
            if armed["left"] < 0:
                raise KeyboardInterrupt
        return orig(self, *a, **k)

    def arm(model, info):
        if info["lap"] == 9:
            armed["left"] = 1  # the second batch of lap 10 dies

    monkeypatch.setattr(TopicModel, "local_step", dying)
    with pytest.raises(KeyboardInterrupt):
        FiniteTopicModel(max_laps=12, checkpoint_path=str(ck), callback=arm, **kw).fit(bars)
    monkeypatch.setattr(TopicModel, "local_step", orig)
    resumed = bnpcore.load(ck)
    assert resumed.state_.lap == 9 and resumed.state_.overrelax["eta"] > 1.0
    resumed.set_params(warm_start=True, checkpoint_path=None, max_laps=3)
    resumed.fit(bars)
    np.testing.assert_array_equal(resumed.history_["elbo"], full.history_["elbo"])
    np.testing.assert_array_equal(resumed.history_["overrelax"], full.history_["overrelax"])
    np.testing.assert_array_equal(resumed.topics_, full.topics_)
