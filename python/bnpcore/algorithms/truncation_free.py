r"""Truncation-free stochastic variational inference (Wang & Blei, NIPS 2012) for the HDP topic
model and the DP mixture of multinomials: the state, one minibatch step, pruning and
re-ordering, and a pass over a corpus. The estimators (``algorithm="truncation_free"`` of
:class:`bnpcore.HDPTopicModel` and of :class:`bnpcore.DPMixture` with ``obs="mult"``) drive it;
``docs/truncation_free.md`` gives the algorithm and its corrections.

**State.** For the :math:`T` components found so far: Dirichlet topics
:math:`q(\phi_k)=\mathrm{Dir}(\lambda_k)` kept as :math:`\lambda_k=\eta+\mathrm{scale}\cdot M_k`
(so the decay of every :math:`\lambda` at a step costs O(1) and a minibatch only touches the
words it contains), and sticks :math:`q(\bar\pi_k)=\mathrm{Beta}(u_k,v_k)`. Components beyond
:math:`T` are at the prior and are not stored; the fit starts from :math:`T=0`.

**Step** (minibatch of :math:`S` documents, corpus of :math:`D`). The Rust kernel
(:func:`bnpcore._core.tfsvi_batch`) runs the locally collapsed Gibbs sampler and returns the
last sample's counts :math:`n_{kw}` and stick counts :math:`c_k` (HDP: Antoniak table counts;
DP: documents). Then, with :math:`n_{\rm seen}\leftarrow\min(D,n_{\rm seen}+S)` and the
learning rate :math:`\rho_t=\max(S/n_{\rm seen},S/D)`,

.. math::

    \lambda_{kw}&\leftarrow(1-\rho_t)\lambda_{kw}+\rho_t(\eta+\tfrac DS n_{kw}),\\
    u_k&\leftarrow(1-\rho_t)u_k+\rho_t(1+\tfrac DS c_k),\qquad
    v_k\leftarrow(1-\rho_t)v_k+\rho_t(a+\tfrac DS\textstyle\sum_{j>k}c_j).

During the first pass :math:`\lambda-\eta` is :math:`D` times the average statistics of the
documents seen so far (as a sequentially initialised Gibbs sampler would have them); after it,
the rate stays at :math:`S/D`.

**Pruning** every ``prune_every`` documents (or once per pass when the corpus is smaller):
components with fewer than one word (HDP) or one document (DP) are removed, the others are
re-ordered by decreasing :math:`u_k-1` and :math:`v_k=a+\sum_{j>k}(u_j-1)` is recomputed for
the new order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bnpcore import _core
from bnpcore._validation import kernel_csr
from bnpcore.exceptions import DataError
from bnpcore.stats import Field, SuffStats, register_field

__all__ = ["TFConfig", "TFState", "learning_rate", "run_pass", "state_from_stats", "stats_from_state", "tf_step"]

register_field("tf_u", Field("alloc", 1, "given"))
register_field("tf_v", Field("alloc", 1, "given"))

#: the pruning interval of the paper (documents)
PRUNE_EVERY = 20_000
#: below this, ``scale`` is folded into the masses (no underflow of λ − η)
_MIN_SCALE = 1e-100
#: the HDP's document-level fields of a summary, zero for a truncation-free fit
_TOPIC_FIELDS = ("P", "Q")


@dataclass(frozen=True)
class TFConfig:
    """Settings of a truncation-free fit.

    Attributes
    ----------
    kind : {"hdp", "dp_mult"}
    eta : float
        Symmetric Dirichlet prior of the topics / component word distributions.
    gamma : float
        Top-level concentration (``a`` of Wang & Blei).
    alpha : float
        Document-level concentration (``b``; HDP only).
    batch_size : int
    n_sweeps : int
    prune_every : int
    n_threads : int or None
    """

    kind: str
    eta: float
    gamma: float
    alpha: float
    batch_size: int
    n_sweeps: int = 5
    prune_every: int = PRUNE_EVERY
    n_threads: int | None = None


@dataclass
class TFState:
    """The truncation-free state (module docstring). ``mass`` is T × V."""

    mass: np.ndarray
    mass_sum: np.ndarray
    scale: float
    u: np.ndarray
    v: np.ndarray
    uids: np.ndarray
    next_uid: int = 0
    n_seen: int = 0
    n_steps: int = 0
    docs_since_prune: int = 0

    @property
    def n_components(self) -> int:
        return int(self.mass.shape[0])

    @classmethod
    def empty(cls, n_vocab: int) -> TFState:
        return cls(np.zeros((0, n_vocab)), np.zeros(0), 1.0, np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))

    def fold_scale(self) -> None:
        """``mass *= scale``, ``scale = 1`` and exact row sums (a canonical form: checkpoints
        and every pass end use it, so a resumed fit continues bit-identically)."""
        if self.scale != 1.0:
            self.mass *= self.scale
            self.scale = 1.0
        self.mass_sum = self.mass.sum(axis=1)


def learning_rate(batch: int, n_seen: int, n_docs: int) -> float:
    r""":math:`\rho_t=\max(S/n_{\rm seen},S/D)` (Wang & Blei §3; at most 1)."""
    return float(min(1.0, max(batch / max(n_seen, 1), batch / max(n_docs, 1))))


def tf_step(state: TFState, X, docs: np.ndarray, n_docs: int, config: TFConfig, seed: int) -> dict:
    """One minibatch: Gibbs sample (Rust) then the stochastic update (module docstring).
    ``X`` is the CSR corpus, ``docs`` the row ids of the minibatch, ``n_docs`` the corpus size D.
    Returns the kernel's output with ``rho`` added."""
    out = _core.tfsvi_batch(
        config.kind,
        *kernel_csr(X),
        np.ascontiguousarray(docs, dtype=np.int64),
        state.mass,
        state.mass_sum,
        float(state.scale),
        state.u,
        state.v,
        eta=config.eta,
        gamma=config.gamma,
        alpha=config.alpha,
        n_sweeps=config.n_sweeps,
        seed=int(seed),
        n_threads=config.n_threads,
    )
    S = int(len(docs))
    state.n_seen = min(int(n_docs), state.n_seen + S)
    rho = learning_rate(S, state.n_seen, n_docs)
    n_new = int(out["n_new"])
    if n_new:
        V = state.mass.shape[1]
        state.mass = np.vstack([state.mass, np.zeros((n_new, V))])
        state.mass_sum = np.concatenate([state.mass_sum, np.zeros(n_new)])
        state.u = np.concatenate([state.u, np.ones(n_new)])
        state.v = np.concatenate([state.v, np.full(n_new, config.gamma)])
        state.uids = np.concatenate([state.uids, np.arange(state.next_uid, state.next_uid + n_new, dtype=np.int64)])
        state.next_uid += n_new
    amp = float(n_docs) / S
    if rho >= 1.0:
        state.mass[:] = 0.0
        state.mass_sum[:] = 0.0
        state.scale = 1.0
    else:
        state.scale *= 1.0 - rho
    step = rho * amp / state.scale
    topic, word, count = out["topic"], out["word"], out["count"]
    if topic.size:
        np.add.at(state.mass, (topic, word), step * count)
        state.mass_sum += step * np.bincount(topic, weights=count, minlength=state.mass.shape[0])
    c = np.asarray(out["stick_counts"], dtype=np.float64)
    above = np.concatenate([np.cumsum(c[::-1])[::-1][1:], [0.0]]) if c.size else c
    state.u = (1.0 - rho) * state.u + rho * (1.0 + amp * c)
    state.v = (1.0 - rho) * state.v + rho * (config.gamma + amp * above)
    if state.scale < _MIN_SCALE:
        state.fold_scale()
    state.n_steps += 1
    state.docs_since_prune += S
    out["rho"] = rho
    return out


