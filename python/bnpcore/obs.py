"""Observation models: priors (with data-scaled defaults, :func:`default_prior`) backed by the Rust core.

An :class:`ObsModel` is a kind name plus a dict of prior hyperparameters; its posterior is always
``prior ⊕ (N, S)`` for (effective) summaries ``(N, S)`` whose layout is documented in
``docs/internals.md``.
"""

from __future__ import annotations

import numbers

import numpy as np

from bnpcore import _core
from bnpcore.exceptions import DataError, ParameterError

__all__ = [
    "OBS_KINDS",
    "SHIFT_RATIO",
    "SMALL_MAGNITUDE",
    "ObsModel",
    "ar_rows",
    "check_magnitude",
    "check_rows_reachable",
    "check_small_magnitude",
    "data_shift",
    "default_prior",
    "log_multinomial_coefficient",
]

OBS_KINDS = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")

#: observation models a Rust core exists for beyond the mixtures' (the auto-regressive Gaussian
#: of the HMMs, whose rows pair each step with the previous one)
SEQUENCE_OBS_KINDS = ("ar_gauss",)


def _real_above(name: str, value, low: float, low_text: str) -> float:
    """``value`` as a float if it is a finite real number > ``low``; ParameterError naming ``name`` otherwise."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if not ok or not np.isfinite(value) or not value > low:
        raise ParameterError(f"`{name}` must be a finite number > {low_text}, got {value!r}")
    return float(value)


def _floor(cov_trace: float, d: int) -> float:
    eps = 1e-6 * cov_trace / d
    return eps if eps > 0 else 1e-6


def _as_matrix(value, d, name):
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (d, d):
        raise ParameterError(f"`{name}` must be a ({d}, {d}) matrix, got shape {arr.shape}")
    if not np.isfinite(arr).all() or not np.allclose(arr, arr.T, rtol=1e-10, atol=1e-12 * np.abs(arr).max()):
        raise ParameterError(f"`{name}` must be a finite symmetric matrix")
    try:
        np.linalg.cholesky(arr)
    except np.linalg.LinAlgError:
        raise ParameterError(f"`{name}` must be positive definite") from None
    return arr


def check_magnitude(kind: str, X, name: str = "X") -> None:
    """Refuse finite values too large for the model's arithmetic (the same rule for ``fit`` and
    for ``predict``/``predict_proba``/``score_samples``).

    Gaussian models need every sum of squares to be finite, multinomial models every sum of
    counts; past that (|x| beyond about 1e154 for Gaussians) log-likelihoods overflow and
    responsibilities would silently come out uniform or NaN.

    Parameters
    ----------
    kind : {"gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern", "ar_gauss"}
        The observation model (``"bern"`` data are 0/1 and need no check).
    X : ndarray of shape (n_samples, n_features)
        The data, in the model's coordinates.
    name : str, default="X"
        The argument name the error message gives.

    Raises
    ------
    DataError
        Naming ``name`` and the largest magnitude.
    """
    if kind in ("gauss", "diag_gauss", "zero_mean_gauss", "ar_gauss"):
        with np.errstate(over="ignore", invalid="ignore"):
            second_moment = float(np.einsum("ij,ij->", X, X))
        if not np.isfinite(second_moment):
            raise DataError(
                f"`{name}` is too large in magnitude (max |x| = {np.abs(X).max():.3g}): its sums of squares "
                "overflow float64, so no Gaussian summary can be formed; rescale the data"
            )
    elif kind == "mult":
        with np.errstate(over="ignore", invalid="ignore"):
            total = float(X.sum())
        if not np.isfinite(total):
            raise DataError(
                f"`{name}` holds counts too large to add up (max count = {np.abs(X).max():.3g}): their sums "
                "overflow float64, so no multinomial summary can be formed; rescale the counts"
            )


#: Gaussian training data whose largest magnitude is below this are refused: their squares
#: (about 1e-300 and less) reach the end of float64's normal range, where the covariances, the
#: data-scaled prior and the summaries lose their digits (the fit would silently merge clusters)
SMALL_MAGNITUDE = 1e-150


def check_small_magnitude(kind: str, X, name: str = "X") -> None:
    """Refuse Gaussian training data too small in magnitude for the model's arithmetic.

    The counterpart of :func:`check_magnitude` at the other end of float64's range, for the
    data a model is fitted to (rows to score are not checked: near a fitted model they are
    zeros). Data that are exactly zero pass.

    Parameters
    ----------
    kind : {"gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern", "ar_gauss"}
        The observation model (only the Gaussian ones are checked).
    X : ndarray of shape (n_samples, n_features)
        The data, in the model's coordinates (centred when :func:`data_shift` centred them).
    name : str, default="X"
        The argument name the error message gives.

    Raises
    ------
    DataError
        If the largest magnitude is positive and below :data:`SMALL_MAGNITUDE`, naming ``name``.
    """
    if kind not in ("gauss", "diag_gauss", "zero_mean_gauss", "ar_gauss") or X.size == 0:
        return
    top = float(np.abs(X).max())
    if 0.0 < top < SMALL_MAGNITUDE:
        raise DataError(
            f"`{name}` is too small in magnitude (max |x| = {top:.3g}, from the column means if the data were centred, "
            f"below {SMALL_MAGNITUDE:g}): its squares underflow float64, so no Gaussian summary can be formed; rescale the data"
        )


def check_rows_reachable(log_density, name: str = "X", rows=None) -> None:
    """Refuse rows whose log-density under every component is ``-inf``: finite rows so far
    from every fitted component (e.g. ``1e152`` for a model of scale ``1e-3``) that their
    quadratic forms overflow. Their responsibilities or states are undefined (a softmax of
    ``-inf`` only), so they are an error rather than a uniform row.

    Parameters
    ----------
    log_density : ndarray of shape (n_samples, K)
        Per-component log-densities of the rows.
    name : str, default="X"
        The argument name the error message gives.
    rows : ndarray of int or None, default=None
        The rows' indices in ``name`` when ``log_density`` holds some of its rows only.

    Raises
    ------
    DataError
        Naming ``name`` and the first such row.
    """
    log_density = np.asarray(log_density)
    if log_density.ndim != 2 or log_density.shape[1] == 0:
        return
    lost = np.isneginf(log_density).all(axis=1)
    if lost.any():
        first = int(np.flatnonzero(lost)[0])
        raise DataError(
            f"`{name}` row {first if rows is None else int(rows[first])} is too far from every fitted component: its log-density "
            "under each overflows to -inf, so it has no responsibilities; rescale or remove it"
        )


def log_multinomial_coefficient(X) -> np.ndarray:
    r"""Log multinomial coefficient :math:`\log\big(n!/\prod_v x_v!\big)`, :math:`n=\sum_v x_v`, of each row.

    The term of the multinomial log-probability that does not depend on the word probabilities:
    the kernels' plug-in ``log_density`` and the objective leave it out (``h = 0`` for
    ``obs="mult"``); ``score_samples``/``score`` of the mixtures and HMMs add it, so their values
    are log-probabilities of the count vectors (as :func:`scipy.stats.multinomial.logpmf`).

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Non-negative integer counts (validated by the caller). Sparse rows are read as CSR,
        never densified: O(nnz).

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    from scipy.special import gammaln

    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        X = X.tocsr()
        if not X.has_canonical_format:  # duplicate entries add up before the factorial
            X = X.copy()
            X.sum_duplicates()
        n = np.asarray(X.sum(axis=1), dtype=np.float64).ravel()
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        log_fact = np.bincount(rows, weights=gammaln(np.asarray(X.data, dtype=np.float64) + 1.0), minlength=X.shape[0])
        return gammaln(n + 1.0) - log_fact
    X = np.asarray(X, dtype=np.float64)
    return gammaln(X.sum(axis=1) + 1.0) - gammaln(X + 1.0).sum(axis=1)


