"""Helpers shared by the whole test suite (one place; imported as ``from _helpers import ...``).

``tests/conftest.py`` puts this directory on ``sys.path`` once, so every test module, in any
sub-folder, imports these names the same way; no test imports ``conftest``.
"""

import warnings

import numpy as np
from bnpcore import DPMixture
from bnpcore.exceptions import ConvergenceWarning

#: every observation model, in the order the tests are parametrised
KINDS = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")


def hellinger(P, Q):
    """Hellinger distances between the rows of ``P`` and of ``Q`` (distributions, e.g. topics):
    ``H[i, j]``."""
    return np.sqrt(0.5 * ((np.sqrt(P)[:, None, :] - np.sqrt(Q)[None, :, :]) ** 2).sum(axis=2))


def fit_quietly(est, X, **fit_kw):
    """Fit, tolerating only a ConvergenceWarning (every other warning stays an error, in
    particular the ELBODecreaseWarning that pyproject.toml turns into one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, **fit_kw)


def resume_from_file(est, X, path, **params):
    """Save the fitted ``est`` to ``path``, load it, set ``warm_start=True`` and ``params`` (e.g.
    ``max_laps``) and fit it on ``X`` again: the resumed estimator."""
    import bnpcore

    est.save(path)
    again = bnpcore.load(path)
    again.set_params(warm_start=True, **params)
    return fit_quietly(again, X)


def assert_same_trajectory(a, b):
    """The two fits ran the same laps: equal ``history_`` columns (``seconds`` aside) and equal
    ``moves_log_``."""
    for k in ("lap", "elbo", "n_components"):
        assert np.array_equal(a.history_[k], b.history_[k]), k
    assert a.moves_log_ == b.moves_log_


def family_data(family):
    """Small data of the topic (``"topic"``: bars) or HMM (``"hmm"``: sticky toy) family and the
    fit's keyword arguments."""
    import bnpcore

    if family == "topic":
        X, _ = bnpcore.datasets.make_bars(n_docs=120, n_tokens=60, random_state=3)
        return X, {}
    X, lengths = bnpcore.datasets.make_sticky_hmm(n_seqs=8, seq_len=200, random_state=0)[:2]
    return X, {"lengths": lengths}


def family_estimator(family, **kw):
    """HDPTopicModel / HDPHMM from one topic or state, memoized over 3 batches, default moves."""
    import bnpcore

    cls = bnpcore.HDPTopicModel if family == "topic" else bnpcore.HDPHMM
    return cls(n_components=1, n_batches=3, random_state=2, tol=0, **kw)


def memo(**kw):
    """A memoized DPMixture with the given options (moves: the estimator's default unless given)."""
    return DPMixture(algorithm="memoized", **kw)


def synthetic_data(kind, n=240, n_clusters=3, seed=0, D=None):
    """Rows from a well-separated ``n_clusters``-component mixture of the given observation model,
    and their labels.

    gauss/diag_gauss: Gaussian blobs in 2-D; zero_mean_gauss: zero-mean Gaussians with different
    covariance orientations; mult: count vectors (20 tokens) from distinct word distributions;
    bern: binary vectors from distinct prototypes with 10 % flips.
    """
    rng = np.random.default_rng(seed)
    z = np.arange(n) % n_clusters
    rng.shuffle(z)
    if kind in ("gauss", "diag_gauss"):
        D = D or 2
        centres = 8.0 * rng.standard_normal((n_clusters, D))
        return centres[z] + rng.standard_normal((n, D)), z
    if kind == "zero_mean_gauss":
        D = D or 2
        X = np.empty((n, D))
        for c in range(n_clusters):
            A = rng.standard_normal((D, D)) * np.exp(rng.uniform(-1.0, 1.5, size=D))
            idx = z == c
            X[idx] = rng.standard_normal((idx.sum(), D)) @ A.T
        return X, z
    if kind == "mult":
        D = D or 12
        topics = rng.dirichlet(np.full(D, 0.2), size=n_clusters)
        return np.array([rng.multinomial(20, topics[c]) for c in z], dtype=float), z
    D = D or 10
    protos = rng.random((n_clusters, D)) < 0.5
    flips = rng.random((n, D)) < 0.1
    return (protos[z] ^ flips).astype(float), z


def seeded_data(obs: str, n: int = 600, d: int = 3, k: int = 4, seed: int = 0) -> np.ndarray:
    """Rows of a ``k``-component mixture with random labels (overlapping clusters allowed);
    discrete models get ``2 d`` columns."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, k, size=n)
    if obs in ("gauss", "diag_gauss"):
        centers = rng.normal(0, 4, size=(k, d))
        return centers[z] + rng.normal(size=(n, d))
    if obs == "zero_mean_gauss":
        scales = rng.uniform(0.3, 3.0, size=(k, d))
        return rng.normal(size=(n, d)) * scales[z]
    if obs == "mult":
        p = rng.dirichlet(np.full(2 * d, 0.3), size=k)
        return np.stack([rng.multinomial(20, p[j]) for j in z]).astype(np.float64)
    if obs == "bern":
        p = rng.uniform(0.05, 0.95, size=(k, 2 * d))
        return (rng.random((n, 2 * d)) < p[z]).astype(np.float64)
    raise ValueError(obs)


def tree_total(memos):
    """Σ memos by the fixed binary tree over the batch index that FitState uses for G
    (an independent re-statement of the documented order, so tests can demand bit equality)."""

    def rec(lo, hi):
        if hi - lo == 1:
            return memos[lo]
        mid = (lo + hi) // 2
        a, b = rec(lo, mid), rec(mid, hi)
        return a if b is None else (b if a is None else a + b)

    return rec(0, len(memos))


def close(a, b, rtol=1e-10):
    """max |a - b| <= rtol * max(1, max |b|) (one scale for the whole array)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    return np.abs(a - b).max(initial=0.0) <= rtol * scale


PAD = np.iinfo(np.uint32).max


def dense_resp(out, K):
    """Dense responsibilities from a local step's output (numpy only: L-sparse rows come as
    value/index pairs padded with index 2**32 - 1)."""
    if "resp" in out:
        return np.array(out["resp"])
    R = np.zeros((out["resp_val"].shape[0], K))
    rows, slots = np.nonzero(out["resp_idx"] != PAD)
    R[rows, out["resp_idx"][rows, slots].astype(np.int64)] = out["resp_val"][rows, slots]
    return R


def record_memos(monkeypatch):
    """Pair every memo a lap stores with the local step that produced it: batch rows, global
    parameters (N, S, uids), the responsibilities of that visit and the model's top_l.

    Returns a dict: set ``rec["on"] = True`` to start recording; ``rec["memos"][b]`` then holds
    ``(X_b, N, S, uids, R_b, top_l)`` of the latest visit of batch ``b``."""
    from bnpcore.algorithms._base import FitState
    from bnpcore.model import Model

    rec = {"on": False, "last": None, "memos": {}}
    orig_step, orig_set = Model.local_step, FitState.set_memo

    def local_step(self, X, glob, **options):
        out = orig_step(self, X, glob, **{**options, "return_resp": True})
        rec["last"] = (np.array(X), glob.N.copy(), glob.S.copy(), glob.uids.copy(), dense_resp(out, glob.K), self.top_l)
        return out

    def set_memo(self, b, new):
        if rec["on"]:
            # a memo set by anything but a lap's local step (a move) is not paired: None
            rec["memos"][b] = rec["last"]
        rec["last"] = None
        return orig_set(self, b, new)

    monkeypatch.setattr(Model, "local_step", local_step)
    monkeypatch.setattr(FitState, "set_memo", set_memo)
    return rec
