r"""The HDP topic model and LDA as a model family of the shared engine: allocation models
(:class:`HDPTopicAlloc`, :class:`LDAAlloc`) and the model (:class:`TopicModel`) whose verbs the
lap loop calls (``local_step``, ``stats_from_output``, ``elbo``, ``alloc.nested``).

**Model** (Hughes thesis §5.1; Teh et al. 2006). Topics :math:`\phi_k\sim\mathrm{Dir}_V(\bar\lambda)`,
top-level sticks :math:`u_k\sim\mathrm{Beta}(1,\gamma)` with
:math:`\pi^G_k=u_k\prod_{\ell<k}(1-u_\ell)`, document proportions
:math:`\pi_d\sim\mathrm{DP}(\alpha,\pi^G)`, tokens :math:`z_{dt}\sim\pi_d`,
:math:`x_{dt}\sim\phi_{z_{dt}}`. LDA replaces the top level by the fixed vector
:math:`\pi_d\sim\mathrm{Dir}_K(\alpha/K)` (Hughes & Sudderth 2016, App. C).

**Objective** (thesis §5.2, eq. 5.25–5.27, 5.47–5.48). With the summaries of a
:class:`~bnpcore.stats.SuffStats` (``N``, ``S``, ``H`` and the allocation fields ``D``,
``P``, ``P_rem``, ``Q0``, ``Q``, ``Q_rem`` produced by the Rust document step),

.. math::

    \mathcal L = \sum_k\big[c_{\rm Dir}(\bar\lambda)-c_{\rm Dir}(\bar\lambda+S_k)\big]
      + \sum_k H_k
      + Q_0+\sum_kQ_k+Q_{\rm rem}+\alpha\sum_k\beta_kP_k+\alpha\beta_{>K}P_{\rm rem}
      + \mathcal L^{\rm sur}_{\rm top}(\rho,\omega;D,K),

where :math:`\mathcal L^{\rm sur}_{\rm top}` is the surrogate bound of thesis eq. 5.25 (so the
HDP objective is a lower bound on the ELBO, itself a lower bound on the evidence). The topic
posteriors are always optimal, :math:`\hat\lambda_k=\bar\lambda+S_k`. The stick means
:math:`\rho` are a *deterministic function of the summaries*: they maximise the objective
(thesis eq. 5.34–5.39, heuristic :math:`\omega`) by L-BFGS from the fixed start
:math:`\rho^{(0)}_k=(D+1)/(D+1+D(K+1-k)+\gamma)`. So the objective reported for a set of
summaries is the maximum over :math:`\rho` of the surrogate, every algorithm and every move
evaluates candidates the same way, and a saved model needs nothing beyond its summaries.
The optimum is cached per summaries (keyed on ``D``, ``P``, ``P_rem``).

The local step (Rust, :func:`bnpcore._core.doc_topic_step`) is the per-document coordinate
ascent of thesis Alg. 5.1 with restart proposals (Alg. 5.2), optionally L-sparse (thesis
Alg. 7.4), started cold from the current globals.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from bnpcore import _core
from bnpcore._validation import kernel_csr
from bnpcore.exceptions import DataError, NumericalError
from bnpcore.stats import SuffStats

__all__ = ["HDPTopicAlloc", "LDAAlloc", "TopicModel", "TruncationFreeHDPAlloc", "csr_rows_dense", "init_topic_stats"]

#: pseudo tokens spread uniformly over the vocabulary per token of an initial topic's document
#: (:func:`init_topic_stats`)
INIT_SMOOTHING = 5.0

#: summary fields of the allocation part (besides N, S, H) produced by the document step
TOPIC_FIELDS = ("D", "P", "P_rem", "Q0", "Q", "Q_rem")


class HDPTopicAlloc:
    r"""Allocation model of the HDP topic model: top-level sticks optimised from the summaries.

    Parameters
    ----------
    alpha : float
        Document-level concentration :math:`\alpha>0`.
    gamma : float
        Top-level concentration :math:`\gamma>0`.

    Notes
    -----
    :meth:`sticks` returns the stick means :math:`\rho` maximising the objective for given
    summaries (L-BFGS from a fixed start, thesis eq. 5.34–5.39) and the heuristic totals
    :math:`\omega_k=D(K+1-k)+D+1+\gamma` (eq. 5.39); :math:`\beta_k=\mathbb E[\pi^G_k]` follows.
    """

    name = "hdp_topic"
    nested = True

    def __init__(self, alpha: float = 0.5, gamma: float = 10.0):
        self.alpha = float(alpha)
        self.gamma = float(gamma)
        self._cache: OrderedDict = OrderedDict()

    def __getstate__(self):
        return {"alpha": self.alpha, "gamma": self.gamma}

    def __setstate__(self, state):
        self.__init__(state["alpha"], state["gamma"])

    def __repr__(self) -> str:
        return f"HDPTopicAlloc(alpha={self.alpha!r}, gamma={self.gamma!r})"

    def to_dict(self) -> dict:
        return {"name": self.name, "alpha": self.alpha, "gamma": self.gamma}

    @classmethod
    def from_dict(cls, d: dict):
        return cls(float(d["alpha"]), float(d["gamma"]))

    # ------------------------------------------------------------------ sticks
    def sticks(self, stats) -> tuple[np.ndarray, np.ndarray]:
        """``(rho, omega)`` maximising the objective for the summaries ``stats``."""
        K = stats.K
        D = max(float(stats["D"]), 0.0)
        P = np.ascontiguousarray(stats["P"], dtype=np.float64)
        p_rem = float(stats["P_rem"])
        key = (K, D, P.tobytes(), p_rem)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        rho0 = _core.hdp_rho_init(D, K, self.gamma)
        res = _core.hdp_optimize_rho(rho0, P, p_rem, D, self.alpha, self.gamma)
        out = (np.asarray(res["rho"]), np.asarray(res["omega"]))
        self._cache[key] = out
        if len(self._cache) > 16:
            self._cache.popitem(last=False)
        return out

    def global_step(self, stats) -> dict:
        """``rho``, ``omega``, ``beta`` (E[π^G_k]) and ``beta_rem`` (E[π^G_{>K}])."""
        rho, omega = self.sticks(stats)
        beta, beta_rem = _core.hdp_beta_from_rho(rho)
        return {"rho": rho, "omega": omega, "beta": np.asarray(beta), "beta_rem": float(beta_rem)}

    def beta(self, stats) -> tuple[np.ndarray, float]:
        """``(beta, beta_rem)``: expected global topic probabilities and the rest mass."""
        rho, _ = self.sticks(stats)
        beta, beta_rem = _core.hdp_beta_from_rho(rho)
        return np.asarray(beta), float(beta_rem)

    def doc_prior(self, stats) -> tuple[np.ndarray, float | None]:
        r"""Document prior pseudocounts :math:`a_k=\alpha\beta_k` and :math:`a_{\rm rem}=\alpha\beta_{>K}`."""
        beta, beta_rem = self.beta(stats)
        return np.ascontiguousarray(self.alpha * beta), max(self.alpha * beta_rem, 1e-300)

    def e_log_pi(self, stats) -> np.ndarray:
        """ln E[π^G_k] (diagnostics)."""
        with np.errstate(divide="ignore"):
            return np.log(self.beta(stats)[0])

    def weights(self, stats) -> np.ndarray:
        """E[π^G_k] = β_k of the K represented topics (they sum to 1 − β_{>K})."""
        return self.beta(stats)[0]

    def elbo(self, stats) -> float:
        """Document term (from summaries) plus the surrogate top term at the optimal sticks."""
        rho, omega = self.sticks(stats)
        beta, beta_rem = _core.hdp_beta_from_rho(rho)
        doc = _core.hdp_elbo_doc(
            float(stats["Q0"]),
            np.ascontiguousarray(stats["Q"]),
            float(stats["Q_rem"]),
            np.ascontiguousarray(stats["P"]),
            float(stats["P_rem"]),
            self.alpha,
            np.asarray(beta),
            float(beta_rem),
        )
        top = _core.hdp_elbo_top(rho, omega, max(float(stats["D"]), 0.0), self.alpha, self.gamma)
        return float(doc + top)

    def core_for(self, stats):  # pragma: no cover - the topic model calls its own kernel
        raise NotImplementedError("the HDP topic model's local step is bnpcore._core.doc_topic_step")

    def merge_delta(self, stats) -> np.ndarray:  # pragma: no cover - topic merges use their own statistics
        raise NotImplementedError("topic merges are evaluated from the merge statistics of the document step")


class TruncationFreeHDPAlloc:
    r"""Allocation model of an HDP topic model fitted by truncation-free SVI (Wang & Blei 2012):
    the top-level sticks are the fitted factors :math:`q(\bar\pi_k)=\mathrm{Beta}(u_k,v_k)`
    stored with the summaries (fields ``tf_u``, ``tf_v``), so
    :math:`\beta_k=\mathbb E[\pi^G_k]=\frac{u_k}{u_k+v_k}\prod_{\ell<k}\frac{v_\ell}{u_\ell+v_\ell}`
    and the document prior is :math:`\alpha\beta_k`, :math:`\alpha\beta_{>K}` (as for
    :class:`HDPTopicAlloc`). The method optimises no objective: :meth:`elbo` is NaN.
    """

    name = "hdp_topic_tf"
    nested = True

    def __init__(self, alpha: float = 0.5, gamma: float = 10.0):
        self.alpha = float(alpha)
        self.gamma = float(gamma)

    def __repr__(self) -> str:
        return f"TruncationFreeHDPAlloc(alpha={self.alpha!r}, gamma={self.gamma!r})"

    def to_dict(self) -> dict:
        return {"name": self.name, "alpha": self.alpha, "gamma": self.gamma}

    @classmethod
    def from_dict(cls, d: dict):
        return cls(float(d["alpha"]), float(d["gamma"]))

    def beta(self, stats) -> tuple[np.ndarray, float]:
        """``(beta, beta_rem)`` from the stick factors."""
        u = np.asarray(stats["tf_u"], dtype=np.float64)
        v = np.asarray(stats["tf_v"], dtype=np.float64)
        m = u / (u + v)
        rest = np.concatenate([[1.0], np.cumprod(1.0 - m)])
        return m * rest[:-1], float(rest[-1])

    def global_step(self, stats) -> dict:
        beta, beta_rem = self.beta(stats)
        return {"beta": beta, "beta_rem": beta_rem}

    def doc_prior(self, stats) -> tuple[np.ndarray, float]:
        beta, beta_rem = self.beta(stats)
        return np.ascontiguousarray(self.alpha * beta), max(self.alpha * beta_rem, 1e-300)

    def weights(self, stats) -> np.ndarray:
        return self.beta(stats)[0]

    def e_log_pi(self, stats) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.beta(stats)[0])

    def elbo(self, stats) -> float:
        """NaN: truncation-free SVI has no objective."""
        return float("nan")


class LDAAlloc:
    r"""Allocation model of LDA: documents :math:`\pi_d\sim\mathrm{Dir}_K(\alpha/K)` (no global
    step; Hughes & Sudderth 2016, App. C, eq. 47–49). Not nested in K."""

    name = "lda"
    nested = False

    def __init__(self, alpha: float = 0.5):
        self.alpha = float(alpha)

    def __getstate__(self):
        return {"alpha": self.alpha}

    def __setstate__(self, state):
        self.__init__(state["alpha"])

    def __repr__(self) -> str:
        return f"LDAAlloc(alpha={self.alpha!r})"

    def to_dict(self) -> dict:
        return {"name": self.name, "alpha": self.alpha}

    @classmethod
    def from_dict(cls, d: dict):
        return cls(float(d["alpha"]))

    def global_step(self, stats) -> dict:
        return {}

    def doc_prior(self, stats) -> tuple[np.ndarray, None]:
        return np.full(stats.K, self.alpha / stats.K), None

    def weights(self, stats) -> np.ndarray:
        """The fixed uniform global vector 1/K."""
        return np.full(stats.K, 1.0 / stats.K)

    def e_log_pi(self, stats) -> np.ndarray:
        return np.full(stats.K, -np.log(stats.K))

    def elbo(self, stats) -> float:
        """Document term of LDA (eq. 47–49) from summaries."""
        return float(
            _core.lda_elbo_doc(
                max(float(stats["D"]), 0.0),
                self.alpha,
                float(stats["Q0"]),
                np.ascontiguousarray(stats["Q"]),
                np.ascontiguousarray(stats["P"]),
            )
        )

    def core_for(self, stats):  # pragma: no cover
        raise NotImplementedError("the LDA local step is bnpcore._core.doc_topic_step")

    def merge_delta(self, stats) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError("LDA has no moves")


class TopicModel:
    """A topic model: an allocation model (:class:`HDPTopicAlloc` or :class:`LDAAlloc`) times
    the Dirichlet–multinomial observation model ``obs`` (an :class:`~bnpcore.obs.ObsModel` of
    kind ``"mult"`` holding the topic-word pseudocount ``lam``).

    Parameters
    ----------
    alloc : HDPTopicAlloc or LDAAlloc
    obs : ObsModel
    top_l : int or None
        L-sparse document steps (None: dense; L ≥ K runs the dense step).
    doc_options : dict or None
        Options of :func:`bnpcore._core.doc_topic_step` (``max_iter``, ``tol``, ``restarts``,
        ...).
    """

    #: the last topic table is kept for reuse while it has at most this many entries (K × V;
    #: the table and its Dirichlet parameters: twice as many doubles)
    TABLE_CACHE_MAX_ENTRIES = 1 << 24

    def __init__(self, alloc, obs, top_l=None, doc_options=None):
        self.alloc = alloc
        self.obs = obs
        self.top_l = top_l
        self.doc_options = dict(doc_options or {})
        #: (uids, λ̂, table) of the last table computed (:meth:`topic_table`)
        self._table_cache = None

    def clear_caches(self) -> None:
        """Drop the last topic table (:meth:`topic_table`): the fit ends (a fitted model does not
        keep 2 K V numbers it no longer needs)."""
        self._table_cache = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_table_cache"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._table_cache = None

    @property
    def prior_lam(self) -> np.ndarray:
        return np.asarray(self.obs.prior["lam"], dtype=np.float64)

    def lam(self, glob: SuffStats) -> np.ndarray:
        r"""Posterior Dirichlet parameters :math:`\hat\lambda_k=\bar\lambda+S_k`, shape (K, V)."""
        return np.ascontiguousarray(self.prior_lam[None, :] + glob.S)

    # ----------------------------------------------------------------- local step
    def local_step(self, X, glob: SuffStats, *, n_threads=None, table=None, **options) -> dict:
        r"""Document step of the CSR batch ``X`` with the globals of ``glob`` (Rust): topic table
        :math:`\exp\mathbb E[\ln\phi_{kv}]` from :math:`\bar\lambda+S`, document prior from the
        allocation model. ``table`` (V × K) replaces the table (e.g. point estimates for
        scoring). Other options go to :func:`bnpcore._core.doc_topic_step`."""
        K = glob.K
        if table is None:
            table = self.topic_table(glob, n_threads=n_threads)
        a, a_rem = self.alloc.doc_prior(glob)
        opts = dict(self.doc_options)
        opts.update(options)
        top_l = opts.pop("top_l", self.top_l)
        if top_l is not None and top_l >= K:
            top_l = None
        return _core.doc_topic_step(*kernel_csr(X), table, a, alpha_beta_rem=a_rem, top_l=top_l, n_threads=n_threads, **opts)

    def step_globals(self, glob: SuffStats, *, n_threads=None) -> dict:
        r"""The options of :meth:`local_step` that depend on the globals only (the topic table
        :math:`\exp\mathbb E[\ln\phi]`), for several batches stepped against the same globals
        (:func:`bnpcore.algorithms.executor.shared_options`)."""
        return {"table": self.topic_table(glob, n_threads=n_threads)}

    def topic_table(self, glob: SuffStats, *, n_threads=None) -> np.ndarray:
        r"""The topic table :math:`\exp\mathbb E[\ln\phi_{kv}]` (V × K, C order) of the globals
        ``glob``: :func:`bnpcore._core.topic_word_table` of :math:`\hat\lambda=\bar\lambda+S`.

        The columns of topics whose :math:`\hat\lambda_k` equals, element for element, that of
        the same topic (uid) in the last table computed are copied from it; the others are
        computed. Every entry depends on its own topic's row only, so a copied column is the
        column a recomputation gives, bit for bit. A move's candidates share most topics with
        the summaries they are judged against (a delete all but one, a birth all but its
        target), and several candidates are judged against the same summaries, so most of
        their tables cost a copy instead of :math:`KV` digammas."""
        lam = self.lam(glob)
        K, V = lam.shape
        uids = np.asarray(glob.uids, dtype=np.int64)
        old = self._table_cache
        table = None
        if old is not None and K and old[1].shape[1] == V:
            pos = {u: i for i, u in enumerate(old[0].tolist())}
            src = np.array([pos.get(u, -1) for u in uids.tolist()], dtype=np.int64)
            same = src >= 0
            for k in np.flatnonzero(same):
                same[k] = np.array_equal(lam[k], old[1][src[k]])
            if same.any():
                # one contiguous gather of every column (a placeholder where a column is new:
                # overwritten below); assigning into the selected columns instead was 10× slower
                table = np.take(old[2], np.where(same, src, 0), axis=1)
                if not same.all():
                    new = ~same
                    table[:, new] = _core.topic_word_table(np.ascontiguousarray(lam[new]), prior=self.prior_lam, n_threads=n_threads)
        if table is None:
            table = _core.topic_word_table(lam, prior=self.prior_lam, n_threads=n_threads)
        self._table_cache = (uids.copy(), lam, table) if K * V <= self.TABLE_CACHE_MAX_ENTRIES else None
        return table

    @staticmethod
    def overrelaxed(glob: SuffStats, direction: np.ndarray, eta: float) -> SuffStats:
        r"""The summaries whose globals an over-relaxed local step uses
        (:mod:`bnpcore.algorithms.overrelax`): ``glob`` with the topic-word counts
        :math:`\max(S + (\eta - 1)\,\Delta S, 0)` (counts stay counts) and their row sums
        as ``N``. Defining this method is what makes a model's full and memoized laps
        over-relax."""
        out = glob.shallow_copy()
        S = np.maximum(glob.S + (eta - 1.0) * direction, 0.0)
        out.S = S
        out.N = S.sum(axis=1)
        return out

    @staticmethod
    def stats_from_output(out: dict, uids) -> SuffStats:
        """Summaries (``N``, ``S``, ``H``, ``h = 0`` and the allocation fields) of a document step."""
        extra = {name: out["n_docs"] if name == "D" else out[name] for name in TOPIC_FIELDS}
        extra["D"] = float(extra["D"])
        return SuffStats(out["N"], out["S"], out["H"], 0.0, np.asarray(uids, dtype=np.int64).copy(), extra)

    # ----------------------------------------------------------------------- ELBO
    def elbo_terms(self, stats: SuffStats) -> dict:
        """The objective split into its terms (data, entropy, allocation; ``h`` = 0 for tokens)."""
        return {
            "h": 0.0,
            "data": float(self.obs.core.elbo_data(stats.N, stats.S)),
            "entropy": float(stats.H.sum()),
            "alloc": float(self.alloc.elbo(stats)),
        }

    def elbo(self, stats: SuffStats) -> float:
        """The objective (module docstring) from summaries only."""
        t = self.elbo_terms(stats)
        value = t["data"] + t["entropy"] + t["alloc"]
        if not np.isfinite(value):
            raise NumericalError(f"the topic-model objective is not finite ({t}); the data or hyperparameters are degenerate")
        return value


# ----------------------------------------------------------------------------- initialisation
def csr_rows_dense(X, rows) -> np.ndarray:
    """Dense copy of a few rows of a CSR matrix (a (len(rows), V) array; the corpus itself is
    never densified)."""
    out = np.zeros((len(rows), X.shape[1]))
    for i, d in enumerate(rows):
        a, b = int(X.indptr[d]), int(X.indptr[d + 1])
        np.add.at(out[i], np.asarray(X.indices[a:b], dtype=np.int64), X.data[a:b])
    return out


def _kmeanspp_docs(X, K: int, prior_count: float, rng) -> np.ndarray:
    r"""Bregman k-means++ seeding on documents with the multinomial (KL) divergence: the first
    document uniformly at random, each next one with probability proportional to
    :math:`\min_j T_d\,\mathrm{KL}(\hat p_d\,\|\,\mu_j)`, :math:`\mu_j` the chosen documents'
    word frequencies smoothed by ``prior_count`` (Hughes & Sudderth 2016, App. D.4)."""
    n = X.shape[0]
    T = np.asarray(X.sum(axis=1)).ravel()
    data = np.asarray(X.data, dtype=np.float64)
    rows = np.repeat(np.arange(n), np.diff(X.indptr))
    pos = data > 0  # a stored zero adds 0·ln 0 = 0 (T_d > 0 wherever a count is positive)
    neg_ent = np.zeros(n)
    np.add.at(neg_ent, rows[pos], data[pos] * np.log(data[pos] / T[rows[pos]]))
    chosen = [int(rng.integers(n))]
    best = np.full(n, np.inf)
    for _ in range(1, K):
        row = csr_rows_dense(X, [chosen[-1]])[0] + prior_count
        log_mu = np.log(row / row.sum())
        div = neg_ent - X @ log_mu  # Σ_v x_dv ln(x_dv / (T_d μ_v))
        best = np.minimum(best, np.maximum(div, 0.0))
        best[chosen] = 0.0
        tot = best.sum()
        if not tot > 0:
            remaining = np.setdiff1d(np.arange(n), chosen)
            chosen.append(int(rng.choice(remaining)))
            continue
        c = np.searchsorted(np.cumsum(best), rng.random() * tot, side="right")
        chosen.append(int(min(c, n - 1)))
    return np.asarray(chosen, dtype=np.int64)


def _redrawn_topics(S: np.ndarray, n_new: int, rng) -> np.ndarray:
    """``n_new`` extra initial topics from the rows of ``S`` (topics of distinct documents):
    rows taken in rounds of a random permutation, each a draw from the Dirichlet whose
    parameters are that row, scaled to the row's total (a Gamma draw per word, normalised)."""
    n = S.shape[0]
    rows = np.concatenate([rng.permutation(n) for _ in range(-(-n_new // n))])[:n_new]
    base = S[rows]
    out = rng.gamma(base)
    out *= base.sum(axis=1, keepdims=True) / out.sum(axis=1, keepdims=True)
    return out


def init_topic_stats(X0, n_components: int, init: str, rng, *, n_docs: float, prior_count: float, smoothing: float = INIT_SMOOTHING) -> SuffStats:
    """Summaries of ``n_components`` initial topics, each built from one document of ``X0``
    (``"random_docs"``: uniformly without replacement; ``"kmeans++"``: Bregman k-means++ on
    documents), with ``D = n_docs`` and zero document statistics, so the first local step uses
    the sticks :math:`\\rho^{(0)}` (nearly uniform :math:`\\beta` for large ``D``).

    Topic k gets the pseudo word counts :math:`S_k = x_d + s\\,T_d\\,\\mathbf 1/V` of its
    document d (:math:`T_d` tokens) blended with ``smoothing`` = s times as many tokens spread
    uniformly over the vocabulary. A topic that is a single raw document gives its other words
    almost no probability, so in the first laps words outside a document's main topics are
    pulled towards whichever topic happens to contain them; topics then stay too sharp and
    documents keep spurious topics (a local optimum of the objective). On the toy bars
    (``make_bars``, K = 50, merge + delete) s = 0 ends about 2·10⁴ nats below the optimum
    reached from the true topics, s = 5 within about 1.5·10³ nats (measured for this
    implementation, not a number from the literature).

    With fewer non-empty documents in ``X0`` than ``n_components``, every non-empty document
    gives one topic as above (in the order of ``init``) and each further topic is a random
    redraw of one of them: documents taken in rounds of a random permutation, the topic a
    draw from :math:`\\mathrm{Dir}(S_d)` scaled to the same total :math:`(1+s)T_d` (a fresh
    perturbation each time, so no two topics are equal). Corpora with enough documents draw
    nothing more from ``rng``: their initial topics are those of the documents alone.

    Raises
    ------
    DataError
        If ``X0`` holds no words (every document empty): the corpus itself, or the
        ``init_subsample`` documents read from it when ``X0`` holds fewer than ``n_docs``."""
    T = np.asarray(X0.sum(axis=1)).ravel()
    usable = np.flatnonzero(T > 0)
    if usable.size == 0:
        if X0.shape[0] < n_docs:
            raise DataError(
                f"`X`: the {X0.shape[0]} documents read to initialise the topics (`init_subsample`) hold no words; "
                "raise init_subsample"
            )
        raise DataError("`X` holds no words (every document is empty)")
    n_base = min(int(n_components), usable.size)
    if init == "random_docs":
        idx = usable[rng.choice(usable.size, size=n_base, replace=False)]
    elif init == "kmeans++":
        from bnpcore._validation import make_csr

        sub = X0[usable] if usable.size < X0.shape[0] else X0
        sub = make_csr(sub.data, sub.indices, sub.indptr, sub.shape)
        idx = usable[_kmeanspp_docs(sub, n_base, prior_count, rng)]
    else:  # pragma: no cover - validated by the estimator
        raise ValueError(init)
    S = csr_rows_dense(X0, idx)
    S += float(smoothing) * S.sum(axis=1, keepdims=True) / S.shape[1]
    if n_components > n_base:
        S = np.vstack([S, _redrawn_topics(S, int(n_components) - n_base, rng)])
    K = n_components
    extra = {"D": float(n_docs), "P": np.zeros(K), "P_rem": 0.0, "Q0": 0.0, "Q": np.zeros(K), "Q_rem": 0.0}
    return SuffStats(S.sum(axis=1), S, np.zeros(K), 0.0, np.arange(K, dtype=np.int64), extra)
