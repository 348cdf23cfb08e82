"""Type information of the public API (the package ships ``py.typed``): every public estimator
method and ``bnpcore.datasets`` function is annotated, so ``mypy --strict`` treats calls to them
as typed (no ``no-untyped-call``); ``fit``/``partial_fit`` return the estimator's own type; the
fitted attributes are declared on the classes, so a misspelt one is a type error (not ``Any``)."""

import inspect

import bnpcore
import bnpcore.datasets
import bnpcore.metrics
import numpy as np
import pytest
from bnpcore.datasets import make_bars, make_sticky_hmm
from sklearn.base import BaseEstimator

ESTIMATORS = sorted(
    (obj for obj in (getattr(bnpcore, n) for n in bnpcore.__all__) if inspect.isclass(obj) and issubclass(obj, BaseEstimator)),
    key=lambda c: c.__name__,
)


def _annotated(func) -> bool:
    """Whether a type checker treats ``func`` as typed (at least one annotation)."""
    sig = inspect.signature(func)
    return sig.return_annotation is not inspect.Signature.empty or any(
        p.annotation is not inspect.Parameter.empty for p in sig.parameters.values()
    )


def _public_members():
    for cls in ESTIMATORS:
        yield f"{cls.__name__}.__init__", cls.__init__
        for name, member in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_") and str(getattr(member, "__module__", "")).startswith("bnpcore"):
                yield f"{cls.__name__}.{name}", member
    for name in bnpcore.datasets.__all__:
        yield f"datasets.{name}", getattr(bnpcore.datasets, name)
    for name in bnpcore.metrics.__all__:
        if callable(getattr(bnpcore.metrics, name)):
            yield f"metrics.{name}", getattr(bnpcore.metrics, name)


MEMBERS = sorted(_public_members(), key=lambda t: t[0])


def test_the_public_surface_is_found():
    names = {n for n, _ in MEMBERS}
    assert {"DPMixture.fit", "HDPHMM.decode", "HDPTopicModel.transform", "datasets.make_bars", "FiniteHMM.__init__"} <= names


@pytest.mark.parametrize(("name", "func"), MEMBERS, ids=[n for n, _ in MEMBERS])
def test_public_callables_are_annotated(name, func):
    assert _annotated(func), f"{name} has no annotations: mypy --strict reports calls to it as untyped"
    sig = inspect.signature(func)
    if name.endswith("__init__"):
        assert sig.return_annotation == "None"
    if name.rsplit(".", 1)[-1] in ("fit", "partial_fit"):
        # self: _E -> _E, a TypeVar bound to the class: the fitted estimator keeps its type
        assert sig.return_annotation is not inspect.Signature.empty
        assert sig.parameters["self"].annotation == sig.return_annotation, f"{name} does not return the type of self"


def _declared(cls) -> set:
    names = set()
    for klass in cls.__mro__:
        names |= set(vars(klass).get("__annotations__", {}))
        names |= {k for k, v in vars(klass).items() if isinstance(v, property)}
    return names


def _fits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    walk = np.cumsum(rng.normal(size=(200, 2)), axis=0)
    docs, _ = make_bars(n_docs=30, random_state=0)
    seqs, lengths, _ = make_sticky_hmm(n_seqs=2, seq_len=100, random_state=0)
    yield bnpcore.DPMixture(max_laps=3, random_state=0), (X,)
    yield bnpcore.FiniteMixture(obs="ar_gauss", n_components=2, max_laps=3, random_state=0), (np.c_[walk[1:], walk[:-1]],)
    yield bnpcore.DPMixture(obs="mult", algorithm="truncation_free", max_laps=2, random_state=0), (docs.toarray(),)
    yield bnpcore.HDPHMM(max_laps=3, random_state=0), (seqs, lengths)
    yield bnpcore.FiniteHMM(obs="ar_gauss", n_components=2, max_laps=3, random_state=0), (walk, None)
    yield bnpcore.HDPTopicModel(max_laps=3, random_state=0), (docs,)
    yield bnpcore.FiniteTopicModel(n_components=3, max_laps=3, random_state=0), (docs,)


@pytest.mark.filterwarnings("ignore::bnpcore.ConvergenceWarning")
def test_every_fitted_attribute_is_declared():
    seen = set()
    for est, args in _fits():
        est.fit(*args)
        fitted = {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}
        assert fitted
        seen.add(type(est))
        missing = sorted(fitted - _declared(type(est)))
        assert not missing, f"{type(est).__name__}: fitted attributes not declared on the class: {missing}"
    assert seen == set(ESTIMATORS)
