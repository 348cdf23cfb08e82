"""Bad input gives a clear ``ValueError`` subclass naming the argument (issue 2, "Bad input").

Never a Rust panic (pyo3's ``PanicException`` derives from ``BaseException`` and would escape
``except Exception``; the bindings turn a caught panic into ``RuntimeError("bnpcore internal
error")``, which is a bug too), never a NaN result, never a hang.
"""

import re

import bnpcore._reference as ref
import numpy as np
import pytest
from _helpers import KINDS, fit_quietly
from bnpcore import DPMixture, FiniteMixture, _core
from bnpcore.exceptions import (
    BnpcoreError,
    DataError,
    NonFiniteError,
    NumericalError,
    ParameterError,
    ShapeError,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

ESTIMATORS = (DPMixture, FiniteMixture)


def expect_error(exc_type, name, fn, *args, **kwargs):
    """``fn(*args)`` raises ``exc_type`` (a ValueError/ArithmeticError subclass from
    bnpcore.exceptions) whose message names ``name``. Anything else — including a caught panic
    (RuntimeError) or a BaseException-only PanicException — fails the test."""
    try:
        fn(*args, **kwargs)
    except BaseException as exc:
        assert type(exc).__name__ != "PanicException", f"Rust panic reached Python: {exc}"
        assert "internal error" not in str(exc), f"Rust panic (caught at the boundary): {exc}"
        assert isinstance(exc, exc_type), f"expected {exc_type.__name__}, got {type(exc).__name__}: {exc}"
        assert isinstance(exc, BnpcoreError)
        assert re.search(re.escape(name), str(exc)), f"message does not name `{name}`: {exc}"
        return exc
    raise AssertionError(f"no error raised (expected {exc_type.__name__} naming `{name}`)")


def valid_data(kind, n=40, D=3, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "mult":
        return rng.poisson(2.0, size=(n, D)).astype(float)
    if kind == "bern":
        return (rng.random((n, D)) < 0.5).astype(float)
    return rng.standard_normal((n, D))


# ----------------------------------------------------------------------------------------------
# data given to fit / predict
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_data(cls, kind, bad):
    X = valid_data(kind)
    X[7, 1] = bad
    exc = expect_error(NonFiniteError, "X", cls(obs=kind, n_components=2).fit, X)
    assert "row 7" in str(exc)


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize(
    "X,exc_type",
    [
        (np.zeros(10), ShapeError),  # 1-D
        (np.zeros((4, 3, 2)), ShapeError),  # 3-D
        (np.zeros((0, 3)), ShapeError),  # no rows
        (np.zeros((5, 0)), ShapeError),  # no columns
        (np.zeros(()), ShapeError),  # scalar
        (np.array([["a", "b"], ["c", "d"]]), DataError),  # strings
        (np.array([[1.0, "x"], [2.0, 3.0]], dtype=object), DataError),  # object
        (np.array([[1 + 1j, 2.0], [3.0, 4.0]]), DataError),  # complex
        ([[1.0, 2.0], [3.0]], DataError),  # ragged
        (object(), DataError),  # a lone non-numeric object (e.g. a handle to remote data)
    ],
    ids=["1d", "3d", "empty-rows", "empty-cols", "scalar", "strings", "object", "complex", "ragged", "lone-object"],
)
def test_malformed_arrays(cls, X, exc_type):
    expect_error(exc_type, "X", cls(n_components=1).fit, X)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_integer_and_bool_input_is_accepted(cls):
    X = np.random.default_rng(0).integers(0, 5, size=(30, 2))
    est = fit_quietly(cls(obs="mult", n_components=2, random_state=0), X)
    assert est.predict(X).shape == (30,)
    est = fit_quietly(cls(obs="bern", n_components=2, random_state=0), X > 2)
    assert est.predict(X > 2).shape == (30,)


@pytest.mark.parametrize("kind", KINDS)
def test_predict_checks_the_data_too(kind):
    X = valid_data(kind)
    est = fit_quietly(DPMixture(obs=kind, n_components=2, max_laps=5, random_state=0), X)
    for method in (est.predict, est.predict_proba, est.score_samples, est.score):
        exc = expect_error(ShapeError, "X", method, X[:, :2])
        assert "3" in str(exc)  # says how many columns were expected
        expect_error(ShapeError, "X", method, X[0])
        expect_error(NonFiniteError, "X", method, np.full((2, 3), np.nan))
        expect_error(DataError, "X", method, np.array([["a", "b", "c"]]))
    if kind == "mult":
        expect_error(DataError, "X", est.predict, -X)
    if kind == "bern":
        expect_error(DataError, "X", est.predict, X + 0.5)


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("method", ["predict", "predict_proba", "score", "score_samples", "top_l_mass", "elbo_terms"])
def test_use_before_fit_is_a_value_error(cls, method):
    """Unfitted use is a user mistake: a ``NotFittedError`` that is a ``ValueError`` (and, for
    ``hasattr``-style checks, an ``AttributeError``), exported from ``bnpcore``."""
    import bnpcore

    args = () if method == "elbo_terms" else (np.zeros((2, 2)),)
    with pytest.raises(bnpcore.NotFittedError, match="not fitted yet; call fit first") as info:
        getattr(cls(), method)(*args)
    assert type(info.value) is bnpcore.exceptions.NotFittedError
    assert isinstance(info.value, ValueError) and isinstance(info.value, BnpcoreError)
    assert isinstance(info.value, AttributeError)
    assert "NotFittedError" in bnpcore.__all__


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_negative_or_non_integer_counts(cls):
    X = valid_data("mult")
    bad = X.copy()
    bad[3, 0] = -1.0
    exc = expect_error(DataError, "X", cls(obs="mult", n_components=2).fit, bad)
    assert "negative" in str(exc)
    bad = X.copy()
    bad[3, 0] = 1.5
    exc = expect_error(DataError, "X", cls(obs="mult", n_components=2).fit, bad)
    assert "integer" in str(exc)


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("value", [0.5, 2.0, -1.0])
def test_non_binary_bernoulli(cls, value):
    X = valid_data("bern")
    X[5, 2] = value
    exc = expect_error(DataError, "X", cls(obs="bern", n_components=2).fit, X)
    assert "0 and 1" in str(exc)


# ----------------------------------------------------------------------------------------------
# hyperparameters and options
# ----------------------------------------------------------------------------------------------

BAD_PARAMS = [
    ("gamma", 0.0),
    ("gamma", -1.0),
    ("gamma", np.nan),
    ("gamma", np.inf),
    ("gamma", "big"),
    ("n_components", 0),
    ("n_components", -3),
    ("n_components", 2.5),
    ("n_components", True),
    ("obs", "poisson"),
    ("obs", None),
    ("algorithm", "gibbs"),
    ("init", "kmeans"),
    ("n_threads", 0),
    ("n_threads", -1),
    ("n_threads", 1.5),
    ("n_threads", "2"),
    ("max_laps", 0),
    ("tol", -1e-3),
    ("random_state", -1),
    ("random_state", "seed"),
    ("prior_scale", 0.0),
    ("prior_scale", -2.0),
    ("prior_mean_precision", 0.0),
    ("prior_mean_precision", -1.0),
    ("prior_mean", "median"),
    ("prior_mean", [np.nan, 0.0, 0.0]),
    ("prior_covariance", "diag"),
    ("prior_covariance", np.ones((2, 2))),  # wrong shape
    ("prior_covariance", np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])),  # not PD
    ("prior_covariance", np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])),  # not symmetric
    ("prior_dof", 1.0),  # gauss with D = 3 needs > 2
    ("prior_dof", -5.0),
    ("prior_dof", np.nan),
    ("prior_dof", "five"),
    ("prior_scale", "x"),
    ("prior_mean_precision", "x"),
    ("prior_mean", [1.0, 2.0]),  # wrong length
    ("prior_mean", np.zeros((3, 3))),
    ("max_laps", 2.5),
    ("gamma", None),
]


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("name,value", BAD_PARAMS, ids=[f"{n}={v!r}"[:40] for n, v in BAD_PARAMS])
def test_invalid_hyperparameters(cls, name, value):
    X = valid_data("gauss")
    expect_error(ParameterError, name, cls(**{"n_components": 2, name: value}).fit, X)


