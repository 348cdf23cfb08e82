"""Saving and loading models and checkpoints (numpy arrays + JSON metadata, no pickle).

Estimator classes register their model type with :func:`register_model_type` (from their own
module); ``load`` finds the class in that registry, so this package imports no estimator. See
``docs/model_format.md`` for the file format and the registry.
"""

from bnpcore.io._format import FORMAT_NAME, FORMAT_VERSION, load, save
from bnpcore.io._registry import (
    lookup_model_type,
    model_type_name,
    register_model_type,
    registered_model_types,
    unregister_model_type,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "load",
    "lookup_model_type",
    "model_type_name",
    "register_model_type",
    "registered_model_types",
    "save",
    "unregister_model_type",
]
