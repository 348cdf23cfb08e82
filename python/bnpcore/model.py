"""Model = allocation model × observation model: local step, summaries, ELBO."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from bnpcore._validation import kernel_array
from bnpcore.stats import SuffStats

__all__ = ["Model"]

#: a ``top_l`` above the number of columns any local step has (column indices are ``uint32``,
#: ``2**32 - 1`` pads) keeps every entry: larger values are passed to the kernels as this one
MAX_TOP_L = int(np.iinfo(np.uint32).max)


def _is_sparse(X) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def _csr_tuple(X) -> tuple:
    """``(indptr, indices, data, n_features)`` of a scipy.sparse batch for the Rust CSR local step
    (no copy when ``X`` is already CSR with float64 values and matching index dtypes, its arrays
    contiguous and aligned: :func:`~bnpcore._validation.kernel_array`)."""
    X = X.tocsr()
    data = kernel_array(X.data, np.float64)
    idx_dtype = np.int64 if X.indptr.dtype == np.int64 or X.indices.dtype == np.int64 else np.int32
    indptr = kernel_array(X.indptr, idx_dtype)
    indices = kernel_array(X.indices, idx_dtype)
    return indptr, indices, data, int(X.shape[1])


class Model:
    """A model: ``alloc`` (any :class:`~bnpcore.alloc.AllocModel`, e.g.
    :class:`~bnpcore.alloc.DPAlloc`) times ``obs`` (:class:`~bnpcore.obs.ObsModel`).

    Global parameters are *effective summaries*: the posterior of every component is
    ``prior ⊕ (N_k, S_k)`` and the allocation posterior is the allocation model's function of
    the summaries (of ``N`` only for mixtures). The local step gets the allocation from
    ``alloc.core_for(glob)``.

    ``top_l`` (int or None) makes every local step L-sparse: each row keeps its ``top_l``
    largest log weights, renormalised (Hughes & Sudderth 2016 §3; Hughes thesis §7.1); None is dense.
    """

    def __init__(self, alloc, obs, top_l=None):
        self.alloc = alloc
        self.obs = obs
        self.top_l = top_l

    def prepare(self, X):
        """A batch in the model's coordinates (the observation model may centre far-from-origin
        Gaussian data, :func:`bnpcore.obs.data_shift`); every kernel call on user data goes
        through it."""
        to_model = getattr(self.obs, "to_model", None)
        return X if to_model is None else to_model(X)

    # ----------------------------------------------------------------- local step
    def local_step(self, X, glob: SuffStats, *, n_threads=None, **options) -> dict:
        r"""Fused local step + summaries of a batch with global parameters ``glob`` (Rust).

        The model's ``top_l`` is used unless ``top_l`` is given in ``options``; ``prepared``
        (from :meth:`prepare_local` with the same ``glob``) skips rebuilding the table of the
        global parameters. A scipy.sparse batch (count models ``mult`` and ``bern``) goes to
        the Rust kernel as CSR, borrowed without a dense copy: log weights :math:`W=XT+c` and
        statistics :math:`S\mathrel{+}=R^\top X` cost :math:`O(\mathrm{nnz}\cdot K)` instead of
        :math:`O(N\cdot V\cdot K)`, and the result does not depend on the number of threads.
        """
        from bnpcore import _core

        top_l = options.setdefault("top_l", self.top_l)
        if top_l is not None and top_l > MAX_TOP_L:
            # any L at least the number of columns keeps every entry; the kernel takes a machine integer
            options["top_l"] = MAX_TOP_L
        prepared = options.pop("prepared", None)
        if prepared is None:
            core_alloc = self.alloc.core_for(glob)
        else:
            core_alloc, options["prepared"] = prepared
        if _is_sparse(X):
            X = _csr_tuple(X)
        return _core.local_step(self.obs.core, core_alloc, X, glob.N, glob.S, n_threads=n_threads, **options)

    def prepare_local(self, glob: SuffStats):
        """The global parameters of ``glob`` prepared once (table of E[log F] and allocation log
        weights) for several :meth:`local_step` calls with the same ``glob``, passed as
        ``prepared=``: the same results, bit for bit, without repeating the per-cluster work."""
        from bnpcore import _core

        core_alloc = self.alloc.core_for(glob)
        return core_alloc, _core.prepare_local(self.obs.core, core_alloc, glob.N, glob.S)

    @staticmethod
    def resp_from_output(out: dict, n_components: int) -> np.ndarray:
        """Dense responsibilities ``(n_samples, n_components)`` of a local step run with
        ``return_resp=True``: ``out["resp"]``, or the L-sparse ``resp_idx``/``resp_val`` rows
        scattered into a dense array (padding index ``2**32-1`` is skipped)."""
        if "resp" in out:
            return out["resp"]
        idx = out["resp_idx"]
        val = out["resp_val"]
        R = np.zeros((idx.shape[0], n_components))
        keep = idx != np.iinfo(np.uint32).max
        rows = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
        R[rows[keep], idx[keep].astype(np.intp)] = val[keep]
        return R

    @staticmethod
    def stats_from_output(out: dict, uids) -> SuffStats:
        return SuffStats(out["N"], out["S"], out["H"], float(out["h_sum"]), np.asarray(uids, dtype=np.int64).copy())

    # ---------------------------------------------------------------------- ELBO
    def elbo_terms(self, stats: SuffStats) -> dict:
        """The ELBO (Hughes thesis eqs. 3.42, 3.44, 3.51) split into its terms (all from summaries)."""
        data = self.obs.core.elbo_data(stats.N, stats.S)
        return {
            "h": float(stats.h),
            "data": float(data),
            "entropy": float(stats.H.sum()),
            "alloc": float(self.alloc.elbo(stats)),
        }

    def elbo(self, stats: SuffStats) -> float:
        r"""Exact ELBO at optimal global parameters, from summaries only:

        .. math:: \mathcal L=\sum_n h(x_n)+\sum_k\big[c(\bar\lambda)-c(\bar\lambda\oplus(N_k,S_k))\big]+\sum_kH_k+\mathcal L_{alloc}(N)
        """
        t = self.elbo_terms(stats)
        value = t["h"] + t["data"] + t["entropy"] + t["alloc"]
        if not np.isfinite(value):
            from bnpcore.exceptions import NumericalError

            raise NumericalError(f"the ELBO is not finite ({t}); the data or hyperparameters are degenerate")
        return value

    # -------------------------------------------------------------- initialisation
    def init_stats(self, X, n_components: int, init: str, rng: np.random.Generator, n_threads=None) -> SuffStats:
        """Summaries of ``n_components`` distinct atoms chosen by ``init`` (Hughes thesis §2.4.2, Alg. 2.2).

        ``"kmeans++"``: Bregman k-means++ with the model's divergence; ``"random_from_data"``:
        uniformly without replacement. Each cluster is the posterior after one atom.
        """
        n = X.shape[0]
        if n_components > n:
            from bnpcore.exceptions import ParameterError

            raise ParameterError(f"`n_components`={n_components} exceeds the number of rows ({n})")
        if init == "kmeans++":
            idx = np.asarray(self.obs.core.kmeanspp(X, rng.random(n_components), n_threads=n_threads), dtype=np.int64)
        elif init == "random_from_data":
            idx = rng.choice(n, size=n_components, replace=False)
        else:  # pragma: no cover - validated by the estimator
            raise ValueError(init)
        N, S = self.obs.core.summarize(np.ascontiguousarray(X[idx]), np.eye(n_components), n_threads=n_threads)
        return SuffStats(N, S, np.zeros(n_components), 0.0, np.arange(n_components, dtype=np.int64))

    # ------------------------------------------------------------------- scoring
    def log_weights(self, glob: SuffStats) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.alloc.weights(glob))

    def score_samples(self, X, glob: SuffStats, n_threads=None) -> np.ndarray:
        """Plug-in mixture log density ``log Σ_k w_k F(x_n | φ̂_k)``, with the per-row constant the
        kernel leaves out (the multinomial coefficient for ``obs="mult"``,
        :meth:`~bnpcore.obs.ObsModel.log_density_constant`)."""
        constant = getattr(self.obs, "log_density_constant", None)
        constant = None if constant is None else constant(X)
        if _is_sparse(X):
            X = _csr_tuple(X)  # CSR rows read by the Rust kernel: O(nnz K)
        logp = self.obs.core.log_density(X, glob.N, glob.S, n_threads=n_threads)
        out = logsumexp(logp + self.log_weights(glob), axis=1)
        return out if constant is None else out + constant
