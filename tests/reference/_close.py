"""Comparison helper shared by the top-L test modules."""

import numpy as np


def close(a, b, rtol=1e-10):
    """max |a - b| <= rtol * max(1, max |b|) (one scale for the whole array)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    return np.abs(a - b).max(initial=0.0) <= rtol * scale
