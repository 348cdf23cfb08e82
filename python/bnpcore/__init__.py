"""bnpcore: fast, exact variational inference for Bayesian nonparametric clustering.

A Rust core (observation models, fused local steps, summaries) driven by a thin Python layer
(algorithms, moves, scikit-learn style estimators).
"""

import os as _os
from typing import TYPE_CHECKING

from bnpcore import _core
from bnpcore.estimators.hmm import HDPHMM, FiniteHMM
from bnpcore.estimators.mixture import DPMixture, FiniteMixture
from bnpcore.estimators.topic import FiniteTopicModel, HDPTopicModel
from bnpcore.exceptions import (
    BackendError,
    BnpcoreError,
    ConvergenceWarning,
    DataError,
    ELBODecreaseWarning,
    ModelFileError,
    NonFiniteError,
    NotFittedError,
    NumericalError,
    ParameterError,
    ShapeError,
)

__version__ = _core.__version__

__all__ = [
    "HDPHMM",
    "BackendError",
    "BnpcoreError",
    "ConvergenceWarning",
    "DPMixture",
    "DataError",
    "ELBODecreaseWarning",
    "FiniteHMM",
    "FiniteMixture",
    "FiniteTopicModel",
    "HDPTopicModel",
    "ModelFileError",
    "NonFiniteError",
    "NotFittedError",
    "NumericalError",
    "ParameterError",
    "ShapeError",
    "__version__",
    "datasets",
    "load",
    "metrics",
]

if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_core._after_fork_in_child)

_threads_env = _os.environ.get("BNPCORE_NUM_THREADS")
_digits = None if _threads_env is None else _threads_env.removeprefix("+")
if _digits is not None and not (_digits.isascii() and _digits.isdigit() and int(_digits) > 0):
    import warnings as _warnings

    # the core ignores such a value (all cores are used): say so rather than silently
    _warnings.warn(
        f"BNPCORE_NUM_THREADS={_threads_env!r} is not a positive integer and is ignored: calls without n_threads use "
        f"all {_core.default_num_threads()} cores",
        RuntimeWarning,
        stacklevel=2,
    )
del _threads_env, _digits


if TYPE_CHECKING:  # what the lazy attributes below are, for type checkers
    from bnpcore import datasets
    from bnpcore import metrics as metrics
    from bnpcore import plotting as plotting
    from bnpcore.io import load
else:

    def __getattr__(name):
        # imported on first use: datasets and plotting pull in scikit-learn and matplotlib
        if name == "datasets":
            import importlib

            return importlib.import_module("bnpcore.datasets")
        if name == "load":
            from bnpcore.io import load

            return load
        if name in ("plotting", "metrics"):
            import importlib

            return importlib.import_module(f"bnpcore.{name}")
        raise AttributeError(f"module 'bnpcore' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"datasets", "load", "metrics", "plotting"})
