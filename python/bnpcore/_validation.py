"""Input validation shared by the estimators."""

from __future__ import annotations

import numbers

import numpy as np

from bnpcore.exceptions import DataError, NonFiniteError, ParameterError, ShapeError

__all__ = ["check_array", "check_param", "check_random_state"]


class _NonNumericObjectError(DataError, TypeError):
    """An object array holds something that is not a number (a ``TypeError`` too, as in numpy)."""


def _is_missing(value) -> bool:
    return value is None or type(value).__name__ in ("NAType", "NaTType")


def _first_bad(mask: np.ndarray) -> str:
    row, col = np.argwhere(mask)[0]
    return f"first at row {row}, column {col}"


def _from_dataframe(X):
    """A pandas (or pandas-like) DataFrame whose columns are all numeric or boolean — numpy
    dtypes or the nullable extension dtypes ``Float64``, ``Int64``, ``boolean`` — becomes a
    float64 array with missing values (``pd.NA``) as NaN; anything else is returned unchanged."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "to_numpy") or not hasattr(X, "columns"):
        return X
    try:
        kinds = [dt.kind for dt in dtypes]
    except (AttributeError, TypeError):
        return X
    if not kinds or any(kind not in "biuf" for kind in kinds):
        return X
    return X.to_numpy(dtype=np.float64, na_value=np.nan)


def _object_to_float(arr: np.ndarray, name: str) -> np.ndarray:
    """Convert an object array of numbers (e.g. ``X.astype(object)``) to float64."""
    try:
        return arr.astype(np.float64)
    except TypeError as exc:
        missing = np.frompyfunc(_is_missing, 1, 1)(arr).astype(bool)
        if missing.any():
            raise NonFiniteError(f"`{name}` contains a missing value (None or pd.NA) ({_first_bad(missing)})") from None
        raise _NonNumericObjectError(f"`{name}` must be numeric; converting its object array failed: {exc}") from None
    except ValueError as exc:
        raise DataError(f"`{name}` must be numeric; converting its object array failed: {exc}") from None


def check_array(X, name: str = "X", n_features: int | None = None, min_rows: int = 1) -> np.ndarray:
    """Return ``X`` as a C-contiguous float64 2-D array, or raise a clear error.

    Accepted: numeric and boolean arrays and array-likes, object arrays of numbers (converted),
    pandas DataFrames including the nullable dtypes ``Float64``, ``Int64`` and ``boolean``
    (``pd.NA`` is reported as a missing value). scipy.sparse input is densified (bag-of-words
    batches are small per row). Error messages follow scikit-learn's wording where its
    estimator checks look for it.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    name : str
        Argument name used in error messages.
    n_features : int or None
        Required number of columns (the fitted model's ``n_features_in_``).
    min_rows : int

    Returns
    -------
    ndarray of shape (n_samples, n_features), float64, C-contiguous

    Raises
    ------
    ShapeError
        Not 2-D, too few rows, no columns, or not ``n_features`` columns.
    DataError
        Not numeric (strings, objects that are not numbers; the latter is a ``TypeError``
        too), or complex.
    NonFiniteError
        NaN, infinity or a missing value.
    """
    if hasattr(X, "toarray") and hasattr(X, "nnz"):
        X = X.toarray()
    X = _from_dataframe(X)
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise DataError(f"`{name}` could not be converted to an array: {exc}") from exc
    if arr.dtype == object:
        arr = _object_to_float(arr, name)
    if np.iscomplexobj(arr):
        raise DataError(f"Complex data not supported: `{name}` has dtype {arr.dtype}; pass real values")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise DataError(f"`{name}` must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 1:
        raise ShapeError(
            f"`{name}` must be 2-D (n_samples, n_features), got a 1-D array of shape {arr.shape}. "
            f"Reshape your data either using {name}.reshape(-1, 1) if it has a single feature "
            f"or {name}.reshape(1, -1) if it contains a single sample"
        )
    if arr.ndim != 2:
        raise ShapeError(f"`{name}` must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ShapeError(f"`{name}`: found array with {arr.shape[0]} sample(s) (shape={arr.shape}) while a minimum of {min_rows} is required.")
    if arr.shape[1] == 0:
        raise ShapeError(f"`{name}`: found array with 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if n_features is not None and arr.shape[1] != n_features:
        # scikit-learn's wording ("X has 1 features, but ... is expecting 4 features as input")
        raise ShapeError(
            f"{name} has {arr.shape[1]} features, but it is expecting {n_features} features as input "
            f"(the model was fitted with {n_features} columns)"
        )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise NonFiniteError(f"`{name}` contains NaN, infinity or a missing value ({_first_bad(~np.isfinite(arr))})")
    return arr


def check_random_state(seed) -> np.random.SeedSequence:
    """Turn ``random_state`` into the :class:`numpy.random.SeedSequence` that seeds a fit.

    * ``None``: fresh entropy from the operating system;
    * an ``int`` ≥ 0: ``SeedSequence(seed)``, the same fit every time;
    * a ``SeedSequence``: used as it is;
    * a ``numpy.random.Generator`` or ``numpy.random.RandomState``: one integer in
      [0, 2**63 − 1) is drawn from it and seeds the ``SeedSequence``. This advances the
      generator, so two fits given the same generator object differ, while a generator
      re-created from the same seed gives the same fit (as in scikit-learn).

    Parameters
    ----------
    seed : None, int, numpy.random.SeedSequence, numpy.random.Generator or numpy.random.RandomState

    Returns
    -------
    numpy.random.SeedSequence

    Raises
    ------
    ParameterError
        For a negative integer or any other type, naming ``random_state``.
    """
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(0, 2**63 - 1)))
    if isinstance(seed, np.random.RandomState):
        return np.random.SeedSequence(int(seed.randint(0, 2**63 - 1, dtype=np.int64)))
    if isinstance(seed, numbers.Integral) and not isinstance(seed, (bool, np.bool_)):
        if seed < 0:
            raise ParameterError(f"`random_state` must be a non-negative integer, got {seed}")
        return np.random.SeedSequence(int(seed))
    raise ParameterError(
        "`random_state` must be None, a non-negative int, a numpy SeedSequence, Generator or RandomState, "
        f"got {seed!r}"
    )


def check_param(name: str, value, *, kind: str, low=None, high=None, low_inclusive=False, options=None, allow_none=False):
    """Validate one scalar parameter; raise :class:`ParameterError` naming it."""
    if value is None and allow_none:
        return value
    if options is not None:
        if value not in options:
            raise ParameterError(f"`{name}` must be one of {sorted(map(str, options))}, got {value!r}")
        return value
    if kind == "int":
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif kind == "real":
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "bool":
        ok = isinstance(value, (bool, np.bool_))
    else:  # pragma: no cover
        raise AssertionError(kind)
    if not ok:
        raise ParameterError(f"`{name}` must be {'an integer' if kind == 'int' else 'a finite number' if kind == 'real' else 'a bool'}, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise ParameterError(f"`{name}` must be {'>=' if low_inclusive else '>'} {low}, got {value!r}")
    if high is not None and value > high:
        raise ParameterError(f"`{name}` must be <= {high}, got {value!r}")
    return value
