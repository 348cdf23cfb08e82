"""Fixed batches of rows (spec 01 §5.3: data are split once into B fixed batches)."""

from __future__ import annotations

import numpy as np

from bnpcore._validation import check_array
from bnpcore.exceptions import ParameterError

__all__ = ["ArrayBatches", "make_batches"]


class ArrayBatches:
    """B contiguous, fixed batches over an array (in memory or a ``numpy.memmap``).

    Batches are views of ``X``; each is converted to C-contiguous float64 only when visited, so
    a memory-mapped dataset is never copied whole.
    """

    def __init__(self, X, n_batches: int, validated: bool = False):
        n = X.shape[0]
        if n_batches < 1:
            raise ParameterError(f"`n_batches` must be >= 1, got {n_batches}")
        if n_batches > n:
            raise ParameterError(f"`n_batches`={n_batches} exceeds the number of rows ({n})")
        self.X = X
        self.n_batches = int(n_batches)
        self.bounds = np.linspace(0, n, n_batches + 1).round().astype(np.int64)
        self._validated = validated

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def __len__(self) -> int:
        return self.n_batches

    def get(self, b: int) -> np.ndarray:
        lo, hi = self.bounds[b], self.bounds[b + 1]
        Xb = self.X[lo:hi]
        if self._validated and isinstance(Xb, np.ndarray) and Xb.dtype == np.float64 and Xb.flags.c_contiguous:
            return Xb
        try:
            return check_array(Xb, name=f"X (batch {b}, rows {lo}-{hi})")
        except ValueError as exc:
            raise type(exc)(f"{exc} [batch {b}]") from None

    def sample_for_init(self, max_rows: int, rng) -> np.ndarray:
        """Rows used to choose the initial clusters (all rows if there are few)."""
        n = self.n_rows
        if n <= max_rows:
            return check_array(self.X, name="X")
        idx = np.sort(rng.choice(n, size=max_rows, replace=False))
        return check_array(self.X[idx], name="X")


def make_batches(X, n_batches: int) -> ArrayBatches:
    return ArrayBatches(X, n_batches)
