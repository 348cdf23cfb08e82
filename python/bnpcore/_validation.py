"""Input validation shared by the estimators."""

from __future__ import annotations

import numbers

import numpy as np

from bnpcore.exceptions import DataError, NonFiniteError, ParameterError, ShapeError

__all__ = ["check_array", "check_param", "check_random_state"]


def check_array(X, name: str = "X", n_features: int | None = None, min_rows: int = 1) -> np.ndarray:
    """Return ``X`` as a C-contiguous float64 2-D array, or raise a clear error.

    scipy.sparse input is densified (bag-of-words batches are small per row).
    """
    if hasattr(X, "toarray") and hasattr(X, "nnz"):
        X = X.toarray()
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise DataError(f"`{name}` could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise DataError(f"`{name}` must be numeric, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise DataError(f"`{name}` must be real-valued, got dtype {arr.dtype}")
    if arr.ndim == 1:
        raise ShapeError(
            f"`{name}` must be 2-D (n_samples, n_features), got a 1-D array of shape {arr.shape}; "
            "use X.reshape(-1, 1) for a single feature"
        )
    if arr.ndim != 2:
        raise ShapeError(f"`{name}` must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ShapeError(f"`{name}` has {arr.shape[0]} rows; at least {min_rows} required")
    if arr.shape[1] == 0:
        raise ShapeError(f"`{name}` has no columns")
    if n_features is not None and arr.shape[1] != n_features:
        raise ShapeError(f"`{name}` has {arr.shape[1]} columns but the model was fitted with {n_features}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise NonFiniteError(f"`{name}` contains NaN or infinity (first at row {bad[0]}, column {bad[1]})")
    return arr


def check_random_state(seed) -> np.random.SeedSequence:
    """Turn ``random_state`` (None, int, SeedSequence or Generator) into a SeedSequence."""
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(0, 2**63 - 1)))
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        if seed < 0:
            raise ParameterError(f"`random_state` must be a non-negative integer, got {seed}")
        return np.random.SeedSequence(int(seed))
    raise ParameterError(f"`random_state` must be None, an int or a numpy Generator, got {seed!r}")


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
