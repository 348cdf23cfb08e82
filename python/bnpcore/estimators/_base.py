"""scikit-learn style parameter handling without a scikit-learn dependency."""

from __future__ import annotations

import inspect

__all__ = ["BaseEstimator"]


class BaseEstimator:
    """``get_params``/``set_params``/``__repr__`` from the constructor signature, as in scikit-learn."""

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep: bool = True) -> dict:
        """Constructor arguments as a dict."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor arguments; returns self."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                from bnpcore.exceptions import ParameterError

                raise ParameterError(f"invalid parameter {key!r} for {type(self).__name__}; valid: {sorted(valid)}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__)
        parts = []
        for name in self._param_names():
            default = sig.parameters[name].default
            value = getattr(self, name)
            try:
                same = value is default or value == default
                same = bool(same)
            except Exception:  # arrays
                same = False
            if not same:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"
