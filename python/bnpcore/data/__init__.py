"""Data containers: fixed batches over in-memory arrays, memory maps and iterables."""

from bnpcore.data.sources import ArrayBatches, make_batches

__all__ = ["ArrayBatches", "make_batches"]
