"""Exception and warning hierarchy of bnpcore.

The Rust extension raises these classes too (it imports them from this module), so every error
a user sees derives from :class:`BnpcoreError` and from the matching built-in exception.
"""

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

__all__ = [
    "BackendError",
    "BnpcoreError",
    "ConvergenceWarning",
    "DataError",
    "ELBODecreaseWarning",
    "ModelFileError",
    "NonFiniteError",
    "NotFittedError",
    "NumericalError",
    "ParameterError",
    "ShapeError",
]


class BnpcoreError(Exception):
    """Base class of every bnpcore error."""


class ParameterError(BnpcoreError, ValueError):
    """A constructor argument or hyperparameter is invalid."""


class ShapeError(BnpcoreError, ValueError):
    """An array has the wrong number of dimensions or columns."""


class DataError(BnpcoreError, ValueError):
    """Data outside the support of the observation model (negative counts, non-binary values...)."""


class NonFiniteError(DataError):
    """Data contain NaN or infinity."""


class NumericalError(BnpcoreError, ArithmeticError):
    """A numerical failure, e.g. a posterior covariance that is not positive definite."""


class NotFittedError(BnpcoreError, _SklearnNotFittedError):
    """An estimator was used (``predict``, ``score``, ``save``...) before ``fit``.

    A ``ValueError`` like every other user mistake, and an ``AttributeError`` so that
    ``hasattr``-style checks keep working: both through
    :class:`sklearn.exceptions.NotFittedError`, which it derives from so that scikit-learn's
    tools (``check_is_fitted``, its estimator checks) recognise it.
    """


class ModelFileError(BnpcoreError, ValueError):
    """A saved model or checkpoint is corrupted or has an unsupported format version."""


class BackendError(BnpcoreError, RuntimeError):
    """The distributed backend cannot run the fit: no workers, workers that cannot import
    bnpcore, data a worker cannot read (see :mod:`bnpcore.distributed`)."""


class ConvergenceWarning(UserWarning):
    """``max_laps`` was reached before the relative ELBO change fell below ``tol``."""


class ELBODecreaseWarning(RuntimeWarning):
    """The ELBO decreased by more than round-off where coordinate ascent guarantees it cannot."""