@pytest.mark.parametrize(
    "kind,name,value",
    [
        ("diag_gauss", "prior_dof", 0.0),
        ("diag_gauss", "prior_dof", "x"),
        ("bern", "prior_count", ([1.0, 2.0], 1.0)),
        ("diag_gauss", "prior_covariance", np.array([1.0, -1.0, 1.0])),
        ("zero_mean_gauss", "prior_dof", 2.0),
        ("zero_mean_gauss", "prior_covariance", -np.eye(3)),
        ("mult", "prior_count", 0.0),
        ("mult", "prior_count", -0.5),
        ("mult", "prior_count", [1.0, 1.0]),
        ("mult", "prior_count", np.nan),
        ("bern", "prior_count", 0.0),
        ("bern", "prior_count", (1.0, -1.0)),
        ("bern", "prior_count", (1.0, 1.0, 1.0)),
    ],
)
def test_invalid_model_specific_hyperparameters(kind, name, value):
    X = valid_data(kind)
    expect_error(ParameterError, name, DPMixture(obs=kind, n_components=2, **{name: value}).fit, X)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_more_components_than_rows(cls):
    X = valid_data("gauss", n=5)
    exc = expect_error(ParameterError, "n_components", cls(n_components=6).fit, X)
    assert "6" in str(exc) and "5" in str(exc)
    fit_quietly(cls(n_components=5, random_state=0), X)  # the boundary is fine


