"""Reference implementation of the fresh-cluster fit of a birth (spec 01 §6.2.3), the oracle of
the Rust kernel ``bnpcore._core.fit_fresh_clusters``.

It is the original Python loop: every iteration is a separate call of the (already
reference-checked) Rust kernels ``local_step``, ``summarize`` and ``kmeanspp``, and the ELBO
comparisons go through :meth:`bnpcore.model.Model.elbo`. It is never used at run time.
"""

import numpy as np

from bnpcore import _core
from bnpcore.stats import SuffStats

__all__ = ["TIE_RTOL", "fit_fresh_clusters"]

#: relative tolerance under which two log weights count as tied in a hard (k-means) step
TIE_RTOL = 1e-9


def _sub_elbo(model, out) -> float:
    # weighted subsample objective (Σh is constant across candidates and left out)
    st = SuffStats(out["N"], out["S"], out["H"], 0.0, np.arange(len(out["N"])))
    return model.elbo(st)


def fit_fresh_clusters(model, X, w, n_fresh, rng, *, n_seeds=None, iters=20, kmeans_iters=10, n_threads=None):
    r"""Fit fresh clusters to a weighted subsample (spec 01 §6.2.3): the reference algorithm.

    ``n_seeds`` (default ``n_fresh``) k-means++ seeds (the model's Bregman divergence, uniforms
    ``rng.random(J)``), ``kmeans_iters`` weighted hard-assignment (Bregman k-means) iterations
    (each row to the first cluster whose log weight is within :data:`TIE_RTOL` relative of its
    largest), then ``iters`` VB iterations of the mixture on ``X`` with row weights ``w``,
    dropping clusters with mass below one atom, then greedy merges of fresh pairs while the
    weighted ELBO rises (or while more than ``n_fresh`` clusters remain, never below two).

    Returns
    -------
    N, S : ndarray
        Effective summaries of the fresh clusters (sorted by decreasing mass), or ``None`` if
        fewer than two clusters survive.
    gain : float
        Weighted-subsample ELBO of the fit minus that of a single cluster (``-inf`` with
        ``None``).
    """
    core = model.obs.core
    m = X.shape[0]
    n_seeds = max(int(n_fresh), int(n_seeds or 0))
    J = int(min(n_seeds, m // 2))
    if J < 2:
        return None, None, -np.inf
    idx = np.asarray(core.kmeanspp(X, rng.random(J), n_threads=n_threads), dtype=np.int64)
    N, S = core.summarize(np.ascontiguousarray(X[idx]), np.eye(J), n_threads=n_threads)

    def step(N, S, pairs=None):
        kw = {"merge_pairs": pairs} if pairs else {}
        return _core.local_step(core, model.alloc.core, X, N, S, weights=w, n_threads=n_threads, **kw)

    def tidy(N, S):
        order = np.argsort(-N, kind="stable")
        N, S = N[order], S[order]
        keep = N >= 1.0
        return np.ascontiguousarray(N[keep]), np.ascontiguousarray(S[keep])

    def run_vb(N, S, n_iter):
        for _ in range(n_iter):
            out = step(N, S)
            N_new, S_new = tidy(out["N"], out["S"])
            # (no cluster left, e.g. every row's weight below 1 after k-means: nothing to compare)
            done = N_new.shape[0] == N.shape[0] and (N.shape[0] == 0 or np.max(np.abs(N_new - N)) < 1e-3 * max(1.0, float(N.sum())) * 1e-2)
            N, S = N_new, S_new
            if N.shape[0] < 2 or done:
                break
        return N, S

    # Bregman k-means (hard assignments) before the soft iterations: soft VB from one-atom
    # seeds tends to let one broad cluster absorb overlapping components
    for _ in range(int(kmeans_iters)):
        # first maximum of the log weights, values equal up to TIE_RTOL (relative) counting as
        # tied: exact ties are common at one-atom seeds of discrete models
        W = core.e_log_lik(X, N, S, n_threads=n_threads) + model.alloc.e_log_pi(N)[None, :]
        top = W.max(axis=1, keepdims=True)
        z = np.argmax(top - TIE_RTOL * np.maximum(1.0, np.abs(top)) <= W, axis=1)
        hard = np.zeros_like(W)
        hard[np.arange(m), z] = w
        N_new, S_new = core.summarize(X, hard, n_threads=n_threads)
        N_new, S_new = tidy(N_new, S_new)
        same = N_new.shape == N.shape and np.array_equal(N_new, N)
        N, S = N_new, S_new
        if same or N.shape[0] < 2:
            break
    N, S = run_vb(N, S, int(iters))
    # greedy merges among the fresh clusters, judged by the weighted subsample ELBO, while they
    # help or while there are more than n_fresh clusters (never below two: whether a split pays
    # off is decided on the whole dataset)
    while N.shape[0] >= 3:
        J = N.shape[0]
        pairs = [(a, b) for a in range(J) for b in range(a + 1, J)]
        out = step(N, S, pairs)
        base = SuffStats(out["N"], out["S"], out["H"], 0.0, np.arange(J))
        L0 = model.elbo(base)
        gains = [model.elbo(base.merge(a, b, float(out["pair_H"][i]))) - L0 for i, (a, b) in enumerate(pairs)]
        best = int(np.argmax(gains))
        if not gains[best] > 0 and n_fresh >= J:
            N, S = tidy(out["N"], out["S"])
            break
        a, b = pairs[best]
        merged = base.merge(a, b, 0.0)
        N, S = run_vb(*tidy(merged.N, merged.S), max(1, int(iters) // 4))
    if N.shape[0] < 2:
        return None, None, -np.inf
    fit = _sub_elbo(model, step(N, S))
    N1, S1 = core.summarize(X, w[:, None], n_threads=n_threads)
    one = model.elbo(SuffStats(N1, S1, np.zeros(1), 0.0, np.zeros(1, dtype=np.int64)))
    return N, S, fit - one
