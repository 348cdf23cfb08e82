r"""The fixed-K swap move of the finite mixture (``FiniteMixture``'s default move with full and
memoized learning).

A finite mixture's symmetric Dirichlet prior :math:`\mathrm{Dir}_K(\gamma/K)` fixes the number of
clusters, so it has no birth, merge or delete. A swap keeps K. The target is the cluster with
the lowest b-score (average expected log-likelihood of its rows, the births' ranking,
:func:`bnpcore.moves.birth.b_scores`) not yet tried at the current structure; during a lap its
rows (responsibility above ``birth_collect_threshold``) are reservoir-sampled (at most
``birth_max_subsample``) with their responsibilities; at the end of the lap fresh clusters are
fitted to them (:func:`bnpcore.moves.birth.fit_fresh_clusters`, the births' fit, at most
``birth_n_fresh``). A fit whose weighted-subsample gain over one cluster is not above
``birth_min_gain`` is not proposed (the births' screen: no pass over the data; the target counts
as tried). Otherwise the :math:`J` fresh clusters replace the target *and the* :math:`J-1`
*smallest other clusters*, whose rows go where the candidate's whole-dataset local step puts
them. The candidate's summaries describe valid responsibilities for every row, so its objective
is exact; it is accepted only if that objective is higher, and then the batch memos are replaced
by the candidate's. Every cluster is a target at most once per structure (an accepted swap makes
a new structure), and after ``SWAP_MAX_REJECTED`` (2) proposals rejected on the whole data none is
made at that structure: on 1,060 image patches (``zero_mean_gauss``, K = 50) proposals that passed
the screen kept failing on the whole data, and without that limit the fit ran 100 laps with 98
proposals (7 accepted) instead of converging in 7; with it, 6 laps (one swap accepted; the fit
ends 27 nats below the one without moves, which took another path). Logged in ``moves_log_`` as
``"swap"`` with ``uids`` (target, then the dropped clusters) and ``new_uids``.

Why: from k-means++ seeds a fixed-K fit often ends with several true clusters under one
component while other components are empty; no local step undoes it. On the 25-cluster
benchmark (20,000 rows, K = 25, seeds 0–4) the fits without moves had ARI 0.90–0.95 (seed 1:
three components of two or three true clusters each and five empty ones; two of the five fits
stopped at 100 laps); with swaps 0.983–0.988 (the DP mixture's default fit: 0.988), every fit
converged (``benches/bench_mixture_swap.py``, ``docs/sklearn_mapping.md``).
A fit that meets the convergence test while clusters are untried at its structure runs one more
lap, which collects the rows of all of them (within ``SWEEP_MAX_ENTRIES`` values) and judges
them at its end, in b-score order, until one is accepted (as the births do).
The idea is split-and-merge EM's (Ueda et al. 2000), with the smallest clusters in place of a
merged pair. The options are the mixtures' move options
(:class:`bnpcore.moves.manager.MoveManager`), of which the swap reads ``accept_rtol``,
``birth_collect_threshold``, ``birth_max_subsample``, ``birth_min_gain``, ``birth_n_fresh``,
``birth_n_seeds`` and ``birth_refine_iters``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from bnpcore.moves._base import SWAP_KINDS, MoveOptions, accepts, adopt_memos, whole_dataset_passes
from bnpcore.moves.manager import MoveConfig, MoveManager

__all__ = ["MixtureSwapManager"]

#: proposals rejected on the whole data after which none is made at the same structure (module
#: docstring)
SWAP_MAX_REJECTED = 2


class MixtureSwapManager(MoveOptions):
    """The finite mixture's swap (module docstring), driven by the memoized lap through
    ``start_lap``, ``batch_options``, ``after_batch`` and ``end_lap``."""

    DEFAULT_OPTIONS: ClassVar[dict] = MoveManager.DEFAULT_OPTIONS
    OPTION_RANGES: ClassVar[dict] = MoveManager.OPTION_RANGES

    #: the batch source of the fit and the executor of its local steps (set by the estimator
    #: for the length of a fit)
    _source = None
    _executor = None

    def __init__(self, config: MoveConfig):
        self._configure(config, SWAP_KINDS, "the finite mixture supports the moves {allowed}, got {bad}")
        self.structure_version = 0
        self.failed: dict = {}  # uid -> structure version at which it was tried
        self.rejected: dict = {}  # structure version -> proposals rejected on the whole data
        #: set by the lap loop after a lap that met the convergence test while clusters were
        #: still untried: the next lap collects for all of them and judges them at its end
        self.settled = False
        self._lap = 0
        self._targets: list = []  # uids whose rows this lap collects, in the order they are tried
        self._reservoirs: dict = {}  # uid -> Reservoir
        self._last_stats = None
        self._model = None

    # ------------------------------------------------------------------ helpers
    def _on(self) -> bool:
        cap = int(self.config.max_per_lap.get("swap", 1))
        return "swap" in self.kinds and cap > 0 and self._lap >= int(self.config.start_lap.get("swap", 2))

    def _log(self, state, uids, before, after, accepted, **extra):
        rec = {"lap": int(self._lap), "kind": "swap", "uids": [int(u) for u in uids], "elbo_before": float(before),
               "elbo_after": float(after), "elbo_gain": float(after - before), "accepted": bool(accepted)}
        rec.update(extra)
        state.moves_log.append(rec)

    def _untried(self, model, G) -> list:
        """The clusters not yet tried at the current structure (at least four rows' mass), by
        increasing b-score (ties by uid)."""
        from bnpcore.moves.birth import b_scores

        if G is None or G.K < 2 or self.rejected.get(self.structure_version, 0) >= SWAP_MAX_REJECTED:
            return []
        order = np.lexsort((G.uids, b_scores(model, G)))
        return [int(G.uids[i]) for i in order if G.N[i] >= 4.0 and self.failed.get(int(G.uids[i])) != self.structure_version]

    # ------------------------------------------------------------------ hooks
    def start_lap(self, model, state) -> None:
        self._lap = state.lap + 1
        self._targets, self._reservoirs = [], {}
        exact = all(m is not None for m in state.memos) and not state.frozen
        if not (exact and self._on() and self._source is not None):
            return
        targets = self._untried(model, state.stats)
        if self.settled:
            # the previous lap met the convergence test with clusters still untried: collect
            # for all of them (within SWEEP_MAX_ENTRIES values) and judge them at this lap's end
            from bnpcore.moves.birth import SWEEP_MAX_ENTRIES

            per = int(self.options["birth_max_subsample"]) * max(int(model.obs.n_features), 1)  # values per target
            self._targets = targets[: max(1, SWEEP_MAX_ENTRIES // max(per, 1))]
        else:
            self._targets = targets[:1]

    def batch_options(self, model, state, b) -> dict:
        G = state.stats
        alive = set(G.uids.tolist())
        cols = [int(G.positions([u])[0]) for u in self._targets if u in alive]
        return {"collect_cols": cols} if cols else {}

    def after_batch(self, model, state, b, out, X=None) -> None:
        from bnpcore.moves.birth import Reservoir

        if not self._targets or X is None or out.get("cols") is None:
            return
        G = state.stats
        alive = set(G.uids.tolist())
        cols = np.asarray(out["cols"])
        for i, uid in enumerate(u for u in self._targets if u in alive):
            col = cols[:, i]
            rows = np.flatnonzero(col > float(self.options["birth_collect_threshold"]))
            if rows.size == 0:
                continue
            res = self._reservoirs.get(uid)
            if res is None:
                cap = int(self.options["birth_max_subsample"])
                if hasattr(X, "nnz"):  # sparse rows are kept dense in the reservoir: bound its memory (128 MB)
                    cap = max(64, min(cap, (1 << 24) // max(int(X.shape[1]), 1)))
                res = self._reservoirs[uid] = Reservoir(cap, X.shape[1])
            res.add(X[rows], col[rows], state.rng_moves)

    def busy(self) -> bool:
        """True while some cluster is untried at the current structure: a fit that meets the
        convergence test then runs one more lap, which judges all of them (``settled``)."""
        return self._on() and self._source is not None and bool(self._untried(self._model, self._last_stats))

    def end_lap(self, model, state, elbo) -> tuple[int, float]:
        accepted = 0
        targets, reservoirs = self._targets, self._reservoirs
        self._targets, self._reservoirs = [], {}
        if self._source is not None:
            for uid in targets:  # (several after a settled lap; the first accepted ends them)
                accepted, elbo = self._swap(model, state, elbo, uid, reservoirs.get(uid))
                if accepted:
                    break
        if accepted:
            self.structure_version += 1
        exact = all(m is not None for m in state.memos) and not state.frozen
        self._model, self._last_stats = model, (state.stats if exact else None)
        return accepted, elbo

    def get_state(self) -> dict:
        return {"structure_version": int(self.structure_version), "settled": bool(self.settled),
                "failed": [[int(k), int(v)] for k, v in self.failed.items()],
                "rejected": [[int(k), int(v)] for k, v in self.rejected.items() if k == self.structure_version]}

    def set_state(self, state) -> None:
        if not state:
            return
        self.structure_version = int(state.get("structure_version", 0))
        self.settled = bool(state.get("settled", False))
        self.failed = {int(k): int(v) for k, v in state.get("failed", [])}
        self.rejected = {int(k): int(v) for k, v in state.get("rejected", [])}

    # ------------------------------------------------------------------ the move
    def _swap(self, model, state, elbo, uid, res) -> tuple[int, float]:
        from bnpcore.moves.birth import FreshModel, fit_fresh_clusters
        from bnpcore.stats import SuffStats

        G = state.stats
        self.failed[uid] = self.structure_version  # tried at this structure, whatever follows
        if uid not in set(G.uids.tolist()) or G.K < 2:
            return 0, elbo
        t = int(G.positions([uid])[0])
        J0 = max(2, min(int(self.options["birth_n_fresh"]), G.K))
        if res is None or len(res) < 2 * J0:
            return 0, elbo
        N, S, gain = fit_fresh_clusters(
            FreshModel(model.obs), np.ascontiguousarray(res.X), np.ascontiguousarray(res.r), J0, state.rng_moves,
            n_seeds=max(J0, int(self.options["birth_n_seeds"])), iters=int(self.options["birth_refine_iters"]), n_threads=self.n_threads,
        )
        if N is None or not gain > float(self.options["birth_min_gain"]) or not 2 <= np.asarray(N).shape[0] <= G.K:
            return 0, elbo  # screened out: not proposed (the births' rule)
        N, S = np.asarray(N, dtype=np.float64), np.asarray(S, dtype=np.float64)
        J = N.shape[0]
        # the fresh clusters share the target's mass; the J - 1 smallest other clusters go
        scale = float(G.N[t]) / max(float(N.sum()), 1e-300)
        drop = [int(i) for i in np.argsort(G.N, kind="stable") if int(i) != t][: J - 1]
        keep = [k for k in range(G.K) if k != t and k not in drop]
        new_uids = np.arange(state.next_uid, state.next_uid + J, dtype=np.int64)
        glob = SuffStats(np.concatenate([G.N[keep], N * scale]), np.concatenate([G.S[keep], S * scale]), np.zeros(G.K), float(G.h),
                         np.concatenate([G.uids[keep], new_uids]))
        memos, total = whole_dataset_passes(model, self._source, self._executor, glob, 1, n_threads=self.n_threads)
        new = float(model.elbo(total))
        ok = accepts(elbo, new, float(self.options["accept_rtol"]))
        self._log(state, [uid] + [int(G.uids[d]) for d in drop], elbo, new, ok, new_uids=[int(u) for u in new_uids] if ok else [])
        if not ok:
            self.rejected[self.structure_version] = self.rejected.get(self.structure_version, 0) + 1
            return 0, elbo
        return 1, adopt_memos(model, state, memos, J)