def test_params_are_validated_at_fit_not_construction():
    est = DPMixture(gamma=-1.0)  # scikit-learn convention: no error yet
    with pytest.raises(ParameterError, match="gamma"):
        est.fit(valid_data("gauss"))
    est.set_params(gamma=1.0)
    fit_quietly(est.set_params(max_laps=3, random_state=0), valid_data("gauss"))


# ----------------------------------------------------------------------------------------------
# numerical failures: an error, never a NaN
# ----------------------------------------------------------------------------------------------


def test_non_positive_definite_posterior_is_a_numerical_error():
    obs = _core.ObsModel("gauss", {"nu": 4.0, "kappa": 1.0, "m": np.zeros(2), "B": np.eye(2)})
    N = np.array([3.0])
    S = np.zeros((1, 6))
    S[0, 2:] = -10.0 * np.eye(2).ravel()  # Sxx negative definite: impossible summaries
    X = np.zeros((2, 2))
    for fn in (
        lambda: obs.e_log_lik(X, N, S),
        lambda: obs.elbo_data(N, S),
        lambda: obs.point_estimates(N, S),
        lambda: obs.log_density(X, N, S),
        lambda: _core.local_step(obs, _core.Alloc.fixed(np.zeros(1)), X, N, S),
    ):
        exc = expect_error(NumericalError, "positive definite", fn)
        assert isinstance(exc, ArithmeticError)
    diag = _core.ObsModel("diag_gauss", {"nu": 3.0, "kappa": 1.0, "m": np.zeros(1), "beta": np.ones(1)})
    expect_error(NumericalError, "positive definite", diag.elbo_data, np.array([2.0]), np.array([[10.0, 0.0]]))


