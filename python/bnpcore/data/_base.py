"""The batch-source protocol shared by rows, documents and sequences, and the batch splitter.

Every model reads its data through a *batch source*: ``len(source)`` fixed batches (Hughes & Sudderth 2013
§5.3: the data are split once), ``source.get(b)`` returns batch ``b`` validated and ready for
the Rust local step. What a batch is depends on the *segment* the allocation model works on
(``docs/internals.md``):

========== ============================== ============================================
segment    ``source.get(b)``               split into batches
========== ============================== ============================================
row        ``ndarray (n, n_features)``     rows; in-memory mixtures may shuffle rows
document   ``csr_array (n_docs, n_vocab)`` whole documents, contiguous, never shuffled;
                                           ``indptr`` is the ``doc_range`` offset array
sequence   :class:`SeqBatch`               whole sequences, contiguous, never shuffled;
                                           ``seq_range`` offset array
========== ============================== ============================================

Only mixtures may shuffle rows into batches: the rows of a document or a sequence belong
together (a document's tokens share its topic weights, a sequence's rows its state chain).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from bnpcore.exceptions import ParameterError

__all__ = ["SEGMENT_KINDS", "BatchSource", "SeqBatch", "balanced_bounds"]

#: What one segment of rows is: a mixture row, a document, a sequence.
SEGMENT_KINDS = ("row", "document", "sequence")


class SeqBatch(NamedTuple):
    """A batch of whole sequences.

    Attributes
    ----------
    X : ndarray of shape (n_rows, n_features)
        The rows of the sequences, concatenated, C-contiguous float64.
    seq_range : ndarray of int64, shape (n_seqs + 1,)
        Offsets: sequence s is ``X[seq_range[s]:seq_range[s+1]]`` (``seq_range[0] == 0``,
        ``seq_range[-1] == n_rows``).
    """

    X: np.ndarray
    seq_range: np.ndarray

    @property
    def n_seqs(self) -> int:
        return int(self.seq_range.shape[0] - 1)

    @property
    def n_rows(self) -> int:
        """Number of rows (time steps) of all sequences together."""
        return int(self.X.shape[0])

    @property
    def lengths(self) -> np.ndarray:
        """Length of every sequence (hmmlearn's ``lengths``)."""
        return np.diff(self.seq_range)


@runtime_checkable
class BatchSource(Protocol):
    """What the learning algorithms read data from (rows, documents or sequences).

    Attributes
    ----------
    segment : {"row", "document", "sequence"}
        What one segment is; a batch always holds whole segments.
    shuffles : bool
        Whether segments were assigned to batches at random (only row sources of mixtures may).
    n_rows : int
        Rows of the whole data matrix: observations, documents (rows of the count matrix) or
        time steps.
    n_segments : int
        Rows (mixtures), documents or sequences.
    n_features : int
        Columns: features, or the vocabulary size for documents.
    """

    segment: str
    shuffles: bool

    def __len__(self) -> int:
        """Number of batches B."""
        ...

    def get(self, b: int):
        """Batch ``b`` (0 <= b < B), validated: ndarray, ``csr_array`` or :class:`SeqBatch`."""
        ...

    def batch_size(self, b: int) -> int:
        """Rows of batch ``b`` (observations, documents or time steps)."""
        ...

    @property
    def n_rows(self) -> int: ...

    @property
    def n_segments(self) -> int: ...

    @property
    def n_features(self) -> int: ...

    def sample_for_init(self, max_rows: int, rng: np.random.Generator):
        """Whole segments for default priors and initial components, at most ``max_rows`` rows
        (documents for document sources), of the same type as a batch."""
        ...


def balanced_bounds(weights, n_batches: int, *, what: str = "segments") -> np.ndarray:
    """Split segments into ``n_batches`` contiguous batches of about equal total weight.

    Deterministic: boundary b (0 < b < B) is the segment index whose cumulative weight is
    nearest to ``b * W / B`` (W the total weight; ties go to the lower index), clipped to
    ``b .. n_segments - B + b`` and then moved forward where needed, so that every batch holds
    at least one segment. With all weights zero the
    segments themselves are balanced. Nothing is random: documents and sequences are never
    shuffled, and the same data always give the same batches.

    Parameters
    ----------
    weights : array-like of shape (n_segments,)
        Non-negative weight of every segment (tokens of a document, rows of a sequence).
    n_batches : int
        B, with 1 <= B <= n_segments.
    what : str
        Name of the segments in error messages.

    Returns
    -------
    ndarray of int64, shape (n_batches + 1,)
        ``bounds``: batch b holds segments ``bounds[b]:bounds[b+1]``; ``bounds[0] == 0``,
        ``bounds[-1] == n_segments``, strictly increasing.

    Raises
    ------
    ParameterError
        If ``n_batches`` is not an integer in ``1..n_segments``.

    Examples
    --------
    >>> from bnpcore.data import balanced_bounds
    >>> balanced_bounds([5, 1, 1, 1, 4, 4], 3)  # 16 tokens, targets 5.3 and 10.7: 5 | 1 + 1 + 1 + 4 | 4
    array([0, 1, 5, 6])
    >>> balanced_bounds([1, 1, 1, 1, 100], 3)  # every batch keeps at least one segment
    array([0, 3, 4, 5])
    """
    w = np.asarray(weights, dtype=np.float64)
    n = int(w.shape[0])
    if isinstance(n_batches, bool) or not isinstance(n_batches, (int, np.integer)) or n_batches < 1:
        raise ParameterError(f"`n_batches` must be an integer >= 1, got {n_batches!r}")
    n_batches = int(n_batches)
    if n_batches > n:
        raise ParameterError(f"`n_batches`={n_batches} exceeds the number of {what} ({n}); a batch holds whole {what}")
    cum = np.concatenate([[0.0], np.cumsum(w)])
    if cum[-1] <= 0:
        cum = np.arange(n + 1, dtype=np.float64)
    bounds = np.empty(n_batches + 1, dtype=np.int64)
    bounds[0], bounds[-1] = 0, n
    for b in range(1, n_batches):
        target = b * cum[-1] / n_batches
        j = int(np.searchsorted(cum, target, side="left"))  # cum[j-1] < target <= cum[j]
        if j > 0 and (j > n or target - cum[j - 1] <= cum[j] - target):
            j -= 1
        bounds[b] = max(min(max(j, b), n - n_batches + b), bounds[b - 1] + 1)
    return bounds
