"""Data sources: fixed batches of rows, documents or sequences (see :class:`BatchSource`).

* rows (mixtures): :class:`ArrayBatches`, :class:`ListBatches` (in-memory arrays, memory maps,
  ``.npy`` files, lists of batches);
* documents (bag-of-words counts, kept sparse): :class:`DocumentBatches`,
  :class:`DocumentListBatches`, :class:`BagOfWordsBatches`, :class:`DocumentStream`, chosen by
  :func:`document_source`;
* sequences (hmmlearn-style ``(X, lengths)``): :class:`SequenceBatches`, :func:`sequence_source`.

A batch holds whole segments (rows, documents, sequences); only mixtures may shuffle rows into
batches. ``docs/internals.md`` describes the layers that read these sources.
"""

from bnpcore.data._base import SEGMENT_KINDS, BatchSource, SeqBatch, balanced_bounds
from bnpcore.data.documents import (
    BagOfWordsBatches,
    DocumentBatches,
    DocumentListBatches,
    DocumentStream,
    bow_to_csr,
    document_source,
)
from bnpcore.data.sequences import SequenceBatches, sequence_source
from bnpcore.data.sources import (
    ArrayBatches,
    ListBatches,
    NpyFile,
    is_batch_list,
    make_batches,
    open_npy,
)

__all__ = [
    "SEGMENT_KINDS",
    "ArrayBatches",
    "BagOfWordsBatches",
    "BatchSource",
    "DocumentBatches",
    "DocumentListBatches",
    "DocumentStream",
    "ListBatches",
    "NpyFile",
    "SeqBatch",
    "SequenceBatches",
    "balanced_bounds",
    "bow_to_csr",
    "document_source",
    "is_batch_list",
    "make_batches",
    "open_npy",
    "sequence_source",
]