@pytest.mark.parametrize("offset", [1e7, 1e9])
@pytest.mark.parametrize("kind", ["gauss", "diag_gauss"])
def test_far_from_origin_data_fit(offset, kind):
    """Rows 1e7..1e9 away from the origin with spread 1e-3: in the user's coordinates the
    posterior scale matrices would be differences of nearly equal numbers and lose positive
    definiteness (this used to raise NumericalError). Such data are fitted centred
    (bnpcore.obs.data_shift): the fit succeeds, is finite and reports means near the data."""
    rng = np.random.default_rng(0)
    X = offset + 1e-3 * rng.standard_normal((200, 2))
    m = fit_quietly(DPMixture(obs=kind, n_components=3, max_laps=10, random_state=0), X)
    assert np.isfinite(m.elbo_) and m.n_components_ >= 1
    assert np.all(np.abs(m.means_ - offset) < 1e-2)
    assert np.all(np.isfinite(m.predict_proba(X)))


@pytest.mark.parametrize("kind", ["gauss", "diag_gauss", "zero_mean_gauss"])
@pytest.mark.parametrize("scale", [1e160, 1e300])
def test_data_whose_squares_overflow(kind, scale):
    X = scale * np.random.default_rng(0).standard_normal((40, 2))
    exc = expect_error(DataError, "X", DPMixture(obs=kind, n_components=2).fit, X)
    assert "rescale" in str(exc)


def test_counts_whose_sums_overflow_are_a_data_error_naming_x():
    """Counts whose sums overflow float64 are bad input (a ValueError naming `X`), caught before
    any summary is formed, not a NumericalError from a NaN ELBO."""
    X = np.full((10, 3), 1e307)
    for est in (DPMixture(obs="mult", n_components=2, max_laps=3), FiniteMixture(obs="mult", n_components=2, max_laps=3)):
        exc = expect_error(DataError, "X", est.fit, X)
        assert isinstance(exc, ValueError) and not isinstance(exc, NumericalError)
        assert "overflow" in str(exc)
    # one count below the limit is fine on its own
    fit_quietly(DPMixture(obs="mult", n_components=2, max_laps=2), np.array([[1e300, 0.0, 1.0], [0.0, 2.0, 1.0]]))


def test_moderate_offset_fits():
    """Offset 1e4 with unit spread is well within double precision: it must simply work."""
    rng = np.random.default_rng(0)
    X = 1e4 + rng.standard_normal((300, 2)) + np.repeat([[0.0, 0.0], [8.0, 8.0]], 150, axis=0)
    # with the defaults (memoized, moves): the data are fitted centred (bnpcore.obs.data_shift),
    # so the per-batch ELBO checks see no round-off of an uncentred scatter
    est = fit_quietly(DPMixture(random_state=0), X)
    assert est.obs_model_.shift is not None
    assert est.n_components_ == 2 and np.all(np.isfinite(est.covariances_))
    est = DPMixture(n_components=4, algorithm="full", moves=(), max_laps=100, random_state=0).fit(X)
    assert est.n_components_ == 2 and np.all(np.isfinite(est.covariances_))


def test_model_elbo_refuses_non_finite_values():
    from bnpcore.alloc import DPAlloc
    from bnpcore.model import Model
    from bnpcore.obs import ObsModel
    from bnpcore.stats import SuffStats

    model = Model(DPAlloc(1.0), ObsModel("mult", {"lam": np.ones(2)}))
    stats = SuffStats(np.array([1.0]), np.array([[0.5, 0.5]]), np.array([np.nan]), 0.0, np.array([0]))
    with pytest.raises(NumericalError, match="not finite"):
        model.elbo(stats)


# ----------------------------------------------------------------------------------------------
# the private _core API: mismatched shapes and options
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def gauss_setup():
    rng = np.random.default_rng(0)
    obs = _core.ObsModel("gauss", {"nu": 5.0, "kappa": 1.0, "m": np.zeros(3), "B": np.eye(3)})
    X = rng.standard_normal((20, 3))
    N, S = obs.summarize(X, rng.dirichlet(np.ones(4), size=20))
    return obs, X, N, S


