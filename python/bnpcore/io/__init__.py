"""Saving and loading models and checkpoints (numpy arrays + JSON metadata, no pickle).

See ``docs/model_format.md`` for the file format.
"""

from bnpcore.io._format import FORMAT_NAME, FORMAT_VERSION, load, save

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "load", "save"]
