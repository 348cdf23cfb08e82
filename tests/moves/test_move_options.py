"""``move_options``: every option of every move manager has a declared kind and range
(``OPTION_RANGES``), and a value outside it is refused with a ParameterError naming
``move_options['<key>']`` before a fit does any work."""

import math

import numpy as np
import pytest
from _helpers import family_data, fit_quietly
from bnpcore import HDPHMM, DPMixture, FiniteHMM, FiniteMixture, FiniteTopicModel, HDPTopicModel
from bnpcore.estimators._engine import VBEstimator
from bnpcore.exceptions import ParameterError
from bnpcore.moves import MoveManager
from bnpcore.moves._base import ACCEPT_RTOL_RANGE, OptionRange, accepts
from bnpcore.moves.hmm import HMMMoveManager
from bnpcore.moves.topic import TopicMoveManager

MANAGERS = {"mixture": MoveManager, "hmm": HMMMoveManager, "topic": TopicMoveManager}
ESTIMATORS = {"mixture": (DPMixture, FiniteMixture), "hmm": (HDPHMM, FiniteHMM), "topic": (HDPTopicModel, FiniteTopicModel)}


def _data(family):
    if family == "mixture":
        return np.random.default_rng(0).standard_normal((60, 2)), {}
    return family_data(family)


def _bad_values(r: OptionRange) -> list:
    """Values just outside ``r`` and values of the wrong kind."""
    if r.kind == "bool":
        return [1, "yes", None]
    out = ["1", [1]]
    if None not in r.also:
        out.append(None)
    if r.kind == "int":
        out += [1.5, float(r.low), True]
    else:
        out.append(math.nan)
        if not r.infinite:
            out += [math.inf, -math.inf]
    if r.low is not None:
        out.append(r.low if r.low_open else r.low - (1 if r.kind == "int" else 1e-9))
    if r.high is not None:
        out.append(r.high if r.high_open else r.high + 1e-9)
    return out


def _edge_values(r: OptionRange) -> list:
    """Values at the edges of ``r`` (accepted)."""
    if r.kind == "bool":
        return [True, False, np.bool_(False)]
    out = list(r.also)
    if r.low is not None and not r.low_open:
        out += [r.low, np.int64(r.low)] if r.kind == "int" else [float(r.low), np.float64(r.low)]
    if r.high is not None and not r.high_open:
        out.append(float(r.high))
    if r.infinite:
        out.append(math.inf)
    return out


# the values of the reported failures, then every key of every table with values just outside its range
REPORTED = [
    ("hmm", "passes", 0),  # mid-fit TypeError before
    ("hmm", "passes", 1.5),  # accepted silently before
    ("hmm", "merge_candidates", -1),
    ("mixture", "delete_max_absorb", 0),  # mid-fit numpy ValueError before
    ("mixture", "accept_rtol", -1),  # let a mixture merge everything into one cluster before
    ("topic", "birth_n_new", 0),  # numpy "argmax of an empty sequence" mid-fit before
    ("topic", "birth_n_new", -1),
    ("topic", "accept_rtol", -1e-300),
]
CASES = REPORTED + [(f, k, v) for f, m in MANAGERS.items() for k, r in m.OPTION_RANGES.items() for v in _bad_values(r)]


@pytest.fixture
def no_work(monkeypatch):
    """Records every fit initialisation (the first work of a fit, before any lap)."""
    calls = []
    orig = VBEstimator._initialize

    def spy(self, *a, **kw):
        calls.append(type(self).__name__)
        return orig(self, *a, **kw)

    monkeypatch.setattr(VBEstimator, "_initialize", spy)
    return calls