def test_core_shape_errors(gauss_setup):
    obs, X, N, S = gauss_setup
    e = np.zeros(4)
    expect_error(ShapeError, "S", _core.local_step, obs, _core.Alloc.fixed(e), X, N[:3], S)  # N vs S
    expect_error(ShapeError, "S", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S[:, :5])  # stat_dim
    expect_error(ShapeError, "e_log_pi", _core.local_step, obs, _core.Alloc.fixed(np.zeros(3)), X, N, S)
    expect_error(ShapeError, "X", _core.local_step, obs, _core.Alloc.fixed(e), X[:, :2], N, S)
    expect_error(ShapeError, "weights", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, weights=np.ones(19))
    expect_error(ShapeError, "resp", obs.summarize, X, np.ones((19, 2)))
    expect_error(ShapeError, "X", obs.summarize, X[:, :1], np.ones((20, 2)))
    expect_error(ShapeError, "N", obs.e_log_lik_sum_from_stats, N, S, N[:2], S[:2])
    expect_error(ShapeError, "S", obs.e_log_lik, X, N, S.T.copy())
    expect_error(ShapeError, "S", obs.elbo_data, N, S[:2])
    expect_error(ShapeError, "S", obs.point_estimates, N[:1], S)
    expect_error(ShapeError, "X", obs.log_density, np.ones((2, 4)), N, S)
    expect_error(ShapeError, "X", obs.check_data, np.ones((2, 4)))


def test_core_option_errors(gauss_setup):
    obs, X, N, S = gauss_setup
    e = np.zeros(4)
    for pairs in ([(0, 4)], [(2, 2)], [(0, 1), (5, 0)]):
        expect_error(ParameterError, "merge_pairs", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, merge_pairs=pairs)
    expect_error(ParameterError, "collect_cols", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, collect_cols=[4])
    expect_error(ParameterError, "collect_cols", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, collect_cols=[0, 4])
    expect_error(ParameterError, "cooccur_col", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, cooccur_col=7)
    expect_error(ParameterError, "weights", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, weights=-np.ones(20))
    expect_error(NonFiniteError, "e_log_pi", _core.local_step, obs, _core.Alloc.fixed(np.array([0.0, np.nan, 0.0, 0.0])), X, N, S)
    expect_error(NonFiniteError, "e_log_pi", _core.local_step, obs, _core.Alloc.fixed(np.array([0.0, np.inf, 0.0, 0.0])), X, N, S)
    for prop in (
        {"src": [4], "dest_cols": [0]},
        {"src": [], "dest_cols": [0]},
        {"src": [0], "dest_cols": []},
        {"src": [0], "dest_cols": [9]},
        {"src": [0], "fresh_N": N, "fresh_S": S, "fresh_e_log_pi": np.zeros(3)},
    ):
        expect_error(ParameterError, "proposals", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, proposals=[prop])
    expect_error(ShapeError, "S", _core.local_step, obs, _core.Alloc.fixed(e), X, N, S,
                 proposals=[{"src": [0], "fresh_N": N, "fresh_S": S[:, :4], "fresh_e_log_pi": np.zeros(4)}])
    expect_error(ParameterError, "i", obs.smoothed_divergence, X, 20)
    expect_error(ParameterError, "n_components", obs.kmeanspp, X, np.full(21, 0.5))
    expect_error(ParameterError, "uniforms", obs.kmeanspp, X, np.array([0.5, 1.0]))
    expect_error(ParameterError, "uniforms", obs.kmeanspp, X, np.array([np.nan]))
    expect_error(ParameterError, "n_threads", obs.summarize, X, np.ones((20, 1)), n_threads=0)


@pytest.mark.parametrize("kind", ["dp", "finite"])
@pytest.mark.parametrize("method", ["e_log_pi", "e_pi", "elbo", "merge_delta"])
def test_core_allocation_errors(kind, method):
    for gamma in (0.0, -1.0, np.nan, np.inf):
        expect_error(ParameterError, "gamma", lambda g=gamma: getattr(_core.Alloc(kind, g), method)(np.ones(3)))
    expect_error(NonFiniteError, "N", getattr(_core.Alloc(kind, 1.0), method), np.array([1.0, np.nan]))