def prune(state: TFState, config: TFConfig) -> int:
    """Remove components with fewer than one word (HDP) or one document (DP), re-order the rest
    by decreasing ``u − 1`` and recompute ``v`` for the new order. Returns the number removed."""
    state.fold_scale()
    size = state.mass_sum if config.kind == "hdp" else state.u - 1.0
    keep = np.flatnonzero(size >= 1.0)
    order = keep[np.argsort(-(state.u[keep] - 1.0), kind="stable")]
    removed = state.n_components - order.size
    state.mass = np.ascontiguousarray(state.mass[order])
    state.mass_sum = state.mass_sum[order]
    state.u = state.u[order]
    state.uids = state.uids[order]
    t = state.u - 1.0
    state.v = config.gamma + np.concatenate([np.cumsum(t[::-1])[::-1][1:], [0.0]]) if t.size else np.zeros(0)
    state.docs_since_prune = 0
    return int(removed)


def check_batch_tokens(X, batch_size: int, name: str = "X") -> None:
    """Refuse a corpus whose batches the sampler cannot hold: it keeps a topic for every token
    (16 bytes each) and a batch may hold at most ``_core.TF_MAX_BATCH_TOKENS`` of them. Checked
    up front on the ``batch_size`` largest documents (the heaviest batch a random order can
    draw), so a pass never fails half-way.

    Raises
    ------
    DataError
        Naming ``name``: a document above the bound (use ``algorithm="memoized"``, whose cost
        grows with the distinct words, not the counts), or ``batch_size`` documents above it.
    """
    D = int(X.shape[0])
    tokens = np.bincount(np.repeat(np.arange(D), np.diff(X.indptr)), weights=X.data, minlength=D)
    limit = int(_core.TF_MAX_BATCH_TOKENS)
    if D and tokens.max() > limit:
        d = int(np.argmax(tokens))
        raise DataError(
            f"`{name}`: document {d} holds {tokens[d]:.0f} tokens; truncation-free SVI samples a topic for every token "
            f"and a batch may hold at most {limit}: use algorithm='memoized', whose cost grows with the distinct words, not the counts"
        )
    heaviest = float(np.sort(tokens)[-int(batch_size) :].sum())
    if heaviest > limit:
        raise DataError(
            f"`{name}`: its {int(batch_size)} largest documents hold {heaviest:.0f} tokens, more than the {limit} a batch of "
            "truncation-free SVI may hold (it samples a topic for every token): lower `batch_size`, or use algorithm='memoized'"
        )


