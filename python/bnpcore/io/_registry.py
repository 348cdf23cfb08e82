"""The registry of model types that :mod:`bnpcore.io` can save and load.

Every estimator class that can be written to a model file registers itself, from its own
module, under a stable *model type* name::

    from bnpcore.io import register_model_type

    @register_model_type("DPMixture")
    class DPMixture(...):
        ...

    # or, equivalently, after the class body:
    register_model_type("FiniteMixture", FiniteMixture)

``save`` writes the registered name into the file (metadata key ``"estimator"``) and ``load``
looks the class up by that name, so :mod:`bnpcore.io` imports no estimator module (no import
cycle estimators → io → estimators) and a new model family needs no edit here. The name is part
of the file format: never rename a registered type without bumping the format version
(``docs/model_format.md``).
"""

from __future__ import annotations

from bnpcore.exceptions import ModelFileError, ParameterError

__all__ = [
    "lookup_model_type",
    "model_type_name",
    "register_model_type",
    "registered_model_types",
    "unregister_model_type",
]

_BY_NAME: dict = {}
_BY_CLASS: dict = {}


def _qualname(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_model_type(name, cls=None):
    """Register ``cls`` under the model type ``name`` (also usable as a class decorator).

    Parameters
    ----------
    name : str
        Stable name written into model files, conventionally the class name.
    cls : type or None
        The estimator class. When omitted, returns a decorator that registers the class it
        decorates: ``@register_model_type("DPMixture")``.

    Returns
    -------
    type or callable
        ``cls`` itself (so the call can be used as an expression), or the decorator.

    Raises
    ------
    ParameterError
        If ``name`` is not a non-empty string, ``cls`` is not a class, ``name`` is registered
        to a different class, or ``cls`` is registered under a different name. Registering the
        same class again (or a class of the same module and qualified name, as after
        ``importlib.reload``) replaces the entry.

    Examples
    --------
    >>> from bnpcore import DPMixture
    >>> from bnpcore.io import lookup_model_type, register_model_type, unregister_model_type
    >>> @register_model_type("example.MyMixture")
    ... class MyMixture(DPMixture):
    ...     pass
    >>> lookup_model_type("example.MyMixture") is MyMixture
    True
    >>> unregister_model_type("example.MyMixture")
    """
    if not isinstance(name, str) or not name:
        raise ParameterError(f"`name` must be a non-empty string, got {name!r}")
    if cls is None:

        def decorator(klass):
            return register_model_type(name, klass)

        return decorator
    if not isinstance(cls, type):
        raise ParameterError(f"`cls` must be a class, got {cls!r}")
    old = _BY_NAME.get(name)
    if old is not None and old is not cls and _qualname(old) != _qualname(cls):
        raise ParameterError(f"model type {name!r} is already registered to {_qualname(old)}; cannot register {_qualname(cls)}")
    other = _BY_CLASS.get(cls)
    if other is not None and other != name:
        raise ParameterError(f"{_qualname(cls)} is already registered as model type {other!r}")
    if old is not None:
        _BY_CLASS.pop(old, None)
    _BY_NAME[name] = cls
    _BY_CLASS[cls] = name
    return cls


def unregister_model_type(name: str) -> None:
    """Remove the model type ``name`` (a no-op if it is not registered).

    Parameters
    ----------
    name : str
        The model type name the class was registered under.
    """
    cls = _BY_NAME.pop(name, None)
    if cls is not None:
        _BY_CLASS.pop(cls, None)


def registered_model_types() -> dict:
    """A copy of the registry: model type name → class.

    Returns
    -------
    dict of str to type
        Every registered model type name and its class (changing the copy changes nothing).
    """
    return dict(_BY_NAME)


def model_type_name(cls) -> str:
    """The model type ``cls`` was registered under (exact class; subclasses register themselves).

    Parameters
    ----------
    cls : type
        An estimator class.

    Returns
    -------
    str
        The name ``save`` writes into the model file.

    Raises
    ------
    ParameterError
        If ``cls`` is not registered.
    """
    try:
        return _BY_CLASS[cls]
    except KeyError:
        raise ParameterError(
            f"{_qualname(cls)} cannot be saved: its model type is not registered; "
            f"call bnpcore.io.register_model_type({cls.__name__!r}, {cls.__name__}) where the class is defined"
        ) from None


def lookup_model_type(name, source: str = "the model file"):
    """The class registered as ``name``.

    Parameters
    ----------
    name : str
        A model type name (read from a model file).
    source : str, default="the model file"
        Where ``name`` comes from, for the error message.

    Returns
    -------
    type
        The estimator class registered under ``name``.

    Raises
    ------
    ModelFileError
        If no class is registered under ``name`` (the message lists the registered types).
    """
    cls = _BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        known = ", ".join(sorted(_BY_NAME)) or "none"
        raise ModelFileError(
            f"{source} holds a model of type (estimator class) {name!r}, which is not registered "
            f"(registered: {known}); import the module that defines it before loading"
        )
    return cls