def ar_rows(X, lengths=None, n_features=None):
    r"""Rows :math:`[x_t, x_{t-1}]` (every step but the first of each sequence) for the
    auto-regressive Gaussian (``obs="ar_gauss"``), and the new lengths (each one shorter).

    The HMMs build them from ``(X, lengths)`` themselves; for a mixture of auto-regressive
    regimes, ``DPMixture(obs="ar_gauss").fit(ar_rows(X, lengths)[0])`` clusters the steps
    (each regresses :math:`x_t` on :math:`x_{t-1}`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), or list of 2-D arrays
        Sequences concatenated (hmmlearn's convention), or one array per sequence.
    lengths : array-like of int or None
        Length of every sequence (summing to ``len(X)``); None is one sequence. Must be None
        when ``X`` is a list.
    n_features : int or None
        Expected number of columns of ``X`` (checked when given).

    Returns
    -------
    rows : ndarray of shape (n_samples - n_sequences, 2 * n_features)
        ``[x_t, x_{t-1}]`` of every sequence, in order.
    lengths : ndarray of int64, shape (n_sequences,)
        Rows per sequence.

    Raises
    ------
    DataError
        For scipy.sparse ``X`` (the Gaussian model needs dense rows), naming the argument.
    """
    from bnpcore._validation import check_array, check_lengths, is_sequence_list
    from bnpcore.exceptions import ShapeError

    if is_sequence_list(X):
        if lengths is not None:
            raise ParameterError("`lengths` must be None when `X` is a list of sequences (their lengths are their row counts)")
        seqs = [check_array(x, name=f"X[{i}]", n_features=n_features, obs="ar_gauss") for i, x in enumerate(X)]
    else:
        Xa = check_array(X, name="X", n_features=n_features, obs="ar_gauss")
        lens = np.array([Xa.shape[0]]) if lengths is None else check_lengths(lengths, Xa.shape[0], rows_name="X")
        seqs = np.split(Xa, np.cumsum(lens)[:-1])
    if any(s.shape[0] < 2 for s in seqs):
        raise ShapeError("obs='ar_gauss' needs sequences of at least 2 steps (x_t is regressed on x_{t-1})")
    Y = np.concatenate([np.hstack([s[1:], s[:-1]]) for s in seqs])
    return np.ascontiguousarray(Y), np.array([s.shape[0] - 1 for s in seqs], dtype=np.int64)