@pytest.mark.parametrize("family, key, value", CASES, ids=[f"{f}-{k}-{v!r}" for f, k, v in CASES])
def test_bad_move_option_refused_before_any_work(no_work, family, key, value):
    X, kw = _data(family)
    laps = []
    for cls in ESTIMATORS[family]:
        est = cls(n_components=2, max_laps=3, move_options={key: value}, callback=lambda m, info: laps.append(info))
        with pytest.raises(ParameterError, match=rf"`move_options\['{key}'\]` must be ") as exc:
            est.fit(X, **kw)
        assert MANAGERS[family].OPTION_RANGES[key].describe() in str(exc.value)
        assert not hasattr(est, "state_")
    assert no_work == [] and laps == []
    # the manager refuses it too (a MoveConfig built by hand)
    with pytest.raises(ParameterError, match=rf"move_options\['{key}'\]"):
        MANAGERS[family].check_options({key: value})


@pytest.mark.parametrize("family", list(MANAGERS))
@pytest.mark.parametrize("options", ["x", ["passes"], 3, ("accept_rtol", 0.1)])
def test_move_options_not_a_dict(no_work, family, options):
    X, kw = _data(family)
    for cls in ESTIMATORS[family]:
        with pytest.raises(ParameterError, match="`move_options` must be a dict or None"):
            cls(n_components=2, max_laps=3, move_options=options).fit(X, **kw)
        with pytest.raises(ParameterError, match="move_options"):
            cls(n_components=2, max_laps=3, move_options=options).partial_fit(X, **kw)
    assert no_work == []


@pytest.mark.parametrize("family", list(MANAGERS))
def test_every_option_has_a_declared_range(family):
    """No option without a range: the table and the defaults have the same keys, and every
    default is in its range."""
    mgr = MANAGERS[family]
    assert list(mgr.OPTION_RANGES) == list(mgr.DEFAULT_OPTIONS)
    for key, default in mgr.DEFAULT_OPTIONS.items():
        assert isinstance(mgr.OPTION_RANGES[key], OptionRange), key
        assert mgr.OPTION_RANGES[key].allows(default), (key, default)
    assert mgr.check_options(None) == {}
    assert mgr.check_options(dict(mgr.DEFAULT_OPTIONS)) == mgr.DEFAULT_OPTIONS


@pytest.mark.parametrize("family", list(MANAGERS))
def test_edges_of_the_ranges_accepted(family):
    mgr = MANAGERS[family]
    for key, r in mgr.OPTION_RANGES.items():
        for v in _edge_values(r):
            assert mgr.check_options({key: v}) == {key: v}, (key, v)


def test_accept_rtol_never_accepts_a_lower_objective():
    """Every accepted rtol keeps the rule ``ΔL > rtol |L|`` from accepting a decrease."""
    for rtol in (0.0, 1e-300, 1e-10, 0.5):
        assert ACCEPT_RTOL_RANGE.allows(rtol)
        for before in (-1e6, -1.0, 0.0, 3.0):
            assert not accepts(before, np.nextafter(before, -np.inf), rtol)
            assert not accepts(before, before, rtol)
    for rtol in (-1e-300, -1.0, 1.0, math.nan, math.inf):
        assert not ACCEPT_RTOL_RANGE.allows(rtol)


def test_edge_values_fit():
    """Options at the edges of their ranges run (a fit from a few clusters with all three moves)."""
    X = np.concatenate([np.random.default_rng(0).standard_normal((150, 2)) + 5.0 * k for k in range(3)])
    opts = {"accept_rtol": 0.0, "birth_n_fresh": 2, "birth_n_seeds": 2, "birth_max_subsample": 4, "birth_create_iters": 0,
            "birth_refine_iters": 0, "birth_abandon_loss": None, "birth_seed_rows": 1, "merge_allpairs_max_K": 2,
            "merge_max_scored_pairs": 0, "merge_neighbours": 1, "delete_max_absorb": 1, "delete_refine_iters": 1,
            "delete_carry_ratio": None, "delete_sample_budget": 0.0}
    for algorithm in ("full", "memoized"):
        m = fit_quietly(DPMixture(n_components=4, algorithm=algorithm, n_batches=3, max_laps=6, tol=0, random_state=0, move_options=opts), X)
        assert np.isfinite(m.elbo_)
