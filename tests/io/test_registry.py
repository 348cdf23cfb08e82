"""Persistence by registry: estimator classes register their model type with bnpcore.io, which
imports no estimator module and refuses unregistered types clearly."""

import ast
import pathlib
import warnings

import bnpcore
import bnpcore.io
import numpy as np
import pytest
from bnpcore import DPMixture, FiniteMixture
from bnpcore.exceptions import ConvergenceWarning, ModelFileError, ParameterError
from bnpcore.io import (
    lookup_model_type,
    model_type_name,
    register_model_type,
    registered_model_types,
    unregister_model_type,
)

IO_DIR = pathlib.Path(bnpcore.io.__file__).parent


def test_io_imports_no_estimator_module():
    """Every import statement of bnpcore/io, at module level or inside functions."""
    for path in IO_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                assert not name.startswith("bnpcore.estimators"), f"{path.name} imports {name}"
                assert name not in ("bnpcore.DPMixture", "bnpcore.FiniteMixture"), f"{path.name} imports {name}"


def test_mixtures_are_registered_by_their_module():
    types = registered_model_types()
    assert types["DPMixture"] is DPMixture and types["FiniteMixture"] is FiniteMixture
    assert model_type_name(DPMixture) == "DPMixture"
    assert lookup_model_type("FiniteMixture") is FiniteMixture
    types.clear()  # a copy: the registry is untouched
    assert lookup_model_type("DPMixture") is DPMixture


@pytest.fixture
def custom_type():
    names = []

    def register(name, cls=None):
        names.append(name)
        return register_model_type(name, cls)

    yield register
    for name in names:
        unregister_model_type(name)


def _small_fit(est):
    X = np.random.default_rng(0).standard_normal((60, 2)) + np.repeat([[0.0, 0.0], [6.0, 6.0]], 30, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X), X


def test_decorator_and_call_forms_round_trip(tmp_path, custom_type):
    @custom_type("test.DecoratedMixture")
    class DecoratedMixture(DPMixture):
        pass

    class CalledMixture(FiniteMixture):
        pass

    assert custom_type("test.CalledMixture", CalledMixture) is CalledMixture
    for cls in (DecoratedMixture, CalledMixture):
        est, X = _small_fit(cls(n_components=3, max_laps=4, random_state=0))
        est.save(tmp_path / "m.npz")
        again = bnpcore.load(tmp_path / "m.npz")
        assert type(again) is cls
        assert np.array_equal(again.predict_proba(X), est.predict_proba(X))


def test_unregistered_type_is_a_clear_model_file_error(tmp_path, custom_type):
    class Temporary(DPMixture):
        pass

    custom_type("test.Temporary", Temporary)
    est, _ = _small_fit(Temporary(n_components=2, max_laps=2, random_state=0))
    est.save(tmp_path / "t.npz")
    unregister_model_type("test.Temporary")
    with pytest.raises(ModelFileError, match=r"'test.Temporary', which is not registered \(registered: .*DPMixture"):
        bnpcore.load(tmp_path / "t.npz")
    assert isinstance(ModelFileError("x"), ValueError)


def test_saving_an_unregistered_class_names_the_fix(tmp_path):
    class NotRegistered(DPMixture):  # subclasses are not registered implicitly
        pass

    with pytest.raises(ParameterError, match=r"not registered.*register_model_type\('NotRegistered', NotRegistered\)"):
        bnpcore.io.save(NotRegistered(), tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()


def test_registration_conflicts(custom_type):
    class A:
        pass

    class B:
        pass

    custom_type("test.A", A)
    assert custom_type("test.A", A) is A  # idempotent
    with pytest.raises(ParameterError, match="already registered to"):
        register_model_type("test.A", B)
    with pytest.raises(ParameterError, match=r"already registered as model type 'test\.A'"):
        register_model_type("test.A2", A)
    assert lookup_model_type("test.A") is A


def test_reloaded_class_replaces_its_entry(custom_type):
    """After importlib.reload a module defines a new class object with the same qualified name."""

    def make():
        class Reloaded:
            pass

        return Reloaded

    first, second = make(), make()
    custom_type("test.Reloaded", first)
    custom_type("test.Reloaded", second)
    assert lookup_model_type("test.Reloaded") is second and model_type_name(second) == "test.Reloaded"
    with pytest.raises(ParameterError):
        model_type_name(first)


@pytest.mark.parametrize("name,cls", [("", DPMixture), (3, DPMixture), (None, DPMixture), ("x", "DPMixture"), ("x", DPMixture())])
def test_bad_registrations(name, cls):
    with pytest.raises(ParameterError, match="`name`" if not isinstance(name, str) or not name else "`cls`"):
        register_model_type(name, cls)


def test_lookup_of_non_string_types():
    for name in (None, 3, ["DPMixture"]):
        with pytest.raises(ModelFileError, match="not registered"):
            lookup_model_type(name)
