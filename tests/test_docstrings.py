"""Documentation conventions (issue 14 item 5): every public method and function has numpydoc
``Parameters`` (naming each argument) and ``Returns`` sections, and no docstring or comment of the
package cites documents outside the repository (the thesis, the papers or a page under ``docs/``
are cited instead)."""

import inspect
import re
from pathlib import Path

import bnpcore
import bnpcore.datasets
import bnpcore.plotting
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _public_callables():
    seen = set()
    for mod in (bnpcore, bnpcore.datasets, bnpcore.plotting):
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
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
    for expected in ("DPMixture.fit", "HDPTopicModel.transform", "HDPHMM.partial_fit", "FiniteHMM.decode", "bnpcore.load"):
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
