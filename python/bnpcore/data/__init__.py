"""Data containers: fixed batches over in-memory arrays, memory maps and lists of batches."""

from bnpcore.data.sources import (
    ArrayBatches,
    ListBatches,
    is_batch_list,
    make_batches,
    open_npy,
)

__all__ = ["ArrayBatches", "ListBatches", "is_batch_list", "make_batches", "open_npy"]
