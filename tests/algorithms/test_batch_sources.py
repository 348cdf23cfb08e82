"""Bad input to the batched algorithms: clear ValueErrors naming the argument or batch, and the
model left as it was before the offending batch."""


import numpy as np
import pytest
from _helpers import fit_quietly, memo, seeded_data, tree_total
from bnpcore import DPMixture
from bnpcore.exceptions import (
    DataError,
    NonFiniteError,
    ParameterError,
    ShapeError,
)


def _memo(**kw):
    """The shared memoized estimator with this module's small defaults."""
    kw.setdefault("n_components", 4)
    kw.setdefault("random_state", 0)
    return memo(**kw)


def test_more_batches_than_rows(tmp_path):
    X = seeded_data("gauss", n=5)
    with pytest.raises(ParameterError, match="n_batches"):
        _memo(n_batches=6, n_components=2).fit(X)
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(ParameterError, match="n_batches"):
        _memo(n_batches=6, n_components=2).fit(str(tmp_path / "x.npy"))
    with pytest.raises(ParameterError, match="n_batches"):
        DPMixture(algorithm="stochastic", n_batches=6, n_components=2).fit(X)


def test_unknown_algorithm():
    with pytest.raises(ParameterError, match="algorithm"):
        DPMixture(algorithm="sgd").fit(seeded_data("gauss", n=20))


def test_batches_with_different_numbers_of_columns(tmp_path):
    X = seeded_data("gauss", n=90)
    parts = [X[:30], X[30:60], np.hstack([X[60:], X[60:, :1]])]
    with pytest.raises(ShapeError, match="batch 2 of `X` has 4 columns but batch 0 has 3"):
        _memo().fit(parts)
    np.save(tmp_path / "b2.npy", parts[2])
    with pytest.raises(ShapeError, match="batch 2"):
        _memo().fit([parts[0], parts[1], str(tmp_path / "b2.npy")])
    with pytest.raises(ShapeError, match=r"X \(batch 2\)"):
        DPMixture(n_components=3).fit(p for p in parts)
    est = fit_quietly(_memo(n_batches=3, max_laps=2), X)
    with pytest.raises(ShapeError, match="fitted with 3"):
        est.partial_fit(parts[2])
    with pytest.raises(ValueError):
        _memo().fit([X, X[:, 0]])  # 1-D second element: an array-like, not a batch list


def test_non_finite_value_in_a_later_batch_of_a_memmap(tmp_path):
    """Fit 2 clean laps, then a NaN appears in batch 3 of the file: the warm-started fit raises
    naming batch 3, and the model is exactly as it was before that batch was visited."""
    X = seeded_data("gauss", n=400)
    path = tmp_path / "x.npy"
    np.save(path, X)
    est = fit_quietly(_memo(n_batches=4, max_laps=2, tol=0), str(path))
    before = [m.copy() for m in est.state_.memos]
    mm = np.load(path, mmap_mode="r+")
    mm[350, 1] = np.nan  # rows 300-400 are batch 3
    mm.flush()
    del mm
    est.set_params(warm_start=True)
    with pytest.raises(NonFiniteError, match=r"batch 3") as info:
        est.fit(str(path))
    assert isinstance(info.value, ValueError)
    st = est.state_
    assert np.array_equal(st.memos[3].N, before[3].N)  # batch 3 untouched
    assert st.lap == 2
    total = tree_total(st.memos)  # G is the fixed-tree sum of the memos
    assert np.array_equal(total.N, st.stats.N) and np.array_equal(total.S, st.stats.S)
    assert est.summaries_ is st.stats
    assert np.isfinite(est.score(X))


def test_non_finite_value_in_first_lap_of_fresh_fit(tmp_path):
    X = seeded_data("gauss", n=400)
    X[390, 0] = np.inf
    path = tmp_path / "x.npy"
    np.save(path, X)
    with pytest.raises(NonFiniteError, match="batch 3"):
        fit_quietly(_memo(n_batches=4, max_laps=2, init_subsample=100), str(path))


def test_non_finite_in_a_stream_and_in_partial_fit():
    X = seeded_data("gauss", n=300)
    parts = np.array_split(X, 3)
    bad = parts[2].copy()
    bad[5, 0] = np.nan
    est = DPMixture(n_components=3, random_state=0)
    with pytest.raises(NonFiniteError, match=r"batch 2"):
        est.fit(p for p in [parts[0], parts[1], bad])
    assert len(est.state_.frozen) == 1 and est.summaries_.N.sum() == pytest.approx(200)  # the two batches, as one running sum
    snapshot = est.summaries_.copy()
    with pytest.raises(NonFiniteError):
        est.partial_fit(bad)
    assert np.array_equal(est.summaries_.N, snapshot.N)
    est.partial_fit(parts[2])
    assert est.summaries_.N.sum() == pytest.approx(300)


def test_out_of_support_value_in_a_later_batch_names_it(tmp_path):
    X = seeded_data("mult", n=200)
    X[180, 0] = -1.0
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(DataError, match="batch 3"):
        fit_quietly(_memo(obs="mult", n_batches=4, max_laps=2, init_subsample=50), str(tmp_path / "x.npy"))


def test_bad_paths_and_iterables(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        _memo().fit(str(tmp_path / "absent.npy"))
    (tmp_path / "junk.npy").write_bytes(b"junk")
    with pytest.raises(DataError, match="not a readable"):
        _memo().fit(str(tmp_path / "junk.npy"))
    with pytest.raises(ShapeError, match="empty"):
        DPMixture().fit(iter([]))
    with pytest.raises(ParameterError, match="full"):
        DPMixture(algorithm="full").fit([seeded_data("gauss", n=20), seeded_data("gauss", n=20)])
    with pytest.raises(ParameterError, match="partial_fit"):
        DPMixture(algorithm="stochastic").partial_fit(seeded_data("gauss", n=20))


def test_truncated_npy_file(tmp_path):
    X = seeded_data("gauss", n=100)
    np.save(tmp_path / "x.npy", X)
    raw = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "x.npy").write_bytes(raw[:-100])
    with pytest.raises(DataError, match=r"x\.npy"):
        _memo(n_batches=4).fit(str(tmp_path / "x.npy"))