#: the auto-regressive prior refuses series whose step variance is below this fraction of their
#: mean square (a relative step size of 1e-7: past it the posterior's cancellations leave no digit)
AR_STEP_RESOLUTION = 1e-14


def _ar_prior(Y, prior_scale=1.0, prior_dof=None) -> dict:
    r"""Default Matrix-Normal-Wishart prior of the auto-regressive model from rows
    ``[x_t, x_{t-1}]``: :math:`\nu=F+2`, :math:`B=(\nu-F-1)\,s\,\mathrm{Cov}(x_t-x_{t-1})` (the
    scale of one step's innovation), :math:`M=0`, :math:`V=\bar v I` with
    :math:`\bar v=\frac1{NF}\sum_t\lVert x_{t-1}\rVert^2` (a weak shrinkage of the
    coefficients towards 0, worth about one average input row).

    Every term scales with the data, so rescaling a series rescales the fitted covariances and
    leaves the coefficients :math:`A_k` and the clustering unchanged. (A fixed :math:`V=I`
    would be strong shrinkage for small-valued series — at scale 0.01 it halved an AR(1)
    coefficient of 0.9 — and numerically singular posteriors for large-valued ones.)

    Raises
    ------
    DataError
        Sums of squares that overflow, values too small in magnitude
        (:func:`check_small_magnitude`), or steps :math:`x_t-x_{t-1}` below the float64
        resolution of the series' magnitude (a constant series, or one far from 0 next to its
        variation: the model has no intercept, so it cannot be centred internally).
    """
    n, d = Y.shape
    if d % 2:
        from bnpcore.exceptions import ShapeError

        raise ShapeError(f"obs='ar_gauss' needs rows [x_t, x_(t-1)] with an even number of columns, got {d} (see bnpcore.obs.ar_rows)")
    check_magnitude("ar_gauss", Y)
    check_small_magnitude("ar_gauss", Y)
    F = d // 2
    nu = float(F + 2 if prior_dof is None else _real_above("prior_dof", prior_dof, F - 1.0, f"F - 1 = {F - 1}"))
    diff = Y[:, :F] - Y[:, F:]
    v = float(np.einsum("ij,ij->", Y[:, F:], Y[:, F:])) / (max(n, 1) * F)
    scale = v if v > 0 else 1.0  # inputs all zero: unit scale
    # one step has no covariance: the scale of the values stands in for it
    cov = np.atleast_2d(np.cov(diff, rowvar=False)) if n > 1 else scale * np.eye(F)
    if n > 1 and np.trace(cov) <= AR_STEP_RESOLUTION * v * F:
        raise DataError(
            f"`X`: the steps x_t - x_(t-1) of the series are below the float64 resolution of its magnitude "
            f"(step variance {np.trace(cov) / F:.3g} against a mean square of {v:.3g}): a constant series has nothing "
            "to regress, and obs='ar_gauss' (no intercept) cannot be centred internally; subtract the series mean first"
        )
    cov = 0.5 * (cov + cov.T) + _floor(np.trace(cov), F) * np.eye(F)
    return {"nu": nu, "B": (nu - F - 1.0) * float(prior_scale) * cov, "M": np.zeros((F, F)), "V": scale * np.eye(F)}


