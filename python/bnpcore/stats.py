"""Additive summary statistics with stable cluster uids (spec 01 §3.5, STYLE §3).

A :class:`SuffStats` holds, for K clusters, the counts ``N`` (K,), data statistics ``S``
(K, stat_dim), assignment entropies ``H`` (K,), the scalar ``h`` = Σ h(x_n), and the integer
``uids`` the columns refer to. It is the one container used for batch memos, whole-dataset
aggregates and proposals; it supports ``+``/``-`` (uids must match) and the column operations
moves need (permute, drop, merge, replace). Models may attach extra per-cluster or scalar
fields in ``extra`` (dict of arrays), which follow the same column operations when their first
axis has length K.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SuffStats"]


@dataclass
class SuffStats:
    N: np.ndarray
    S: np.ndarray
    H: np.ndarray
    h: float
    uids: np.ndarray
    extra: dict = field(default_factory=dict)

    @property
    def K(self) -> int:
        return int(self.N.shape[0])

    @classmethod
    def zeros(cls, uids, stat_dim: int) -> SuffStats:
        k = len(uids)
        return cls(np.zeros(k), np.zeros((k, stat_dim)), np.zeros(k), 0.0, np.asarray(uids, dtype=np.int64).copy())

    def copy(self) -> SuffStats:
        return SuffStats(
            self.N.copy(), self.S.copy(), self.H.copy(), float(self.h), self.uids.copy(),
            {k: np.array(v, copy=True) for k, v in self.extra.items()},
        )

    def _check(self, other: SuffStats):
        if not np.array_equal(self.uids, other.uids):
            raise ValueError("summaries refer to different clusters (uids differ)")

    def __add__(self, other: SuffStats) -> SuffStats:
        self._check(other)
        return SuffStats(self.N + other.N, self.S + other.S, self.H + other.H, self.h + other.h, self.uids.copy())

    def __sub__(self, other: SuffStats) -> SuffStats:
        self._check(other)
        return SuffStats(self.N - other.N, self.S - other.S, self.H - other.H, self.h - other.h, self.uids.copy())

    def positions(self, uids) -> np.ndarray:
        """Column positions of the given uids (KeyError if one is absent)."""
        where = {int(u): i for i, u in enumerate(self.uids)}
        return np.array([where[int(u)] for u in uids], dtype=np.int64)

    def _map_extra(self, fn):
        return {k: (fn(v) if np.ndim(v) >= 1 and len(v) == self.K else np.array(v, copy=True)) for k, v in self.extra.items()}

    def take(self, order) -> SuffStats:
        """Columns in the given positional order (a permutation or a subset)."""
        order = np.asarray(order, dtype=np.int64)
        return SuffStats(self.N[order], self.S[order], self.H[order], float(self.h), self.uids[order], self._map_extra(lambda v: v[order]))

    def drop(self, positions) -> SuffStats:
        keep = np.setdiff1d(np.arange(self.K), np.asarray(positions, dtype=np.int64))
        return self.take(keep)

    def merge(self, a: int, b: int, h_merged: float) -> SuffStats:
        """Merge column ``b`` into column ``a`` (positions); ``H[a]`` becomes ``h_merged``."""
        out = self.copy()
        out.N[a] += out.N[b]
        out.S[a] += out.S[b]
        out.H[a] = h_merged
        return out.drop([b])

    def append(self, N, S, H, uids) -> SuffStats:
        return SuffStats(
            np.concatenate([self.N, N]), np.concatenate([self.S, S]), np.concatenate([self.H, H]),
            float(self.h), np.concatenate([self.uids, np.asarray(uids, dtype=np.int64)]),
        )

    def to_dict(self, prefix: str = "") -> dict:
        return {f"{prefix}N": self.N, f"{prefix}S": self.S, f"{prefix}H": self.H, f"{prefix}h": np.array(self.h), f"{prefix}uids": self.uids}

    @classmethod
    def from_dict(cls, d: dict, prefix: str = "") -> SuffStats:
        return cls(
            np.asarray(d[f"{prefix}N"], dtype=np.float64), np.asarray(d[f"{prefix}S"], dtype=np.float64),
            np.asarray(d[f"{prefix}H"], dtype=np.float64), float(d[f"{prefix}h"]), np.asarray(d[f"{prefix}uids"], dtype=np.int64),
        )