@pytest.mark.parametrize(
    "kind,prior,exc_type,name",
    [
        ("gauss", {"nu": 1.0, "kappa": 1.0, "m": np.zeros(3), "B": np.eye(3)}, ParameterError, "prior_dof"),
        ("gauss", {"nu": 5.0, "kappa": 0.0, "m": np.zeros(3), "B": np.eye(3)}, ParameterError, "prior_mean_precision"),
        ("gauss", {"nu": 5.0, "kappa": 1.0, "m": np.zeros(2), "B": np.eye(3)}, ShapeError, "prior_mean"),
        ("gauss", {"nu": 5.0, "kappa": 1.0, "m": np.zeros(3), "B": -np.eye(3)}, ParameterError, "prior_covariance"),
        ("gauss", {"nu": 5.0, "kappa": 1.0, "m": np.zeros(3), "B": np.ones((3, 2))}, ShapeError, "prior_covariance"),
        ("gauss", {"nu": 5.0, "kappa": 1.0, "m": np.array([0, np.nan, 0]), "B": np.eye(3)}, NonFiniteError, "prior"),
        ("zero_mean_gauss", {"nu": 5.0, "B": np.zeros((0, 0))}, ShapeError, "prior_covariance"),
        ("diag_gauss", {"nu": 3.0, "kappa": 1.0, "m": np.zeros(2), "beta": np.array([1.0, 0.0])}, ParameterError, "prior_covariance"),
        ("diag_gauss", {"nu": -3.0, "kappa": 1.0, "m": np.zeros(2), "beta": np.ones(2)}, ParameterError, "prior_dof"),
        ("mult", {"lam": np.array([1.0, 0.0])}, ParameterError, "prior_count"),
        ("mult", {"lam": np.zeros(0)}, ShapeError, "prior_count"),
        ("bern", {"lam1": np.ones(2), "lam0": np.ones(3)}, ShapeError, "prior_count"),
        ("bern", {"lam1": np.ones(2), "lam0": -np.ones(2)}, ParameterError, "prior_count"),
        ("poisson", {}, ValueError, "poisson"),
    ],
)
def test_core_obs_model_constructor_errors(kind, prior, exc_type, name):
    if exc_type is ValueError:
        with pytest.raises(ValueError, match=name):
            _core.ObsModel(kind, prior)
        return
    expect_error(exc_type, name, _core.ObsModel, kind, prior)


# ----------------------------------------------------------------------------------------------
# memory layouts and a fuzz over arbitrary arrays: no panic, same numbers
# ----------------------------------------------------------------------------------------------

