"""The dependency direction of STYLE §1: estimators → algorithms → moves → model → (obs, alloc,
stats) → _core; data/ and io/ below them all. No module of the lower layers imports an estimator (not even lazily, inside a
function), and each of them imports on its own in a fresh interpreter (no import cycles)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import bnpcore
import pytest

PKG = pathlib.Path(bnpcore.__file__).parent
LOWER = sorted(
    [p for d in ("algorithms", "moves", "io", "data") for p in (PKG / d).glob("*.py")]
    + [PKG / f for f in ("model.py", "alloc.py", "obs.py", "stats.py")]
)


def _imports(path: pathlib.Path) -> set:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("path", LOWER, ids=lambda p: str(p.relative_to(PKG)))
def test_lower_layers_import_no_estimator(path):
    bad = sorted(m for m in _imports(path) if m == "bnpcore.estimators" or m.startswith("bnpcore.estimators."))
    assert not bad, f"{path.name} imports {bad}"


def test_moves_import_only_their_base():
    for name in ("birth", "merge", "delete"):
        mods = _imports(PKG / "moves" / f"{name}.py")
        assert not any(m.startswith("bnpcore.moves.manager") for m in mods), name


@pytest.mark.parametrize("module", ["bnpcore.algorithms.loop", "bnpcore.moves.manager", "bnpcore.moves.merge", "bnpcore.stats", "bnpcore.model"])
def test_each_module_imports_on_its_own(module):
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