def default_prior(
    kind: str,
    X: np.ndarray,
    *,
    prior_dof=None,
    prior_mean_precision=None,
    prior_mean="data",
    prior_covariance="data",
    prior_scale=1.0,
    prior_count=None,
) -> dict:
    """Prior hyperparameters for ``kind``, data-scaled where the user gave none.

    Parameters
    ----------
    kind : {"gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern", "ar_gauss"}
    X : ndarray of shape (n_samples, n_features)
        Training data (or its first batch) used for the data-scaled defaults (for
        ``"ar_gauss"`` rows ``[x_t, x_{t-1}]``, :func:`ar_rows`: ν̄ = F + 2, B̄ = (ν̄ − F − 1)·s·Cov(x_t − x_{t−1}),
        M̄ = 0, V̄ = v̄·I with v̄ the mean square of x_{t−1}).
    prior_dof : float, optional
        Wishart/Gamma degrees of freedom ν̄ (default D + 2, or 3 for ``diag_gauss``).
    prior_mean_precision : float, optional
        Normal-Wishart/Normal-Gamma κ̄ (default 1e-4).
    prior_mean : "data", 0 or array of shape (n_features,)
        m̄ (default: the data mean).
    prior_covariance : "data", "eye" or array
        E₀, the prior expected covariance before ``prior_scale`` (default: empirical covariance
        plus a floor ε₀ = 1e-6·tr/D; zero-mean: the second moment XᵀX/N plus the floor).
    prior_scale : float
        s_F, multiplies E₀ (default 1).
    prior_count : float, array or pair, optional
        Dirichlet pseudo-counts (``mult``, default 0.1) or Beta pseudo-counts (λ̄₁, λ̄₀) (``bern``,
        default (0.1, 0.1)).

    Returns
    -------
    dict
        The prior in the layout of docs/internals.md, e.g. ``{"nu", "kappa", "m", "B"}``.

    Raises
    ------
    DataError
        Gaussian data too large (:func:`check_magnitude`) or too small
        (:func:`check_small_magnitude`) in magnitude for float64, or counts whose sums overflow.
    """
    if kind == "ar_gauss":
        return _ar_prior(X, _real_above("prior_scale", prior_scale, 0.0, "0"), prior_dof)
    if kind not in OBS_KINDS:
        raise ParameterError(f"`obs` must be one of {OBS_KINDS + SEQUENCE_OBS_KINDS}, got {kind!r}")
    n, d = X.shape
    prior_scale = _real_above("prior_scale", prior_scale, 0.0, "0")
    check_magnitude(kind, X)
    check_small_magnitude(kind, X)
    if kind in ("gauss", "diag_gauss", "zero_mean_gauss"):
        if prior_mean_precision is None:
            prior_mean_precision = 1e-4
        prior_mean_precision = _real_above("prior_mean_precision", prior_mean_precision, 0.0, "0")
        if kind == "diag_gauss":
            nu = 3.0 if prior_dof is None else _real_above("prior_dof", prior_dof, 0.0, "0")
        else:
            nu = d + 2.0 if prior_dof is None else _real_above("prior_dof", prior_dof, d - 1.0, f"n_features - 1 = {d - 1}")
        nu = float(nu)
        if isinstance(prior_mean, str):
            if prior_mean != "data":
                raise ParameterError(f"`prior_mean` must be 'data', 0 or an array, got {prior_mean!r}")
            m = X.mean(axis=0)
        else:
            try:
                m = np.broadcast_to(np.asarray(prior_mean, dtype=np.float64), (d,)).copy()
            except (TypeError, ValueError):
                raise ParameterError(
                    f"`prior_mean` must be 'data', a number or an array of shape ({d},), got {prior_mean!r}"
                ) from None
            if not np.isfinite(m).all():
                raise ParameterError("`prior_mean` must be finite")
        if kind == "zero_mean_gauss":
            m = np.zeros(d)
        if kind == "diag_gauss":
            if isinstance(prior_covariance, str):
                if prior_covariance == "data":
                    var = X.var(axis=0)
                    v = var + _floor(var.sum(), d)
                elif prior_covariance == "eye":
                    v = np.ones(d)
                else:
                    raise ParameterError(f"`prior_covariance` must be 'data', 'eye' or an array, got {prior_covariance!r}")
            else:
                v = np.asarray(prior_covariance, dtype=np.float64)
                if v.shape == (d, d):
                    v = np.diag(v).copy()
                if v.shape != (d,) or not np.isfinite(v).all() or (v <= 0).any():
                    raise ParameterError(f"`prior_covariance` for diag_gauss must be {d} positive variances")
            denom = nu - 2.0 if nu > 2.0 else nu
            return {"nu": nu, "kappa": float(prior_mean_precision), "m": m, "beta": prior_scale * denom * v}
        if isinstance(prior_covariance, str):
            if prior_covariance == "data":
                if kind == "zero_mean_gauss":
                    e0 = X.T @ X / n
                else:
                    xc = X - X.mean(axis=0)
                    e0 = xc.T @ xc / n
                e0 = 0.5 * (e0 + e0.T) + _floor(np.trace(e0), d) * np.eye(d)
            elif prior_covariance == "eye":
                e0 = np.eye(d)
            else:
                raise ParameterError(f"`prior_covariance` must be 'data', 'eye' or an array, got {prior_covariance!r}")
        else:
            e0 = _as_matrix(prior_covariance, d, "prior_covariance")
        denom = nu - d - 1.0 if nu > d + 1.0 else nu
        B = prior_scale * denom * e0
        if kind == "zero_mean_gauss":
            return {"nu": nu, "B": np.ascontiguousarray(B)}
        return {"nu": nu, "kappa": float(prior_mean_precision), "m": m, "B": np.ascontiguousarray(B)}
    if kind == "mult":
        lam = 0.1 if prior_count is None else prior_count
        try:
            lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), (d,)).copy() if np.ndim(lam) <= 1 else None
        except (TypeError, ValueError):
            lam = None
        if lam is None or lam.shape != (d,) or not np.isfinite(lam).all() or (lam <= 0).any():
            raise ParameterError(f"`prior_count` must be a positive number or {d} positive numbers, got {prior_count!r}")
        return {"lam": lam}
    # bern
    pc = (0.1, 0.1) if prior_count is None else prior_count
    if np.isscalar(pc):
        pc = (pc, pc)
    if len(pc) != 2:
        raise ParameterError("`prior_count` for bern must be a pair (lam1, lam0)")
    try:
        lam1 = np.broadcast_to(np.asarray(pc[0], dtype=np.float64), (d,)).copy()
        lam0 = np.broadcast_to(np.asarray(pc[1], dtype=np.float64), (d,)).copy()
    except (TypeError, ValueError):
        raise ParameterError(f"`prior_count` for bern must be a pair of numbers or of {d}-vectors, got {prior_count!r}") from None
    if not (np.isfinite(lam1).all() and np.isfinite(lam0).all() and (lam1 > 0).all() and (lam0 > 0).all()):
        raise ParameterError("`prior_count` for bern must contain finite positive pseudo-counts")
    return {"lam1": lam1, "lam0": lam0}


