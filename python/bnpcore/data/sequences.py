"""Sequences given hmmlearn-style as ``(X, lengths)`` or as a list of 2-D arrays.

A sequence source is a :class:`~bnpcore.data.BatchSource` with ``segment == "sequence"``:
``get(b)`` returns a :class:`~bnpcore.data.SeqBatch` of **whole sequences**, the rows ``X``
(C-contiguous float64) and the ``seq_range`` offset array. Batches are contiguous
ranges of sequences balanced by row count (:func:`~bnpcore.data.balanced_bounds`) and are
never shuffled: the rows of a sequence are one Markov chain.
"""

from __future__ import annotations

import numpy as np

from bnpcore._validation import check_array, check_lengths, is_sequence_list
from bnpcore.data._base import SeqBatch, balanced_bounds
from bnpcore.data.sources import NpyFile, _check_lazy_2d
from bnpcore.exceptions import DataError, ParameterError, ShapeError

__all__ = ["SequenceBatches", "sequence_source"]


def _is_lazy(X) -> bool:
    return isinstance(X, (np.memmap, NpyFile)) or (isinstance(X, np.ndarray) and isinstance(X.base, np.memmap))


class SequenceBatches:
    """B contiguous batches of whole sequences.

    Parameters
    ----------
    X : array-like of shape (n_rows, n_features), numpy.memmap, or list of 2-D arrays
        The rows of all sequences, concatenated (hmmlearn's convention), or one 2-D array per
        sequence (then ``lengths`` must be None; they are concatenated once). In-memory data
        are validated once, here; a ``numpy.memmap`` (or :class:`~bnpcore.data.sources.NpyFile`)
        is validated one batch at a time when visited and never copied whole.
    lengths : array-like of int, shape (n_seqs,), or None
        Length of every sequence; positive integers summing to ``len(X)``. None is one
        sequence of all rows.
    n_batches : int
        B, at most the number of sequences.
    n_features : int or None
        Required number of columns (a fitted model's).
    name : str
        Argument name used in error messages.
    obs : str or None
        Observation model the rows are for; decides what happens to scipy.sparse ``X`` (or
        sparse sequences of a list): refused with a :class:`~bnpcore.exceptions.DataError` for
        the Gaussian and auto-regressive models, densified for ``"mult"``/``"bern"`` and when
        None (:func:`~bnpcore._validation.densify_sparse_for_dense_kernel`: the HMMs'
        forward-backward kernels read dense rows).

    Attributes
    ----------
    lengths : ndarray of int64, shape (n_seqs,)
    seq_range : ndarray of int64, shape (n_seqs + 1,)
        Offsets of the sequences in ``X``.
    bounds : ndarray of int64, shape (n_batches + 1,)
        Batch b holds sequences ``bounds[b]:bounds[b+1]``.
    check_data : callable(X, name) or None
        An extra check applied to every batch's rows when read (the observation model's).

    Raises
    ------
    ShapeError, DataError, NonFiniteError
        Bad ``X`` or ``lengths`` (sparse ``X`` for an ``obs`` that needs dense data) (see :func:`~bnpcore._validation.check_lengths`), naming the
        argument.
    ParameterError
        ``lengths`` given with a list of sequences, or ``n_batches`` above the number of
        sequences.
    """

    segment = "sequence"
    shuffles = False

    def __init__(self, X, lengths=None, n_batches: int = 1, *, n_features: int | None = None, name: str = "X", obs: str | None = None):
        self.name = name
        self.check_data = None
        if isinstance(X, (list, tuple)) and not X:
            raise ShapeError(f"`{name}` is an empty list of sequences")
        if is_sequence_list(X):
            if lengths is not None:
                raise ParameterError("`lengths` must be None when `X` is a list of sequences (their lengths are their row counts)")
            parts = []
            for s, seq in enumerate(X):
                part = check_array(seq, name=f"{name}[{s}]", n_features=n_features, obs=obs)
                if n_features is None:
                    n_features = part.shape[1]
                parts.append(part)
            lengths = [p.shape[0] for p in parts]
            X = np.concatenate(parts, axis=0)
            self._lazy = False
        elif _is_lazy(X):
            _check_lazy_2d(X, name, n_features)
            self._lazy = True
        else:
            X = check_array(X, name=name, n_features=n_features, obs=obs)
            self._lazy = False
        self.X = X
        n = int(X.shape[0])
        self.lengths = np.array([n], dtype=np.int64) if lengths is None else check_lengths(lengths, n, rows_name=name)
        self.seq_range = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.bounds = balanced_bounds(self.lengths, n_batches, what="sequences")

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_segments(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def __len__(self) -> int:
        return int(self.bounds.shape[0] - 1)

    def batch_size(self, b: int) -> int:
        """Rows (time steps) of batch ``b``."""
        return int(self.seq_range[self.bounds[b + 1]] - self.seq_range[self.bounds[b]])

    def _seqs(self, s0: int, s1: int, label: str) -> SeqBatch:
        r0, r1 = int(self.seq_range[s0]), int(self.seq_range[s1])
        try:
            rows = self.X[r0:r1]
        except DataError as exc:  # a file read by NpyFile: deleted, changed or truncated
            raise DataError(f"{exc} (reading {label})") from None
        if self._lazy:
            rows = check_array(rows, name=label, n_features=self.n_features)
        if self.check_data is not None:
            self.check_data(rows, label)
        return SeqBatch(rows, self.seq_range[s0 : s1 + 1] - r0)

    def get(self, b: int) -> SeqBatch:
        """Batch ``b``: sequences ``bounds[b]:bounds[b+1]`` (their rows are a view of an in-memory ``X``)."""
        s0, s1 = int(self.bounds[b]), int(self.bounds[b + 1])
        return self._seqs(s0, s1, f"{self.name} (batch {b}, sequences {s0}-{s1})")

    def sample_for_init(self, max_rows: int, rng) -> SeqBatch:
        """Whole sequences with at most ``max_rows`` rows in all, for default priors and initial states.

        All sequences if they fit; otherwise sequences taken in a uniformly random order while
        they fit, returned in data order. If not even one sequence fits, the first ``max_rows``
        rows of one random sequence (a prefix of a sequence is a sequence).
        """
        if max_rows < 1:
            raise ParameterError(f"`max_rows` must be >= 1, got {max_rows}")
        if self.n_rows <= max_rows:
            return self._seqs(0, self.n_segments, self.name)
        order = rng.permutation(self.n_segments)
        total = np.cumsum(self.lengths[order])
        # the longest prefix of the random order that fits
        chosen = np.sort(order[: int(np.searchsorted(total, max_rows, side="right"))])
        label = f"{self.name} (initialisation subsample)"
        if chosen.size == 0:
            s = int(order[0])
            r0 = int(self.seq_range[s])
            rows = check_array(self.X[r0 : r0 + max_rows], name=label, n_features=self.n_features)
            return SeqBatch(rows, np.array([0, rows.shape[0]], dtype=np.int64))
        parts = [self.X[self.seq_range[s] : self.seq_range[s + 1]] for s in chosen]
        rows = check_array(np.concatenate(parts, axis=0), name=label, n_features=self.n_features)
        return SeqBatch(rows, np.concatenate([[0], np.cumsum(self.lengths[chosen])]).astype(np.int64))


def sequence_source(X, lengths=None, n_batches: int = 1, *, n_features: int | None = None, obs: str | None = None) -> SequenceBatches:
    """The sequence source for ``X`` (and ``lengths``): a :class:`SequenceBatches`.

    ``X`` may also be the path of a ``.npy`` file (read by explicit row-range reads, one batch
    at a time). ``obs`` decides what happens to scipy.sparse ``X`` (see :class:`SequenceBatches`).

    Examples
    --------
    >>> import numpy as np
    >>> from bnpcore.data import sequence_source
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> src = sequence_source(X, lengths=[3, 3, 4], n_batches=2)
    >>> src.bounds  # whole sequences, balanced by rows: 3 + 3 | 4
    array([0, 2, 3])
    >>> batch = src.get(0)
    >>> batch.seq_range, batch.X.shape
    (array([0, 3, 6]), (6, 2))
    """
    import os

    if isinstance(X, (str, os.PathLike)):
        from bnpcore.data.sources import open_npy_rows

        X = open_npy_rows(X, name="X")
    return SequenceBatches(X, lengths, n_batches, n_features=n_features, obs=obs)
