"""What ``fit``/``predict`` accept besides float arrays (issue 14, parts 1–3): object arrays of
numbers, pandas DataFrames with nullable dtypes, and every kind of ``random_state``."""

import warnings

import numpy as np
import pandas as pd
import pytest
from bnpcore import DPMixture, FiniteMixture
from bnpcore._validation import check_array, check_random_state
from bnpcore.exceptions import ConvergenceWarning, DataError, NonFiniteError, ParameterError, ShapeError

ESTIMATORS = (DPMixture, FiniteMixture)


def data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-4, 1, (n // 2, 2)), rng.normal(4, 1, (n - n // 2, 2))])


def fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_object_array_of_numbers_fits_like_floats(cls):
    X = data()
    want = fit(cls(n_components=3, max_laps=20, random_state=0), X)
    got = fit(cls(n_components=3, max_laps=20, random_state=0), X.astype(object))
    assert got.elbo_ == want.elbo_
    assert np.array_equal(got.predict(X.astype(object)), want.predict(X))
    mixed = np.array([[1, 2.5], [np.float32(3.0), np.int64(4)]], dtype=object)  # Python and numpy scalars
    np.testing.assert_array_equal(check_array(mixed), [[1.0, 2.5], [3.0, 4.0]])


def test_object_array_with_non_numbers_is_refused():
    X = data().astype(object)
    X[3, 1] = {"a": 1}
    with pytest.raises(DataError, match="`X` must be numeric") as info:
        check_array(X)
    assert isinstance(info.value, TypeError)  # as numpy and scikit-learn report it
    X[3, 1] = "abc"
    with pytest.raises(DataError, match=r"`X` must be numeric.*could not convert"):
        check_array(X)
    for missing in (None, pd.NA):
        X[3, 1] = missing
        with pytest.raises(NonFiniteError, match=r"`X` contains .*missing value.*row 3, column 1"):
            check_array(X)
    X[3, 1] = "2.5"  # a numeric string converts, as in numpy
    assert check_array(X)[3, 1] == 2.5


@pytest.mark.parametrize("dtype", ["Float64", "Int64", "float32", "int64", "boolean"])
def test_pandas_dataframe_with_nullable_dtypes(dtype):
    X = np.round(data() * 3)
    if dtype == "boolean":
        X = X > 0
    df = pd.DataFrame({"a": X[:, 0], "b": X[:, 1]}).astype(dtype)
    got = check_array(df)
    assert got.dtype == np.float64 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, X.astype(np.float64))
    est = fit(DPMixture(n_components=3, max_laps=20, random_state=0), df)
    assert est.n_features_in_ == 2
    assert list(est.feature_names_in_) == ["a", "b"]
    with pytest.warns(UserWarning, match="does not have valid feature names"):  # scikit-learn's rule
        np.testing.assert_array_equal(est.predict(df), est.predict(X.astype(np.float64)))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        np.testing.assert_array_equal(est.score_samples(df), est.score_samples(X.astype(np.float64)))


@pytest.mark.parametrize("dtype", ["Float64", "Int64"])
def test_pandas_missing_value_names_x_and_the_cell(dtype):
    df = pd.DataFrame({"a": [1, 2, 3, 4], "b": [5, 6, 7, 8]}).astype(dtype)
    df.loc[2, "b"] = pd.NA
    with pytest.raises(NonFiniteError, match=r"`X` contains NaN, infinity or a missing value \(first at row 2, column 1\)"):
        check_array(df)
    with pytest.raises(NonFiniteError, match="`X`"):
        DPMixture(n_components=2).fit(df)


def test_masked_entries_are_missing_values_and_never_read():
    X = data()
    hidden = X.copy()
    hidden[5, 1] = 1e300  # the value under the mask must not reach the model
    masked = np.ma.masked_array(hidden, mask=np.zeros(X.shape, dtype=bool))
    masked[5, 1] = np.ma.masked
    with pytest.raises(NonFiniteError, match=r"`X` contains masked \(missing\) values \(first at row 5, column 1\)"):
        check_array(masked)
    est = fit(DPMixture(n_components=3, max_laps=5, random_state=0), X)
    for call in (lambda: est.predict(masked), lambda: est.score_samples(masked), lambda: DPMixture(n_components=2).fit(masked)):
        with pytest.raises(NonFiniteError, match="masked"):
            call()
    # a masked array without masked entries is its data
    unmasked = np.ma.masked_array(X, mask=False)
    np.testing.assert_array_equal(est.score_samples(unmasked), est.score_samples(X))


def test_pandas_mixed_and_string_frames():
    df = pd.DataFrame({"a": pd.array([1.5, 2.5], dtype="Float64"), "b": np.array([1, 2], dtype=np.int32)})
    np.testing.assert_array_equal(check_array(df), [[1.5, 1.0], [2.5, 2.0]])
    with pytest.raises(DataError, match="`X` must be numeric"):
        check_array(pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]}))
    with pytest.raises(ShapeError, match="2-D"):
        check_array(pd.Series([1.0, 2.0], dtype="Float64"))


def test_scikit_learn_wording_of_shape_errors():
    with pytest.raises(ShapeError, match=r"0 feature\(s\) \(shape=\(5, 0\)\) while a minimum of 1 is required"):
        check_array(np.zeros((5, 0)))
    with pytest.raises(ShapeError, match="`X` has 0 rows; at least 1 required"):
        check_array(np.zeros((0, 3)))
    with pytest.raises(ShapeError, match="Reshape your data"):
        check_array(np.zeros(3))
    with pytest.raises(ShapeError, match="X has 1 features, but it is expecting 4 features as input"):
        check_array(np.zeros((2, 1)), n_features=4)
    with pytest.raises(DataError, match="Complex data not supported"):
        check_array(np.ones((2, 2), dtype=complex))


# ---------------------------------------------------------------------------------- random_state


def test_random_state_int_seedsequence_none():
    assert check_random_state(7).entropy == 7
    seq = np.random.SeedSequence(11)
    copy = check_random_state(seq)  # a copy in the same state: the fit's spawning leaves seq alone
    assert copy is not seq and copy.state == seq.state and copy.n_children_spawned == seq.n_children_spawned
    assert check_random_state(np.int32(5)).entropy == 5
    a, b = check_random_state(None), check_random_state(None)
    assert a.entropy != b.entropy


@pytest.mark.parametrize("make", [np.random.default_rng, np.random.RandomState], ids=["Generator", "RandomState"])
def test_random_state_generators_seed_deterministically(make):
    """The same generator state gives the same SeedSequence; using a generator advances it."""
    g1, g2 = make(3), make(3)
    s1, s2 = check_random_state(g1), check_random_state(g2)
    assert s1.entropy == s2.entropy
    assert check_random_state(g1).entropy != s1.entropy  # advanced
    assert check_random_state(make(4)).entropy != s1.entropy


@pytest.mark.parametrize("make", [int, np.random.default_rng, np.random.RandomState, np.random.SeedSequence])
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_estimators_accept_every_random_state(cls, make):
    X = data()
    first = fit(cls(n_components=3, max_laps=10, init="random_from_data", random_state=make(5)), X)
    again = fit(cls(n_components=3, max_laps=10, init="random_from_data", random_state=make(5)), X)
    np.testing.assert_array_equal(first.history_["elbo"], again.history_["elbo"])


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True, np.random.MT19937(0), [1, 2]])
def test_bad_random_state(bad):
    with pytest.raises(ParameterError, match="random_state"):
        check_random_state(bad)
    with pytest.raises(ParameterError, match="random_state"):
        DPMixture(n_components=2, random_state=bad).fit(data())