#: a column whose mean is this many standard deviations from 0 makes Gaussian data centred
SHIFT_RATIO = 1e3


def data_shift(kind: str, X):
    r"""The translation under which a Gaussian model (with a mean) works on far-from-origin data.

    For ``gauss`` and ``diag_gauss``, when some column's mean lies more than
    :data:`SHIFT_RATIO` of its standard deviations from 0 (e.g. ``1e7 + N(0, 1e-3)``), the
    model is fitted to ``X - shift`` with ``shift`` the column means of ``X``. Summaries of such
    data in the user's coordinates would lose every significant digit to cancellation
    (:math:`\sum x x^\top - N\bar x\bar x^\top`); centred, they keep them. The model is
    translation-equivariant (the Normal prior's mean is translated with the data, the ELBO has
    unit Jacobian), so the fit is the same model, and every reported parameter is translated
    back to the user's coordinates. Other models, and data near the origin, get None (no shift).

    Parameters
    ----------
    kind : {"gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern", "ar_gauss"}
        The observation model.
    X : array-like of shape (n_samples, n_features)
        The data the prior is scaled from (the initialisation sample).

    Returns
    -------
    shift : ndarray of shape (n_features,) or None
        The column means of ``X`` to subtract, or None when the data are fitted as they are
        (also for data whose moments overflow: the support checks report those).
    """
    if kind not in ("gauss", "diag_gauss"):
        return None
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] == 0:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        mean = X.mean(axis=0)
        sd = X.std(axis=0)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))):
        return None  # overflowing data: the support checks report them
    if not np.any(np.abs(mean) > SHIFT_RATIO * sd):
        return None
    return np.ascontiguousarray(mean)


