r"""The hidden-Markov-model family: the (sticky) HDP-HMM and the finite HMM (Hughes thesis ch. 6;
Hughes, Stephenson & Sudderth, NIPS 2015).

A model is an allocation model over state sequences (:class:`HDPHMMAlloc` or
:class:`FiniteHMMAlloc`) times an observation model (:class:`~bnpcore.obs.ObsModel`), with the
same verbs as the mixtures (``local_step``, ``stats_from_output``, ``elbo``), so the memoized,
full and stochastic algorithms of :mod:`bnpcore.algorithms` run it unchanged.

**Summaries** (additive over sequences): the observation summaries ``N``, ``S`` of the state
marginals, ``h``, the number of sequences ``n_seqs``, the start counts ``M0`` (K), the expected
transition counts ``M`` (K × K), and the chain entropy split as ``Hstart`` (K) and ``Htable``
(K × K). The per-state ``H`` is zero (the entropy of a chain is not a sum over its marginals).

**Objective** from summaries only:

.. math::
    \mathcal L = \sum_n h(x_n) + \sum_k\big[c(\bar\lambda)-c(\bar\lambda\oplus(N_k,S_k))\big]
    + \sum_k H^{start}_k + \sum_{jk} H_{jk} + \mathcal L_{trans}(M_0, M;\hat\theta,\hat u)
    + \mathcal L_{top}(\hat u,\hat\omega),

the transition term and the top-level surrogate of thesis Eq. 6.26–6.33 (with the sticky
correction documented in ``rust/bnpcore/src/alloc/hdp_hmm.rs``).

**Global step of the allocation.** :math:`\hat\theta` is closed form given the top-level sticks
:math:`\hat u`; :math:`(\hat u,\hat\omega)` maximise the surrogate given
:math:`\mathbb E[\ln\pi](\hat\theta)`. Here they are a *function of the summaries*: the complete
global step (alternating the two) is run from a fixed start (:math:`\hat u` giving equal
weights, :math:`\hat\omega=1+\gamma`) for :data:`GLOBAL_ITERS` rounds, then the sticks go to
their joint optimum with :math:`\hat\theta` profiled out, whenever the objective or a
local step needs them (cached by the summaries' bytes). Memoized updates, moves that evaluate
candidate summaries, and a resumed fit then need no allocation state of their own.
"""

from __future__ import annotations

import numpy as np

from bnpcore import _core
from bnpcore.data._base import SeqBatch
from bnpcore.exceptions import NumericalError
from bnpcore.stats import SuffStats

__all__ = ["GLOBAL_ITERS", "HMM_FIELDS", "FiniteHMMAlloc", "HDPHMMAlloc", "HMMModel", "init_hmm_stats"]

#: rounds of the complete allocation global step (θ̂ given û, then (û, ω̂) given E[ln π]) that
#: start the optimisation of the sticks with θ̂ profiled out (``profile=True`` of
#: :func:`bnpcore._core.hmm_global_step`): the alternation converges only linearly — a dozen
#: rounds alone left the sticks up to ~1 nat of objective short of their optimum at K ≈ 20, so
#: the ELBO could fall between laps and moves were judged on an underestimated objective
GLOBAL_ITERS = 2

#: allocation and entropy summary fields of the HMM family (declared in bnpcore.stats)
HMM_FIELDS = ("n_seqs", "M0", "M", "Hstart", "Htable")


def _key(stats) -> bytes:
    M0 = np.ascontiguousarray(stats["M0"], dtype=np.float64)
    M = np.ascontiguousarray(stats["M"], dtype=np.float64)
    return M0.tobytes() + M.tobytes()