PRIORS = {
    "gauss": {"nu": 5.0, "kappa": 1.0, "m": np.zeros(3), "B": np.eye(3)},
    "diag_gauss": {"nu": 3.0, "kappa": 1.0, "m": np.zeros(3), "beta": np.ones(3)},
    "zero_mean_gauss": {"nu": 5.0, "B": np.eye(3)},
    "mult": {"lam": np.ones(3)},
    "bern": {"lam1": np.ones(3), "lam0": np.ones(3)},
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["fortran", "strided"])
def test_any_memory_layout_gives_the_same_result(kind, layout):
    rng = np.random.default_rng(1)
    obs = _core.ObsModel(kind, PRIORS[kind])
    X = valid_data(kind, n=1100, seed=2)  # > 2 chunks
    R = rng.dirichlet(np.ones(4), size=X.shape[0])
    N, S = obs.summarize(X, R)

    def relayout(a):
        if layout == "fortran":
            return np.asfortranarray(a)
        big = np.zeros((a.shape[0] * 2,) + a.shape[1:]) if a.ndim == 1 else np.zeros((a.shape[0], a.shape[1] * 2))
        view = big[::2] if a.ndim == 1 else big[:, ::2]
        view[...] = a
        return view

    Xl, Rl, Nl, Sl = relayout(X), relayout(R), relayout(N), relayout(S)
    e = np.log(np.full(4, 0.25))
    pairs = [
        (obs.summarize(Xl, Rl), obs.summarize(X, R)),
        (obs.e_log_lik(Xl, Nl, Sl), obs.e_log_lik(X, N, S)),
        (obs.log_density(Xl, Nl, Sl), obs.log_density(X, N, S)),
        (obs.elbo_data(Nl, Sl), obs.elbo_data(N, S)),
        (obs.e_log_lik_sum_from_stats(Nl, Sl, Nl, Sl), obs.e_log_lik_sum_from_stats(N, S, N, S)),
        (obs.smoothed_divergence(Xl, 3), obs.smoothed_divergence(X, 3)),
        (obs.kmeanspp(Xl, np.array([0.1, 0.5, 0.9])), obs.kmeanspp(X, np.array([0.1, 0.5, 0.9]))),
    ]
    pe_l, pe = obs.point_estimates(Nl, Sl), obs.point_estimates(N, S)
    pairs += [(pe_l[k], pe[k]) for k in pe]
    opts = dict(merge_pairs=[(0, 1)], proposals=[{"src": [0], "fresh_N": Nl[:2], "fresh_S": Sl[:2], "fresh_e_log_pi": relayout(np.zeros(2))}], return_resp=True)
    a = _core.local_step(obs, _core.Alloc.fixed(relayout(e)), Xl, Nl, Sl, weights=relayout(np.ones(X.shape[0])), **opts)
    opts["proposals"][0].update(fresh_N=N[:2], fresh_S=S[:2], fresh_e_log_pi=np.zeros(2))
    b = _core.local_step(obs, _core.Alloc.fixed(e), X, N, S, weights=np.ones(X.shape[0]), **opts)
    pairs += [(a[k], b[k]) for k in ("N", "S", "H", "pair_H", "resp", "lse_sum")]
    for got, want in pairs:
        if isinstance(got, tuple):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


ALLOWED = (BnpcoreError,)  # every rejection is a bnpcore error (a ValueError/ArithmeticError subclass)
FUZZ_D = 3  # the fuzz priors are 3-dimensional
FUZZ_STAT_DIM = {"gauss": 1 + FUZZ_D + FUZZ_D * FUZZ_D, "diag_gauss": 2 * FUZZ_D, "zero_mean_gauss": FUZZ_D * FUZZ_D, "mult": FUZZ_D, "bern": FUZZ_D}


def call_no_panic(fn, *args, **kwargs):
    """Any outcome but a panic (PanicException or the boundary's RuntimeError) or an error that
    is not a bnpcore error (a TypeError or KeyError from the bindings would be a defect too)."""
    try:
        out = fn(*args, **kwargs)
    except ALLOWED:
        return None
    except BaseException as exc:
        raise AssertionError(f"{type(exc).__name__}: {exc}") from None
    return out


float_values = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, 1e300, -1e300, 1e-300, np.nan, np.inf, -np.inf])


PLAIN_VALUES = st.floats(0.0, 3.0)


@st.composite
def fuzz_array(draw, shape, clean=PLAIN_VALUES):
    """An array of the given shape (or, one time in four, of a random shape up to 5 x 13)."""
    if draw(st.integers(0, 3)) == 0:
        shape = draw(st.tuples(st.integers(0, 5), st.integers(0, 13)))[: len(shape)]
    size = int(np.prod(shape))
    # most arrays hold plain values, so that calls with consistent shapes often succeed and their
    # results are checked for NaN (an array of 40 wild values almost never passes validation)
    elements = draw(st.sampled_from([float_values, clean, clean]))
    return np.array(draw(st.lists(elements, min_size=size, max_size=size)), dtype=float).reshape(shape)


FUZZ_CLEAN_X = {
    "gauss": st.floats(-3.0, 3.0),
    "diag_gauss": st.floats(-3.0, 3.0),
    "zero_mean_gauss": st.floats(-3.0, 3.0),
    "mult": st.integers(0, 3).map(float),
    "bern": st.sampled_from([0.0, 1.0]),
}


