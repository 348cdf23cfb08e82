"""The scikit-learn side of every bnpcore estimator.

bnpcore's estimators are scikit-learn estimators: :class:`BaseEstimator` derives from
:class:`sklearn.base.BaseEstimator` (``get_params``/``set_params``/``clone``, the text and HTML
``repr``) and from :class:`sklearn.base.DensityMixin` (estimator type ``"density_estimator"``; the
subclass's ``score(X)`` is the mean log density per row, higher is better, so ``GridSearchCV`` and
``cross_val_score`` use it directly as their default scorer). It also declares the estimator
tags for every supported scikit-learn version: ``__sklearn_tags__`` (1.6 and later, instance
level) and ``_more_tags`` (before 1.6). ``docs/sklearn_mapping.md`` maps the arguments of
scikit-learn's ``BayesianGaussianMixture`` to bnpcore's.
"""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import sklearn
from bnpcore._validation import DENSIFIED_SPARSE_OBS, check_not_lazy
from bnpcore.exceptions import DataError

if TYPE_CHECKING:
    # scikit-learn ships no type information, so a type checker would see its base classes as
    # Any, and with them every attribute of a bnpcore estimator (a misspelt fitted attribute
    # would pass unnoticed). It sees these typed stand-ins for what the estimators inherit
    # instead; at run time the bases are scikit-learn's own.
    _T = TypeVar("_T")

    class _SklearnBaseEstimator:
        def get_params(self, deep: bool = True) -> dict[str, Any]: ...
        def set_params(self: _T, **params: Any) -> _T: ...
        def __sklearn_tags__(self) -> Any: ...
        def __sklearn_clone__(self: _T) -> _T: ...
        def get_metadata_routing(self) -> Any: ...
        def _repr_html_(self) -> str: ...
        @classmethod
        def _get_param_names(cls) -> list[str]: ...

    class DensityMixin:
        def score(self, X: Any, y: Any = None) -> float: ...

    class TransformerMixin:
        def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any: ...
        def set_output(self: _T, *, transform: str | None = None) -> _T: ...
else:
    from sklearn.base import BaseEstimator as _SklearnBaseEstimator
    from sklearn.base import DensityMixin, TransformerMixin

__all__ = ["SKLEARN_VERSION", "BaseEstimator", "TransformerMixin"]


def _version_tuple(version: str) -> tuple:
    """``"1.9.1"`` → ``(1, 9)``; ``"1.10.dev0"`` → ``(1, 10)``."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


SKLEARN_VERSION = _version_tuple(sklearn.__version__)

# Observation models whose data are constrained; scikit-learn's tags can only say "non-negative".
_NON_NEGATIVE_OBS = ("mult",)


def _feature_names(X):
    """The column names of a DataFrame-like ``X`` when they are all strings, else None."""
    cols = getattr(X, "columns", None)
    if cols is None or isinstance(X, np.ndarray):
        return None
    names = np.asarray(list(cols), dtype=object)
    if names.size == 0 or not all(isinstance(c, str) for c in names):
        return None
    return names


_B = TypeVar("_B", bound="BaseEstimator")


class BaseEstimator(DensityMixin, _SklearnBaseEstimator):
    """Base class of the bnpcore estimators (scikit-learn estimator API).

    Subclasses store every constructor argument unchanged under its own name (validation
    happens in ``fit``), which is what ``get_params``, ``set_params`` and
    :func:`sklearn.base.clone` rely on. Fitted attributes end with ``_``;
    :func:`sklearn.utils.validation.check_is_fitted` looks for them.

    Tags: unsupervised (``y`` is ignored), deterministic given ``random_state``, 2-D numeric
    input without missing values; scipy.sparse input for the count models (``obs="mult"``,
    ``"bern"``, the topic models), non-negative input for ``obs="mult"`` and the topic models.
    """

    def _set_feature_names(self, names) -> None:
        if names is None:
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            self.feature_names_in_ = names

    def _check_feature_names(self, X) -> None:
        """scikit-learn's rule: the column names of a DataFrame given to predict/score must be
        those of the fit (ValueError); a warning when only one of the two had names."""
        check_not_lazy(X)
        names = _feature_names(X)
        fitted = getattr(self, "feature_names_in_", None)
        if names is None and fitted is None:
            return
        cls = type(self).__name__
        if fitted is None:
            warnings.warn(f"X has feature names, but {cls} was fitted without feature names", UserWarning, stacklevel=4)
        elif names is None:
            warnings.warn(f"X does not have valid feature names, but {cls} was fitted with feature names", UserWarning, stacklevel=4)
        elif len(names) != len(fitted) or np.any(names != fitted):
            raise DataError(
                "The feature names should match those that were passed during fit: "
                f"fitted with {list(fitted)[:10]}, got {list(names)[:10]}"
            )

    @classmethod
    def _param_names(cls) -> list:
        """Sorted constructor argument names (the model-file code in :mod:`bnpcore.io` uses it)."""
        return cls._get_param_names()

    def set_params(self: _B, **params: Any) -> _B:
        """Set constructor arguments; returns ``self``.

        Parameters
        ----------
        **params : dict
            Argument names and their new values (``<component>__<name>`` addresses a nested
            estimator, as in scikit-learn).

        Returns
        -------
        self

        Raises
        ------
        bnpcore.ParameterError
            For a name that is not a constructor argument (a ``ValueError``, with
            scikit-learn's message).
        """
        valid = self._get_param_names()
        for key in params:
            name = key.partition("__")[0]
            if name not in valid:
                from bnpcore.exceptions import ParameterError

                raise ParameterError(
                    f"Invalid parameter {name!r} for estimator {self!r}. Valid parameters are: {valid!r}."
                )
        return super().set_params(**params)

    def __getstate__(self):
        # The plain instance dict: scikit-learn's version adds `_sklearn_version` and warns when a
        # pickle is loaded under another scikit-learn; a bnpcore model does not depend on it.
        return dict(self.__dict__)

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _accepts_sparse(self) -> bool:
        """Tag: scipy.sparse ``X`` is accepted. The mixtures of counts (``obs="mult"``,
        ``"bern"``) accept it, the Gaussian ones refuse it (bnpcore._validation.check_array
        with obs=...); families of count data override it."""
        return getattr(self, "obs", None) in DENSIFIED_SPARSE_OBS

    def _positive_only(self) -> bool:
        """Tag: ``X`` must be non-negative (counts: ``obs="mult"``); families of count data
        override it."""
        return getattr(self, "obs", None) in _NON_NEGATIVE_OBS

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        tags.non_deterministic = False
        tags.input_tags.two_d_array = True
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = self._accepts_sparse()
        tags.input_tags.positive_only = self._positive_only()
        return tags

    if SKLEARN_VERSION < (1, 6):  # pragma: no cover - exercised only with an older scikit-learn

        def _more_tags(self):
            return {
                "requires_y": False,
                "non_deterministic": False,
                "allow_nan": False,
                "X_types": ["2darray", "sparse"] if self._accepts_sparse() else ["2darray"],
                "requires_positive_X": self._positive_only(),
            }