class _HMMAlloc:
    """Shared parts: hyperparameters, the cache of the allocation globals, weights."""

    nested = True

    def __init__(self, alpha: float = 1.0, kappa: float = 0.0, gamma: float = 1.0, start_alpha: float = 1.0):
        self.alpha = float(alpha)
        self.kappa = float(kappa)
        self.gamma = float(gamma)
        self.start_alpha = float(start_alpha)
        self._cache: dict = {}

    def __getstate__(self):
        return self.to_dict()

    def __setstate__(self, state):
        self.__init__(state["alpha"], state["kappa"], state["gamma"], state["start_alpha"])

    def to_dict(self) -> dict:
        return {"name": self.name, "alpha": self.alpha, "kappa": self.kappa, "gamma": self.gamma, "start_alpha": self.start_alpha}

    def _hyper(self) -> dict:
        return {"alpha": self.alpha, "start_alpha": self.start_alpha, "kappa": self.kappa}

    def globals(self, stats) -> dict:
        key = _key(stats)
        g = self._cache.get(key)
        if g is None:
            g = self._compute(stats)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = g
        return g

    def log_potentials(self, stats):
        """``(log_start (K,), log_trans (K, K))``: E[ln π] of the start row and of the state rows
        restricted to the K represented states (what forward-backward uses)."""
        P = self.globals(stats)["e_log_pi"]
        K = stats.K
        return np.ascontiguousarray(P[0, :K]), np.ascontiguousarray(P[1:, :K])

    def startprob(self, stats) -> np.ndarray:
        th = self.globals(stats)["theta"]
        K = stats.K
        row = th[0, :K]
        return row / row.sum()

    def transmat(self, stats) -> np.ndarray:
        th = self.globals(stats)["theta"]
        K = stats.K
        T = th[1:, :K]
        return T / T.sum(axis=1, keepdims=True)

    def weights(self, stats) -> np.ndarray:
        """Share of the time steps each state explains (for sorting and reports)."""
        N = np.maximum(np.asarray(stats.N, dtype=np.float64), 0.0)
        return N / N.sum() if N.sum() > 0 else np.full(N.shape[0], 1.0 / max(N.shape[0], 1))


class HDPHMMAlloc(_HMMAlloc):
    r"""Sticky HDP-HMM transitions: :math:`\beta\sim\mathrm{GEM}(\gamma)`,
    :math:`\pi_j\sim\mathrm{DP}(\alpha\beta+\kappa\delta_j)`, start row
    :math:`\pi_0\sim\mathrm{DP}(\alpha_0\beta)` (Fox et al. 2011; Hughes et al. 2015)."""

    name = "hdp_hmm"

    def _compute(self, stats) -> dict:
        K = stats.K
        M0 = np.ascontiguousarray(stats["M0"], dtype=np.float64)
        M = np.ascontiguousarray(stats["M"], dtype=np.float64)
        u0 = np.asarray(_core.hmm_init_u(K), dtype=np.float64)
        w0 = np.full(K, 1.0 + self.gamma)
        return _core.hmm_global_step(M0, M, u0, w0, gamma=self.gamma, n_iters=GLOBAL_ITERS, profile=True, **self._hyper())

    def elbo(self, stats) -> float:
        g = self.globals(stats)
        e = _core.hmm_elbo_alloc(
            np.ascontiguousarray(stats["M0"], dtype=np.float64), np.ascontiguousarray(stats["M"], dtype=np.float64),
            np.ascontiguousarray(stats["Hstart"], dtype=np.float64), np.ascontiguousarray(stats["Htable"], dtype=np.float64),
            g["theta"], g["u"], g["omega"], gamma=self.gamma, **self._hyper(),
        )
        return float(e["total"])


class FiniteHMMAlloc(_HMMAlloc):
    r"""Finite HMM: :math:`\pi_0\sim\mathrm{Dir}(\alpha_0/K)`, :math:`\pi_j\sim\mathrm{Dir}(\alpha/K+\kappa\delta_j)`
    (not nested: K is fixed)."""

    name = "finite_hmm"
    nested = False

    def _compute(self, stats) -> dict:
        M0 = np.ascontiguousarray(stats["M0"], dtype=np.float64)
        M = np.ascontiguousarray(stats["M"], dtype=np.float64)
        theta = np.asarray(_core.finite_hmm_theta(M0, M, **self._hyper()))
        return {"theta": theta, "e_log_pi": np.asarray(_core.hmm_e_log_pi(theta))}

    def elbo(self, stats) -> float:
        g = self.globals(stats)
        e = _core.finite_hmm_elbo_alloc(
            np.ascontiguousarray(stats["M0"], dtype=np.float64), np.ascontiguousarray(stats["M"], dtype=np.float64),
            np.ascontiguousarray(stats["Hstart"], dtype=np.float64), np.ascontiguousarray(stats["Htable"], dtype=np.float64),
            g["theta"], **self._hyper(),
        )
        return float(e["total"])