class ObsModel:
    """An observation model: ``kind`` plus prior hyperparameters, with the Rust kernels attached.

    Parameters
    ----------
    kind : {"gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern"}
    prior : dict
        Prior hyperparameters in the layout of docs/internals.md.
    """

    def __init__(self, kind: str, prior: dict, shift=None):
        if kind not in OBS_KINDS + SEQUENCE_OBS_KINDS:
            raise ParameterError(f"`obs` must be one of {OBS_KINDS + SEQUENCE_OBS_KINDS}, got {kind!r}")
        self.kind = kind
        self.prior = {
            k: (float(v) if np.isscalar(v) else np.ascontiguousarray(v, dtype=np.float64)) for k, v in prior.items()
        }
        self.shift = None if shift is None else np.ascontiguousarray(shift, dtype=np.float64)
        self._core = _core.ObsModel(kind, self.prior)

    def to_model(self, X):
        """``X`` in the model's coordinates: ``X - shift`` when the data were centred (see
        :func:`data_shift`), ``X`` itself otherwise."""
        if self.shift is None:
            return X
        return np.ascontiguousarray(X - self.shift)

    def check_data(self, X, name: str = "X") -> None:
        """Check rows for this model: its support (the Rust kernel's check: counts, binary
        values...) and :func:`check_magnitude`, so that values too large for the model's
        arithmetic are refused naming ``name`` rather than failing inside a local step.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Rows in the user's coordinates, float64, finite.
        name : str, default="X"
            The argument name error messages give.

        Raises
        ------
        DataError
            Values outside the model's support or too large in magnitude.
        """
        self._core.check_data(X, name)
        check_magnitude(self.kind, X, name)

    def log_density_constant(self, X):
        """Per-row term of the log density that the kernels' ``log_density`` leaves out (it does
        not depend on the parameters): :func:`log_multinomial_coefficient` for ``"mult"``, None
        for the other models (their ``log_density`` is complete). Added by ``score_samples`` and
        ``score``; never part of the objective."""
        if self.kind == "mult":
            return log_multinomial_coefficient(X)
        return None

    def elbo_roundoff(self, N, S) -> float:
        r"""An estimate of the round-off in the objective's observation terms at summaries
        ``(N, S)``, for the monotonicity checks (:func:`bnpcore.algorithms.memoized.is_decrease`).

        Full-covariance Gaussians (``"gauss"``, ``"zero_mean_gauss"``): the objective holds
        :math:`\tfrac{\nu_k}2\ln|B_k|` with :math:`B_k = B_0 + S_{xx,k} + \kappa_0 m_0 m_0^\top
        - \kappa_k m_k m_k^\top`, whose terms are sums over the rows. Entry :math:`(i, j)` of
        :math:`B_k` carries an error of about :math:`u\sqrt{n}\,g_{ki}g_{kj}` (:math:`u = 2^{-53}`,
        :math:`n` the rows summed, :math:`g_{ki}^2` the sum of the terms' :math:`i`-th diagonal
        entries, which bounds :math:`|\cdot|_{ij}` by Cauchy–Schwarz), and to first order
        :math:`|\delta\ln|B_k|| = |\mathrm{tr}(B_k^{-1}\delta B_k)| \le \sum_{ij}|B_k^{-1}|_{ij}|\delta B_k|_{ij}`:

        .. math:: \epsilon = u\sqrt{n+1}\sum_k \tfrac{\nu_k}2\, g_k^\top |B_k^{-1}|\, g_k.

        On well-conditioned data this is far below the checks' relative tolerance; on data
        that (nearly) lie in an affine subspace — proportions summing to one, linearly
        dependent columns — the default prior's floor makes :math:`B_k` nearly singular and
        the objective is only this precise: lap-to-lap changes below it are round-off, not
        decreases. Other observation models: 0 (their terms are well conditioned)."""
        if self.kind not in ("gauss", "zero_mean_gauss"):
            return 0.0
        N = np.maximum(np.asarray(N, dtype=np.float64), 0.0)
        S = np.asarray(S, dtype=np.float64)
        K, d = N.shape[0], self.n_features
        if K == 0:
            return 0.0
        p = self.prior
        off = 0 if self.kind == "zero_mean_gauss" else d
        sxx = S[:, off : off + d * d].reshape(K, d, d)
        B = p["B"] + sxx
        g = np.diagonal(p["B"])[None, :] + np.abs(np.diagonal(sxx, axis1=1, axis2=2))
        if self.kind == "gauss":
            kappa = p["kappa"] + N
            m = (p["kappa"] * p["m"] + S[:, :d]) / kappa[:, None]
            B = B + p["kappa"] * np.outer(p["m"], p["m"]) - kappa[:, None, None] * m[:, :, None] * m[:, None, :]
            g = g + p["kappa"] * p["m"] ** 2 + kappa[:, None] * m**2
        g = np.sqrt(g)
        try:
            Binv = np.abs(np.linalg.inv(0.5 * (B + B.transpose(0, 2, 1))))
        except np.linalg.LinAlgError:
            return float("inf")
        u = np.finfo(np.float64).eps / 2
        nu = p["nu"] + N
        return float(u * np.sqrt(N.sum() + 1.0) * np.sum(0.5 * nu * np.einsum("ki,kij,kj->k", g, Binv, g)))

    @classmethod
    def from_data(cls, kind: str, X: np.ndarray, **hyper) -> ObsModel:
        """Build with data-scaled default hyperparameters (see :func:`default_prior`)."""
        return cls(kind, default_prior(kind, X, **hyper))

    @property
    def n_features(self) -> int:
        return self._core.n_features

    @property
    def stat_dim(self) -> int:
        return self._core.stat_dim

    @property
    def core(self):
        """The Rust observation model."""
        return self._core

    def __getstate__(self):
        return {"kind": self.kind, "prior": self.prior, "shift": self.shift}

    def __setstate__(self, state):
        self.__init__(state["kind"], state["prior"], state.get("shift"))

    def __repr__(self) -> str:
        return f"ObsModel({self.kind!r}, n_features={self.n_features})"
