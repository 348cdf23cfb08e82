r"""Stochastic variational inference (Hughes thesis §3.5.2, Alg. 3.2; Hughes & Sudderth 2013 §2.3).

The global state is a pair of *effective summaries* :math:`(N^{\rm eff}, S^{\rm eff})` (see
``docs/internals.md``): the posterior of cluster :math:`k` is :math:`\bar\lambda\oplus(N^{\rm eff}_k,
S^{\rm eff}_k)` and the allocation posterior is a function of :math:`N^{\rm eff}` only. One step
on batch :math:`b` of :math:`N_b` rows (dataset of :math:`N` rows):

.. math::

    r_b &= \text{local step on batch } b \text{ with the current globals},\\
    (N_b, S_b) &= \text{summaries of } r_b, \qquad s = N / N_b,\\
    \rho_t &= (t + \delta)^{-\kappa}, \qquad t = 1, 2, \dots\\
    (N^{\rm eff}, S^{\rm eff}) &\leftarrow (1-\rho_t)\,(N^{\rm eff}, S^{\rm eff}) + \rho_t\, s\,(N_b, S_b).

**Why this is the natural-gradient step of Hughes thesis §3.5.2.** The step asks for
:math:`\hat\eta\leftarrow(1-\rho)\hat\eta+\rho\,\eta^*` in natural coordinates, where the target
:math:`\eta^*` is the posterior the batch would give if replicated :math:`s` times.

* Observation model: every conjugate posterior has natural parameters
  :math:`\hat\eta_k=\bar\eta+(N_k,S_k)` — affine in the summaries with the fixed prior
  :math:`\bar\eta` (Normal-Wishart: :math:`(\nu,\kappa,\kappa m,B+\kappa mm^\top)` are
  :math:`\bar\nu+N_k`, :math:`\bar\kappa+N_k`, :math:`\bar\kappa\bar m+S_{x,k}`,
  :math:`\bar B+\bar\kappa\bar m\bar m^\top+S_{xx,k}`; Dirichlet/Beta pseudo-counts add counts).
  Because the coefficients of a convex combination sum to one, the prior part is reproduced
  exactly: :math:`(1-\rho)(\bar\eta+S^{\rm eff})+\rho(\bar\eta+sS_b)=\bar\eta+[(1-\rho)S^{\rm eff}+\rho sS_b]`.
* DP sticks: :math:`q(u_k)=\mathrm{Beta}(1+N_k,\gamma+N^>_k)` with
  :math:`N^>_k=\sum_{\ell>k}N_\ell`. The Beta natural parameters :math:`(\hat\eta_{k1}-1,\hat\eta_{k0}-1)`
  are :math:`(N_k, \gamma-1+N^>_k)`, and :math:`N^>` is *linear* in :math:`N`, so interpolating
  :math:`N^{\rm eff}` interpolates both :math:`\hat\eta_{k1}=1+N_k` and
  :math:`\hat\eta_{k0}=\gamma+N^>_k` exactly as the targets :math:`\eta^*_{k1}=1+sN_{bk}`,
  :math:`\eta^*_{k0}=\gamma+s\sum_{\ell>k}N_{b\ell}` of Hughes thesis §3.5.2 require. The finite Dirichlet
  :math:`\hat\theta_k=\gamma/K+N_k` is affine in the same way.

So the interpolation of effective summaries *is* the natural-parameter interpolation, done
once for all models, and every iterate is a valid posterior (convex combinations of valid
natural parameters are valid).

A lap is :math:`B` batch steps over the fixed batches in a fresh seeded random order (every row
is seen once per lap). Stochastic learning has no exact running ELBO: after each lap
(every ``eval_every`` laps, default every lap) an evaluation pass runs one local step over all
batches with the globals frozen and reports :math:`\mathcal L` of the resulting responsibilities
with their optimal globals (Hughes thesis eqs. 3.42, 3.44) — a valid bound of the evaluation-pass posterior. The
pass is neither timed nor counted as a lap. No monotonicity is guaranteed, and clusters are not
removed or reordered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bnpcore.algorithms._base import FitState, Timer

__all__ = ["StochasticConfig", "evaluate_elbo", "learning_rate", "run_stochastic_lap"]


@dataclass(frozen=True)
class StochasticConfig:
    r"""Options of stochastic variational inference.

    Parameters
    ----------
    delay, decay : float
        Learning rate :math:`\rho_t=(t+\delta)^{-\kappa}` with ``delay`` δ ≥ 0 and ``decay``
        κ in (0.5, 1] (Robbins–Monro).
    eval_every : int
        Run the ELBO evaluation pass every ``eval_every`` laps (0: never).
    """

    delay: float = 1.0
    decay: float = 0.6
    eval_every: int = 1


def learning_rate(t: int, delay: float, decay: float) -> float:
    r"""Robbins–Monro step size :math:`\rho_t=(t+\delta)^{-\kappa}` (t starts at 1)."""
    return float((t + delay) ** (-decay))


def evaluate_elbo(model, source, stats, *, n_threads=None, executor=None) -> float:
    """ELBO of one local step over every batch with the globals ``stats`` frozen (Hughes thesis §3.5.2, Alg. 3.2; Hughes & Sudderth 2013 §2.3):
    the summaries of all batches are summed in batch order and the exact ELBO at optimal
    globals (Hughes thesis eqs. 3.42, 3.44) of those responsibilities is returned."""
    from bnpcore.algorithms.executor import LocalExecutor

    if executor is None:
        executor = LocalExecutor(source)
    total = None
    for res in executor.run(model, stats, [(b, {}) for b in range(len(source))], n_threads=n_threads):
        new = model.stats_from_output(res.out, stats.uids)
        total = new if total is None else total + new
    return model.elbo(total)


def run_stochastic_lap(model, source, state: FitState, config: StochasticConfig, *, n_threads=None, executor=None) -> dict:
    r"""One lap of stochastic variational inference: ``len(source)`` steps of
    :math:`G\leftarrow(1-\rho_t)\,G+\rho_t\,\tfrac{N}{N_b}\,G_b` on every summary field (see
    :meth:`~bnpcore.stats.SuffStats.interpolate`) in a fresh seeded random batch order, then
    the evaluation pass.

    Parameters
    ----------
    model : Model
    source : batch source (``len``, ``get(b)``, ``n_rows``)
    state : FitState
        ``state.stats`` holds the effective summaries; ``state.stochastic_step`` is t.
    config : StochasticConfig
    n_threads : int or None
    executor : executor or None
        Where the local steps run (:mod:`bnpcore.algorithms.executor`); None: in this process.

    Returns
    -------
    dict
        ``{"elbo": float (NaN when not evaluated this lap), "accepted": 0}``.
    """
    timer = Timer()
    B = len(source)
    n_total = float(source.n_rows)
    order = state.rng_order.permutation(B) if B > 1 else np.zeros(1, dtype=np.int64)
    delay, decay = float(config.delay), float(config.decay)
    from bnpcore.algorithms.executor import LocalExecutor

    if executor is None:
        executor = LocalExecutor(source)
    for b in order:
        b = int(b)
        (res,) = executor.run(model, state.stats, [(b, {})], n_threads=n_threads)
        batch = model.stats_from_output(res.out, state.stats.uids)
        t = state.stochastic_step + 1
        rho = learning_rate(t, delay, decay)
        scale = n_total / res.n_rows
        # commit the step (state after this batch) in one assignment each
        state.stats = state.stats.interpolate(batch, rho, scale)
        state.stochastic_step = t
    state.lap += 1
    state.seconds += timer.elapsed()
    if config.eval_every >= 1 and state.lap % config.eval_every == 0:
        elbo = evaluate_elbo(model, source, state.stats, n_threads=n_threads, executor=executor)
    else:
        elbo = float("nan")
    return {"elbo": elbo, "accepted": 0}