def run_pass(state: TFState, X, config: TFConfig, rng: np.random.Generator, *, on_step=None) -> None:
    """One pass over the CSR corpus ``X`` in a random order, in minibatches of
    ``batch_size`` documents (the last one may be smaller), pruning every ``prune_every``
    documents (at least once per pass). Ends with the canonical form (:meth:`TFState.fold_scale`)."""
    check_batch_tokens(X, config.batch_size)
    D = int(X.shape[0])
    S = int(config.batch_size)
    every = min(int(config.prune_every), D)
    order = rng.permutation(D).astype(np.int64)
    for lo in range(0, D, S):
        docs = order[lo : lo + S]
        seed = int(rng.integers(0, 2**63 - 1))
        tf_step(state, X, docs, D, config, seed)
        if state.docs_since_prune >= every:
            prune(state, config)
        if on_step is not None:
            on_step(state)
    state.fold_scale()


def run_stream_batch(state: TFState, X, config: TFConfig, rng: np.random.Generator) -> None:
    """``partial_fit``: the documents of ``X`` in order, in minibatches of ``batch_size``, with
    the corpus size taken as the number of documents seen so far (so :math:`\\rho_t=S/n_{\\rm seen}`
    and :math:`\\lambda-\\eta` is the running total of the sampled statistics)."""
    check_batch_tokens(X, config.batch_size)
    S = int(config.batch_size)
    D = int(X.shape[0])
    for lo in range(0, D, S):
        docs = np.arange(lo, min(lo + S, D), dtype=np.int64)
        seed = int(rng.integers(0, 2**63 - 1))
        n_docs = state.n_seen + docs.size  # tf_step then counts the minibatch as seen
        tf_step(state, X, docs, n_docs, config, seed)
        if state.docs_since_prune >= config.prune_every:
            prune(state, config)
    state.fold_scale()


# ----------------------------------------------------------------------------- to/from summaries
def stats_from_state(state: TFState, config: TFConfig) -> SuffStats:
    """The fitted summaries of a truncation-free state: ``S = λ − η`` (canonical form), ``N``
    the expected tokens (HDP) or documents (DP: ``u − 1``, so the DP allocation model's stick
    posterior ``Beta(1 + N_k, a + N_{>k})`` is exactly ``Beta(u, v)``), and the sticks as the
    fields ``tf_u``, ``tf_v``."""
    state.fold_scale()
    K = state.n_components
    N = state.mass_sum.copy() if config.kind == "hdp" else state.u - 1.0
    extra = {"tf_u": state.u.copy(), "tf_v": state.v.copy()}
    if config.kind == "hdp":
        extra.update({"D": float(state.n_seen), "P": np.zeros(K), "P_rem": 0.0, "Q0": 0.0, "Q": np.zeros(K), "Q_rem": 0.0})
    return SuffStats(N, state.mass.copy(), np.zeros(K), 0.0, state.uids.copy(), extra)


def state_from_stats(stats: SuffStats, info: dict) -> TFState:
    """Inverse of :func:`stats_from_state` (with the counters saved in ``info``)."""
    mass = np.array(stats.S, dtype=np.float64)
    return TFState(
        mass=mass,
        mass_sum=mass.sum(axis=1),
        scale=1.0,
        u=np.array(stats["tf_u"], dtype=np.float64),
        v=np.array(stats["tf_v"], dtype=np.float64),
        uids=np.array(stats.uids, dtype=np.int64),
        next_uid=int(info.get("next_uid", 0)),
        n_seen=int(info.get("n_seen", 0)),
        n_steps=int(info.get("n_steps", 0)),
        docs_since_prune=int(info.get("docs_since_prune", 0)),
    )


def state_info(state: TFState) -> dict:
    """The JSON-able counters of a state (saved with the model)."""
    return {"next_uid": int(state.next_uid), "n_seen": int(state.n_seen), "n_steps": int(state.n_steps), "docs_since_prune": int(state.docs_since_prune)}


class Clock:
    """Seconds spent fitting (excluding held-out evaluation)."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def lap(self) -> float:
        t = time.perf_counter()
        dt, self.t0 = t - self.t0, t
        return dt
