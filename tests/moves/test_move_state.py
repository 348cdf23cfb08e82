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


def test_sparse_merge_candidates_follow_the_rows_and_resume_exactly(tmp_path, monkeypatch):
    """With L-sparse rows the merge move scores only the pairs some row held together in the
    last lap (plus every pair with a cluster born since): that record is carried state, so
    3 laps + save/load + 3 laps == 6 laps, the same pairs scored in every lap, with the default
    moves."""
    import bnpcore
    from bnpcore import DPMixture
    from bnpcore.datasets import make_gaussian_mixture
    from bnpcore.moves import merge as merge_mod

    X, _ = make_gaussian_mixture(n_samples=3000, n_features=2, n_components=6, separation=3.0, random_state=5)
    kw = dict(n_components=12, algorithm="memoized", n_batches=3, random_state=0, tol=0, top_l=2, dense_laps=0)
    scored = []
    orig = merge_mod.merge_scores

    def spy(model, G, pairs=None):
        scored.append((G.K, None if pairs is None else sorted(zip(*(np.asarray(p).tolist() for p in pairs)))))
        return orig(model, G, pairs)

    monkeypatch.setattr(merge_mod, "merge_scores", spy)
    six = fit_quietly(DPMixture(max_laps=6, **kw), X)
    straight, scored[:] = list(scored), []
    three = fit_quietly(DPMixture(max_laps=3, **kw), X)
    three.save(tmp_path / "m.npz")
    again = bnpcore.load(tmp_path / "m.npz")
    again.set_params(warm_start=True)
    fit_quietly(again, X)
    assert scored == straight
    for k in ("lap", "elbo", "n_components"):
        assert np.array_equal(again.history_[k], six.history_[k]), k
    assert again.moves_log_ == six.moves_log_
    # the restriction was in force: some lap scored fewer pairs than all of them
    assert any(p is not None and len(p) < k * (k - 1) // 2 for k, p in straight if k > 2)
    co = decode_state(six.moves_manager_.get_state()["moves"]["merge"]["co"])
    assert len(co["pairs"]) > 0
