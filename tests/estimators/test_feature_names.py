"""feature_names_in_ from a DataFrame, and scikit-learn's checks on the names at predict time
(issue 14 item 2)."""

import warnings

import bnpcore
import numpy as np
import pytest

pd = pytest.importorskip("pandas")


def _fit(X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        return bnpcore.DPMixture(n_components=3, random_state=0, **kw).fit(X)


def _frame():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(100, 2)), rng.normal(size=(100, 2)) + 6.0]
    return pd.DataFrame(X, columns=["height", "weight"])


def test_names_recorded_and_checked():
    df = _frame()
    model = _fit(df)
    assert list(model.feature_names_in_) == ["height", "weight"]
    labels = model.predict(df)
    assert labels.shape == (200,)
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(df.rename(columns={"weight": "mass"}))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        model.predict(df.to_numpy())
    # refitting on an array drops the names
    model.fit(df.to_numpy())
    assert not hasattr(model, "feature_names_in_")
    with pytest.warns(UserWarning, match="fitted without feature names"):
        model.score(df)


def test_no_names_for_arrays_or_non_string_columns():
    df = _frame()
    assert not hasattr(_fit(df.to_numpy()), "feature_names_in_")
    assert not hasattr(_fit(pd.DataFrame(df.to_numpy())), "feature_names_in_")


def test_partial_fit_records_names_on_the_first_call(tmp_path):
    df = _frame()
    model = bnpcore.DPMixture(n_components=2, random_state=0)
    model.partial_fit(df.iloc[:100])
    assert list(model.feature_names_in_) == ["height", "weight"]
    model.partial_fit(df.iloc[100:])
    with pytest.raises(ValueError, match="feature names should match"):
        model.partial_fit(df.rename(columns={"height": "h"}))
    model.save(tmp_path / "m.npz")
    assert list(bnpcore.load(tmp_path / "m.npz").feature_names_in_) == ["height", "weight"]