@st.composite
def fuzz_case(draw):
    kind = draw(st.sampled_from(KINDS))
    n, K = draw(st.integers(0, 5)), draw(st.integers(0, 4))
    dim = FUZZ_STAT_DIM[kind]
    case = {
        "kind": kind,
        "X": draw(fuzz_array((n, FUZZ_D), FUZZ_CLEAN_X[kind])),
        "R": draw(fuzz_array((n, K))),
        "N": draw(fuzz_array((K,))),
        "S": draw(fuzz_array((K, dim))),
        "e": draw(fuzz_array((K,))),
    }
    if K and draw(st.booleans()):  # summaries of real (weighted) rows: valid global parameters
        rows = draw(st.lists(st.floats(0.0, 3.0), min_size=4 * FUZZ_D, max_size=4 * FUZZ_D))
        weights = draw(st.lists(st.floats(0.0, 2.0), min_size=4 * K, max_size=4 * K))
        Xs = np.round(np.reshape(rows, (4, FUZZ_D)), 0 if kind == "mult" else 17)
        Xs = np.minimum(Xs, 1.0) if kind == "bern" else Xs
        case["N"], case["S"] = ref.summarize(kind, Xs, np.reshape(weights, (4, K)))
    return case


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=fuzz_case(),
    i=st.integers(0, 6),
    col=st.one_of(st.none(), st.integers(0, 6)),
    pairs=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=2),
    gamma=float_values,
)
def test_fuzz_core_never_panics(case, i, col, pairs, gamma):
    """Arbitrary shapes and values (NaN, inf, 1e300, empty) into every _core entry point; shapes
    are mostly consistent with the model, so successful calls (whose results must be NaN-free)
    happen for every observation model, Gaussians included."""
    kind, X, R, N, S, e = (case[k] for k in ("kind", "X", "R", "N", "S", "e"))
    obs = _core.ObsModel(kind, {k: (v[: 3] if np.ndim(v) == 1 else v) for k, v in PRIORS[kind].items()})
    call_no_panic(obs.check_data, X)
    call_no_panic(obs.h_sum, X)
    call_no_panic(obs.summarize, X, R)
    for fn in (obs.e_log_lik, obs.log_density):
        out = call_no_panic(fn, X, N, S)
        if out is not None and X.shape[0] > 0:
            event(f"{kind}: {fn.__name__} returned values")  # --hypothesis-show-statistics
            assert not np.isnan(out).any(), "NaN result without an error"
    for fn in (obs.elbo_data, obs.elbo_data_per_cluster, obs.point_estimates):
        call_no_panic(fn, N, S)
    call_no_panic(obs.e_log_lik_sum_from_stats, N, S, N, S)
    pos = np.array([i, 0, len(N) - 1, len(N), -1], dtype=np.int64)
    call_no_panic(obs.elbo_data_per_pair, N, S, pos, pos[::-1].copy())
    call_no_panic(obs.smoothed_divergence, X, i)
    call_no_panic(obs.kmeanspp, X, np.clip(np.nan_to_num(e), 0.0, 0.99))
    out = call_no_panic(
        _core.local_step, obs, _core.Alloc.fixed(e), X, N, S, merge_pairs=pairs, collect_cols=None if col is None else [col], cooccur_col=col, return_resp=True,
        proposals=[{"src": [i], "dest_cols": [0]}],
    )
    if out is not None:
        for key in ("N", "S", "H", "resp"):
            assert not np.isnan(out[key]).any(), f"NaN {key} without an error"
    for alloc in (call_no_panic(_core.Alloc, "dp", gamma), call_no_panic(_core.Alloc, "finite", gamma), _core.Alloc.fixed(e)):
        for method in ("e_log_pi", "e_pi", "elbo", "merge_delta"):
            if alloc is not None:
                call_no_panic(getattr(alloc, method), N)