class HMMModel:
    """An HMM: allocation ``alloc`` (:class:`HDPHMMAlloc` / :class:`FiniteHMMAlloc`) × observation
    model ``obs``. Batches are :class:`~bnpcore.data.SeqBatch` (whole sequences)."""

    def __init__(self, alloc, obs, top_l=None):
        self.alloc = alloc
        self.obs = obs
        self.top_l = None  # forward-backward is dense in the states

    def prepare(self, X):
        if isinstance(X, SeqBatch):
            return SeqBatch(self.obs.to_model(X.X), X.seq_range)
        return X

    def local_step(self, X: SeqBatch, glob: SuffStats, *, n_threads=None, return_resp=False, merge_pairs=None, **options) -> dict:
        """Forward-backward of every sequence of the batch with the globals of ``glob`` (Rust),
        reduced to the summaries."""
        log_start, log_trans = self.alloc.log_potentials(glob)
        return _core.hmm_local_step(
            self.obs.core, X.X, glob.N, glob.S, np.ascontiguousarray(X.seq_range, dtype=np.int64), log_start, log_trans,
            return_resp=return_resp, merge_pairs=merge_pairs, n_threads=n_threads,
        )

    @staticmethod
    def stats_from_output(out: dict, uids) -> SuffStats:
        K = np.asarray(out["N"]).shape[0]
        extra = {
            "n_seqs": float(np.asarray(out["log_z"]).shape[0]),
            "M0": np.asarray(out["start_count"], dtype=np.float64),
            "M": np.asarray(out["trans_count"], dtype=np.float64),
            "Hstart": np.asarray(out["h_start"], dtype=np.float64),
            "Htable": np.asarray(out["h_trans"], dtype=np.float64),
        }
        return SuffStats(out["N"], out["S"], np.zeros(K), float(out["h_sum"]), np.asarray(uids, dtype=np.int64).copy(), extra)

    def elbo_terms(self, stats: SuffStats) -> dict:
        return {
            "h": float(stats.h),
            "data": float(self.obs.core.elbo_data(stats.N, stats.S)),
            "alloc": float(self.alloc.elbo(stats)),
        }

    def elbo(self, stats: SuffStats) -> float:
        t = self.elbo_terms(stats)
        value = t["h"] + t["data"] + t["alloc"]
        if not np.isfinite(value):
            raise NumericalError(f"the HMM objective is not finite ({t}); the data or hyperparameters are degenerate")
        return value


def init_hmm_stats(obs, batch: SeqBatch, n_components: int, rng, *, block_len: int = 20) -> SuffStats:
    """Summaries of ``n_components`` initial states by *random contiguous blocks* (Hughes thesis
    §6.6): state k takes a window of ``block_len`` consecutive time steps of a sequence
    (sequences visited in a random order, cycling), one-hot. The observation summaries are
    those of the K windows, and so are the transition counts: each window of ``n`` steps adds
    its ``n - 1`` self-transitions to a count of one for every pair (start counts: one each).
    The first local step then sees states as persistent as the windows that define them.
    (BNPy's ``init_global_params`` starts the transitions from their prior alone; this departs
    from it.) With all-ones counts (equal initial transitions) the first step decoded the
    regimes of the auto-regressive toy step by step, learned non-sticky transitions from that
    and did not recover: started from the true labels' observation summaries, that fit ended at
    ARI 0.58, 600 nats below the one started with the true transition counts too (ARI 0.87);
    the default fits of ``make_sticky_hmm("ar", n_seqs=50, seq_len=2000)`` (seeds 1, 2) went
    from 100 laps (not converged) and 64 laps to 13 and 16, +990 and +620 nats
    (``docs/hmm.md``)."""
    K = int(n_components)
    X, sr = batch.X, np.asarray(batch.seq_range, dtype=np.int64)
    if X.shape[0] < K:
        from bnpcore.exceptions import ParameterError

        # as for the mixtures: more states than time steps cannot each hold one step
        raise ParameterError(f"`n_components`={K} exceeds the number of time steps ({X.shape[0]})")
    D = sr.shape[0] - 1
    order = rng.permutation(D)
    rows, labels = [], []
    for k in range(K):
        d = int(order[k % D])
        a0, b0 = int(sr[d]), int(sr[d + 1])
        T = b0 - a0
        if block_len >= T:
            a, b = a0, b0
        else:
            a = a0 + int(rng.integers(0, T - block_len + 1))
            b = a + block_len
        rows.append(np.arange(a, b))
        labels.append(np.full(b - a, k))
    idx = np.concatenate(rows)
    R = np.zeros((idx.size, K))
    R[np.arange(idx.size), np.concatenate(labels)] = 1.0
    N, S = obs.core.summarize(np.ascontiguousarray(X[idx]), R)
    M = np.ones((K, K)) + np.diag([float(r.size - 1) for r in rows])
    extra = {"n_seqs": 0.0, "M0": np.ones(K), "M": M, "Hstart": np.zeros(K), "Htable": np.zeros((K, K))}
    return SuffStats(N, S, np.zeros(K), 0.0, np.arange(K, dtype=np.int64), extra)
