"""The state the moves carry between laps round-trips exactly (get_state / set_state)."""

import numpy as np
from _helpers import fit_quietly, memo
from bnpcore.moves._base import decode_state, encode_state
from bnpcore.moves.manager import MoveManager


def _equal(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_encode_decode_round_trip():
    obj = {(1, 2): (0.5, 3.0, 7), 4: [np.arange(3.0), None, "x"], "k": {0: (np.eye(2), 1)}}
    assert _equal(decode_state(encode_state(obj)), obj)


def test_manager_state_round_trips_and_is_kept_in_fit_state():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(m, 1.0, size=(150, 2)) for m in (-6.0, 0.0, 6.0)])
    est = fit_quietly(memo(n_components=2, n_batches=3, random_state=1, max_laps=3, tol=0), X)
    mgr = est.moves_manager_
    state = mgr.get_state()
    assert _equal(est.state_.moves_state, state)
    assert set(state["moves"]) == {"birth", "merge", "delete"}
    fresh = MoveManager(mgr.config)
    fresh.set_state(state)
    assert _equal(fresh.get_state(), state)
    assert fresh.structure_version == mgr.structure_version
