"""Documentation conventions (issue 14 item 5): every public method and function has numpydoc
``Parameters`` (naming each argument) and ``Returns`` sections, and no docstring or comment of the
package cites documents outside the repository (the thesis, the papers or a page under ``docs/``
are cited instead). The estimator classes document every constructor parameter in their class
docstring, each as ``name : type, default=value`` with the signature's default."""

import ast
import inspect
import re
from pathlib import Path

import bnpcore
import bnpcore.datasets
import bnpcore.io
import bnpcore.metrics
import bnpcore.obs
import bnpcore.plotting
import pytest
from sklearn.base import BaseEstimator

ROOT = Path(__file__).resolve().parents[1]


#: modules whose functions and classes (their methods) are checked, and modules whose functions only
MODULES = (bnpcore, bnpcore.datasets, bnpcore.plotting)
FUNCTION_MODULES = (bnpcore.io, bnpcore.obs, bnpcore.metrics)


def _public_callables():
    seen = set()
    for mod in MODULES + FUNCTION_MODULES:
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isclass(obj) and mod in MODULES:
                if issubclass(obj, BaseException):
                    continue
                for mname, meth in inspect.getmembers(obj):
                    if mname.startswith("_") or not callable(meth) or inspect.isclass(meth):
                        continue
                    if not str(getattr(meth, "__module__", "")).startswith("bnpcore"):
                        continue  # inherited from scikit-learn (get_params, set_output, ...)
                    yield f"{name}.{mname}", meth
            elif inspect.isfunction(obj) and obj.__module__.startswith("bnpcore"):
                yield f"{mod.__name__}.{name}", obj


CALLABLES = sorted(_public_callables(), key=lambda t: t[0])


def _section(doc: str, title: str) -> str | None:
    m = re.search(rf"^{title}\n-{{3,}}\n(.*?)(?=^\w[\w ]*\n-{{3,}}\n|\Z)", doc, re.M | re.S)
    return None if m is None else m.group(1)


def test_the_public_surface_is_found():
    names = {n for n, _ in CALLABLES}
    for expected in ("DPMixture.fit", "HDPTopicModel.transform", "HDPHMM.partial_fit", "FiniteHMM.decode", "bnpcore.load",
                     "bnpcore.io.lookup_model_type", "bnpcore.io.registered_model_types", "bnpcore.obs.data_shift",
                     "bnpcore.metrics.topic_coherence", "HDPTopicModel.coherence"):
        assert expected in names
    assert len(CALLABLES) > 60


@pytest.mark.parametrize(("name", "func"), CALLABLES, ids=[n for n, _ in CALLABLES])
def test_numpydoc_parameters_and_returns(name, func):
    doc = inspect.getdoc(func)
    assert doc, f"{name} has no docstring"
    sig = inspect.signature(func)
    params = [
        p.name for p in sig.parameters.values() if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if params:
        sec = _section(doc, "Parameters")
        assert sec is not None, f"{name}: no numpydoc Parameters section"
        missing = [p for p in params if not re.search(rf"(^|[ ,]){re.escape(p)}([ ,:]|$)", sec, re.M)]
        assert not missing, f"{name}: Parameters does not describe {missing}"
    if sig.return_annotation not in (None, "None"):
        assert _section(doc, "Returns") is not None or _section(doc, "Yields") is not None, f"{name}: no Returns section"


def test_the_checker_catches_a_bad_docstring():
    def bad(x, y=1):
        """Does something.

        Parameters
        ----------
        x : int
        """

    with pytest.raises(AssertionError, match="Parameters does not describe"):
        test_numpydoc_parameters_and_returns("bad", bad)


ESTIMATORS = sorted(
    (obj for obj in (getattr(bnpcore, n) for n in bnpcore.__all__) if inspect.isclass(obj) and issubclass(obj, BaseEstimator)),
    key=lambda c: c.__name__,
)


def test_every_exported_estimator_is_checked():
    names = {c.__name__ for c in ESTIMATORS}
    assert {"DPMixture", "FiniteMixture", "HDPTopicModel", "FiniteTopicModel", "HDPHMM", "FiniteHMM"} <= names


def _parameter_entries(section: str) -> dict:
    """``name -> (type and default text or None)`` of every numpydoc entry of a Parameters
    section (an entry line starts at column 0; ``a, b : type`` documents both names)."""
    entries = {}
    for line in section.splitlines():
        if not line or line[0].isspace():
            continue
        names, sep, spec = line.partition(" : ")
        for name in names.split(","):
            entries[name.strip()] = spec.strip() if sep else None
    return entries


def _same_default(text: str, default) -> bool:
    """Whether the text after ``default=`` is the signature's default (a literal compared by
    value and type, e.g. ``"gauss"``, ``1e-6``, ``100000``, ``None``)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    return type(value) is type(default) and value == default


def check_constructor_parameters(cls) -> None:
    doc = inspect.getdoc(cls)
    assert doc, f"{cls.__name__} has no docstring"
    sec = _section(doc, "Parameters")
    assert sec is not None, f"{cls.__name__}: no numpydoc Parameters section"
    entries = _parameter_entries(sec)
    problems = []
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name not in entries:
            problems.append(f"{p.name}: not documented")
            continue
        spec = entries[p.name]
        m = None if spec is None else re.search(r"(?:^|, )default=(.+)$", spec)
        if spec is None:
            problems.append(f"{p.name}: no ' : type, default=...'")
        elif m is None:
            problems.append(f"{p.name}: no default= in {spec!r}")
        elif not _same_default(m.group(1), p.default):
            problems.append(f"{p.name}: documented default={m.group(1)}, the signature's is {p.default!r}")
    assert not problems, f"{cls.__name__} Parameters:\n" + "\n".join(problems)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=[c.__name__ for c in ESTIMATORS])
def test_estimator_documents_every_constructor_parameter(cls):
    check_constructor_parameters(cls)
    assert cls().get_params() == {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items() if k != "self"}


def test_the_constructor_checker_catches_bad_entries():
    class Bad:
        """Something.

    Parameters
    ----------
    a : int, default=1
    b : int
    c : str, default="x"
    d, e
        Grouped, untyped.
    """

        def __init__(self, a=1, b=2, c="y", d=None, e=None, f=0):
            pass

    with pytest.raises(AssertionError) as info:
        check_constructor_parameters(Bad)
    msg = str(info.value)
    assert "a:" not in msg
    for expected in ("b: no default=", "c: documented default=\"x\"", "d: no ' : type", "e: no ' : type", "f: not documented"):
        assert expected in msg


def test_class_docstrings_with_an_unindented_summary_are_found():
    class Bad:
        __doc__ = "Summary line\ncontinued.\n" + """
    Parameters
    ----------
    a : int, default=1
    """

        def __init__(self, a=1):
            pass

    with pytest.raises(AssertionError, match="no numpydoc Parameters section"):
        check_constructor_parameters(Bad)


OUTSIDE = re.compile(r"spec 0[1-4]|\bspec/0|\.\./shared|STYLE(\.md)? §|DATA\.md")


def test_no_module_cites_documents_outside_the_repository():
    files = [*sorted((ROOT / "python" / "bnpcore").rglob("*.py")), *sorted((ROOT / "python" / "bnpcore").rglob("*.pyi"))]
    files += sorted((ROOT / "rust").rglob("*.rs"))
    files += sorted((ROOT / "docs").glob("*.md"))
    assert len(files) > 50
    hits = []
    for f in files:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "cite the thesis/papers or a docs/ page instead:\n" + "\n".join(hits)
