r"""Birth, merge and delete moves for the states of an HDP-HMM (Hughes, Stephenson & Sudderth
2015, §4; Hughes thesis §6.5), and the fixed-K swap of the finite HMM.

Every proposal is judged the same way: candidate global parameters (states merged, a state
removed, or a state replaced by fresh states fitted to the data it explains) are used for
``passes`` whole-dataset local steps (forward-backward over every sequence); the resulting batch
summaries describe one valid variational distribution over all state sequences, so their
objective is exact. The proposal is accepted only if that objective is above the current one;
then the batch memos are replaced by the candidate's. Nothing of a rejected proposal remains.

* **merge** — pairs whose pooled summaries raise the observation term, ranked by that exact
  change (:func:`bnpcore.moves.merge.merge_scores` on the observation part). At the start of a
  lap up to ``merge_candidates`` pairs are planned and the forward-backward kernel tracks their
  merged entropy tables during the lap's local steps (thesis §6.5.1: the merged local
  parameters :math:`\hat r'_t`, :math:`\hat s'_t` sum the two states' marginals, and the tables
  of the merged chain follow from per-pair row, column, self and start terms). At the end of
  the lap every planned pair is scored *without any extra pass*: each batch memo is merged
  with its own tables, so the candidate's objective is the exact objective of a valid
  variational distribution. The best pair is accepted if it raises it. A second merge in the
  same lap cannot use the tables (they describe the unmerged chain), and some merges pay only
  once the local steps are refitted, so the next pairs — ranked by their exact gain — are
  judged by ``passes`` whole-dataset local steps as below, up to ``max_per_lap["merge"]``
  candidates per lap;
* **delete** — the smallest states (at most ``delete_max_size`` of the time steps), removed
  from the globals so the local step reassigns their time steps;
* **birth** — during a lap the time steps of one target state (responsibility > 0.5) are
  reservoir-sampled (at most ``birth_max_rows``); at the end of the lap ``birth_n_fresh`` fresh
  states are fitted to them with the model's own divergence (auto-regressive states: weighted
  Euclidean k-means of the rows ``[x_t, x_{t-1}]``, measured better)
  (:func:`bnpcore.moves.birth.fit_fresh_clusters`) and replace the target. Targets rotate over
  the states by decreasing size; a state that failed is tried again only after the structure
  changed. While some state is still to be tried, the fit does not declare convergence; but
  once a lap meets the convergence test with states still untried, the lap loop marks the
  manager ``settled`` and the next lap collects the time steps of every untried state (within
  :data:`bnpcore.moves.birth.SWEEP_MAX_ENTRIES` values) and judges their births at its end, in
  the same order, until one is accepted — instead of one state per lap, each lap a pass over the
  data that changed nothing (the sticky toy's default fit: 11 → 5 laps, the same 8 states).

* **swap** (``FiniteHMM``'s one move, on by default with memoized or full laps) — a finite HMM's
  symmetric Dirichlet transitions fix K, so it has no birth, merge or delete. A swap keeps K:
  the largest state's time steps are collected as a birth's, two fresh states are fitted to
  them, and they replace the target *and the smallest other state* (whose time steps go where
  the candidate's passes put them); accepted iff the objective rises. Once a swap is rejected
  (or its fresh fit fails) none is proposed again: only an accepted swap changes the states.
  Logged as ``"swap"`` with ``uids`` (target, dropped state). Why: from random blocks, fixed-K
  variational HMMs end with two true states merged into one and a spare state splitting
  another; on the sticky toy at K = 8 (data seeds 0–2) the fits without moves reached ARI 0.86,
  0.92 and 0.79, with swaps 1.0 in each, 18,000–40,000 nats higher (``docs/hmm.md``).

Each evaluated proposal is logged in ``moves_log_`` (``lap``, ``kind``, ``uids``, ``elbo_before``,
``elbo_after``, ``elbo_gain``, ``accepted``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bnpcore.algorithms._base import materialize, memo_map, tree_sum
from bnpcore.moves._base import (
    ACCEPT_RTOL,
    ACCEPT_RTOL_RANGE,
    FRACTION,
    SWAP_KINDS,
    MoveOptions,
    accepts,
    adopt_memos,
    count,
    number,
    whole_dataset_passes,
)
from bnpcore.moves.birth import FreshModel, Reservoir

__all__ = ["HMM_MOVE_KINDS", "HMMMoveConfig", "HMMMoveManager"]

#: the moves of the HDP-HMM (they change the number of states)
HMM_MOVE_KINDS = ("birth", "merge", "delete")


@dataclass(frozen=True)
class HMMMoveConfig:
    kinds: tuple = HMM_MOVE_KINDS
    start_lap: dict = field(default_factory=dict)
    max_per_lap: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    n_threads: int | None = None


def _kmeans_fresh(obs, X, w, J, rng, iters: int = 10):
    """Summaries of ``J`` fresh states from a weighted Euclidean k-means of the rows ``X``
    (None when fewer than two non-empty groups remain)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    if n < 2 * J:
        return None, None
    C = X[rng.choice(n, size=J, replace=False)].copy()
    lab = np.zeros(n, dtype=np.int64)
    for _ in range(iters):
        d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        lab = d.argmin(axis=1)
        for j in range(J):
            m = lab == j
            if m.any():
                C[j] = np.average(X[m], axis=0, weights=w[m])
    keep = [j for j in range(J) if np.any(lab == j)]
    if len(keep) < 2:
        return None, None
    R = np.zeros((n, len(keep)))
    for i, j in enumerate(keep):
        R[lab == j, i] = w[lab == j]
    N, S = obs.core.summarize(X, R)
    return np.asarray(N), np.asarray(S)


def _merge_memo(m, i: int, j: int, tabs: dict, q: int):
    """Batch memo ``m`` with state ``j`` merged into state ``i`` (positions, ``i < j``), its
    entropy tables assembled from the kernel's merge tables of pair ``q``: row ``i`` of the
    transition table from the merged outgoing row, column ``i`` from the merged incoming
    column, entry ``(i, i)`` from the merged self term, and the start entropy of ``i``."""
    K = m.K
    keep = [k for k in range(K) if k != j]
    ht = np.array(m["Htable"], dtype=np.float64, copy=True)
    ht[i, :] = tabs["merge_h_row"][q]
    ht[:, i] = tabs["merge_h_col"][q]
    ht[i, i] = tabs["merge_h_self"][q]
    return m.merge(i, j, 0.0, Hstart=float(tabs["merge_h_start"][q]), Htable=ht[np.ix_(keep, keep)])


class HMMMoveManager(MoveOptions):
    """Birth/merge/delete moves of HMM states (module docstring), driven by the memoized lap
    through ``start_lap``, ``batch_options``, ``after_batch`` and ``end_lap``."""

    DEFAULT_OPTIONS: ClassVar[dict] = {
        "accept_rtol": ACCEPT_RTOL,
        "passes": 2,
        "merge_candidates": 10,
        "delete_max_size": 0.1,
        "birth_n_fresh": 3,
        "birth_max_rows": 3000,
        "birth_refine_iters": 20,
        "birth_collect_threshold": 0.5,
    }
    #: kind and range of every option (:class:`~bnpcore.moves._base.OptionRange`; module docstring)
    OPTION_RANGES: ClassVar[dict] = {
        "accept_rtol": ACCEPT_RTOL_RANGE,
        "passes": count(1),  # a candidate is judged by the summaries of its last pass
        "merge_candidates": count(0),  # 0: no merge tables, every merge judged by passes
        "delete_max_size": FRACTION,
        # a birth replaces its target by at least two fresh states, fitted to at least twice as
        # many time steps; a step is collected when its responsibility exceeds the threshold
        "birth_n_fresh": count(2),
        "birth_max_rows": count(4),
        "birth_refine_iters": count(0),
        "birth_collect_threshold": number(0, 1, high_open=True),
    }
    DEFAULT_MAX_PER_LAP: ClassVar[dict] = {"birth": 1, "merge": 3, "delete": 1, "swap": 1}

    #: the batch source of the fit and the executor of its local steps (set by the estimator
    #: for the length of a fit)
    _source = None
    _executor = None

    def __init__(self, config: HMMMoveConfig):
        self._configure(config, HMM_MOVE_KINDS + SWAP_KINDS, "HMMs support the moves {allowed}, got {bad}")
        self.structure_version = 0
        self.failed: dict = {}  # (kind, uid or pair) -> structure version of the failure
        #: set by the lap loop after a lap that met the convergence test while states were still
        #: to be tried by a birth: the next lap prepares and judges the births of all of them
        self.settled = False
        self._targets: list = []  # uids whose time steps this lap collects for a birth
        self._reservoirs: dict = {}  # uid -> Reservoir
        self._lap = 0
        self._exact = False
        self._last_stats = None
        self._merge_plan: list = []  # (uid, uid) pairs whose merge tables this lap's steps track
        self._pair_tabs: dict = {}  # batch -> merge tables of the planned pairs

    # ------------------------------------------------------------------ helpers
    def _start(self, kind: str) -> int:
        return int(self.config.start_lap.get(kind, 2))

    def _cap(self, kind: str) -> int:
        return int(self.config.max_per_lap.get(kind, self.DEFAULT_MAX_PER_LAP[kind])) if kind in self.kinds else 0

    def _on(self, kind: str) -> bool:
        return self._cap(kind) > 0 and self._lap >= self._start(kind)

    def _failed(self, key) -> bool:
        return self.failed.get(key) == self.structure_version

    def _swaps_over(self) -> bool:
        """A swap was rejected at the current structure: none is proposed again (only an
        accepted swap changes a finite HMM's states; module docstring)."""
        return any(k[0] == "swap" and v == self.structure_version for k, v in self.failed.items())

    def _log(self, state, kind, uids, before, after, accepted, **extra):
        rec = {"lap": int(self._lap), "kind": kind, "uids": [int(u) for u in uids], "elbo_before": float(before),
               "elbo_after": float(after), "elbo_gain": float(after - before), "accepted": bool(accepted)}
        rec.update(extra)
        state.moves_log.append(rec)

    def _birth_targets(self, G, n: int | None = 1, kind: str = "birth") -> list:
        """The ``n`` largest states not yet tried at the current structure (None: all of them)
        by a ``kind`` move (a birth, or a swap)."""
        out: list = []
        if G is None or G.K < 1:
            return out
        for i in np.argsort(-G.N, kind="stable"):
            uid = int(G.uids[i])
            if G.N[i] >= 2.0 * self.options["birth_n_fresh"] and not self._failed((kind, uid)):
                out.append(uid)
                if n is not None and len(out) >= n:
                    break
        return out

    def _birth_target(self, G):
        """The largest state not yet tried at the current structure (None: all tried)."""
        t = self._birth_targets(G, 1)
        return t[0] if t else None

    # ------------------------------------------------------------------ hooks
    def start_lap(self, model, state) -> None:
        self._lap = state.lap + 1
        self._exact = all(m is not None for m in state.memos) and not state.frozen
        self._targets = []
        self._reservoirs = {}
        self._merge_plan = []
        self._pair_tabs = {}
        if self._exact and self._on("birth") and self._source is not None:
            if self.settled:
                # the previous lap met the convergence test with states still untried: collect
                # for all of them (within SWEEP_MAX_ENTRIES values) and judge their births at
                # the end of this lap, instead of one a lap
                from bnpcore.moves.birth import SWEEP_MAX_ENTRIES

                width = int(model.obs.n_features)  # values per collected step
                room = SWEEP_MAX_ENTRIES // max(int(self.options["birth_max_rows"]) * width, 1)
                self._targets = self._birth_targets(state.stats, max(int(room), self._cap("birth")))
            else:
                self._targets = self._birth_targets(state.stats, self._cap("birth"))
        elif self._exact and self._on("swap") and self._source is not None and not self._swaps_over():
            self._targets = self._birth_targets(state.stats, 1, kind="swap")
        if self._exact and self._on("merge") and self._source is not None and model.alloc.nested:
            self._merge_plan = self._rank_pairs(model, state.stats, set(), int(self.options["merge_candidates"]))

    def batch_options(self, model, state, b) -> dict:
        opts = {}
        if self._merge_plan:
            G = state.stats
            opts["merge_pairs"] = [tuple(sorted(int(p) for p in G.positions([a, c]))) for a, c in self._merge_plan]
        if self._targets:
            from bnpcore.algorithms.executor import SELECT_ROWS

            self._glob = G = state.stats
            opts["return_resp"] = True
            alive = set(G.uids.tolist())
            cols = [int(G.positions([u])[0]) for u in self._targets if u in alive]
            if cols:  # on a cluster only the collected steps travel
                opts[SELECT_ROWS] = ("resp", cols if len(cols) > 1 else cols[0], float(self.options["birth_collect_threshold"]))
        return opts

    def after_batch(self, model, state, b, out, X=None) -> None:
        if self._merge_plan and "merge_h_row" in out and np.asarray(out["merge_h_row"]).shape[0] == len(self._merge_plan):
            self._pair_tabs[int(b)] = {k: np.asarray(out[k]) for k in ("merge_h_row", "merge_h_col", "merge_h_self", "merge_h_start")}
        if not self._targets or X is None or "resp" not in out:
            return
        glob = self._glob
        alive = set(glob.uids.tolist())
        Xb = X.X if hasattr(X, "X") else X
        resp = np.asarray(out["resp"])
        for uid in self._targets:
            if uid not in alive:
                continue
            r = resp[:, int(glob.positions([uid])[0])]
            rows = np.flatnonzero(r > self.options["birth_collect_threshold"])
            if rows.size == 0:
                continue
            res = self._reservoirs.get(uid)
            if res is None:
                res = self._reservoirs[uid] = Reservoir(int(self.options["birth_max_rows"]), Xb.shape[1])
            res.add(np.ascontiguousarray(Xb[rows]), r[rows], state.rng_moves)

    def busy(self) -> bool:
        """True while some state is still to be tried by a birth at the current structure."""
        return "birth" in self.kinds and self._cap("birth") > 0 and self._source is not None and self._birth_target(self._last_stats) is not None

    def end_lap(self, model, state, elbo) -> tuple[int, float]:
        accepted = 0
        if self._exact and self._source is not None and model.alloc.nested:
            touched: set = set()
            if self._on("merge"):
                n, elbo = self._merges(model, state, elbo, touched)
                accepted += n
            if self._on("delete"):
                n, elbo = self._deletes(model, state, elbo, touched)
                accepted += n
            for uid in self._targets:  # (several after a settled lap; the first accepted ends them)
                if uid in touched:
                    continue
                n, elbo = self._birth(model, state, elbo, uid, self._reservoirs.get(uid))
                accepted += n
                if n:
                    break
        elif self._exact and self._source is not None and self._targets and "swap" in self.kinds:
            n, elbo = self._birth(model, state, elbo, self._targets[0], self._reservoirs.get(self._targets[0]), swap=True)
            accepted += n
        if accepted:
            self.structure_version += 1
        self._targets = []
        self._reservoirs = {}
        self._merge_plan = []
        self._pair_tabs = {}
        self._last_stats = state.stats if (self._exact and model.alloc.nested) else None
        return accepted, elbo

    def get_state(self) -> dict:
        return {"structure_version": int(self.structure_version), "settled": bool(self.settled),
                "failed": [[k[0], list(k[1]) if isinstance(k[1], tuple) else k[1], int(v)] for k, v in self.failed.items()]}

    def set_state(self, state) -> None:
        if not state:
            return
        self.structure_version = int(state.get("structure_version", 0))
        self.settled = bool(state.get("settled", False))
        self.failed = {}
        for kind, key, v in state.get("failed", []):
            self.failed[(kind, tuple(int(x) for x in key) if isinstance(key, list) else int(key))] = int(v)

    # ----------------------------------------------------------- candidates
    def _resummarize(self, model, glob) -> tuple[list, float]:
        """``passes`` whole-dataset local steps from the globals ``glob``: the batch summaries
        of the last pass and their exact objective."""
        memos, total = whole_dataset_passes(model, self._source, self._executor, glob, int(self.options["passes"]), n_threads=self.n_threads)
        return memos, float(model.elbo(total))


    def _rank_pairs(self, model, G, touched, limit: int) -> list:
        """Disjoint ``(uid, uid)`` pairs whose pooled summaries raise the observation term, best
        first, skipping failed and touched states; at most ``limit``."""
        from bnpcore.moves.merge import merge_scores

        if G is None or G.K < 2 or limit <= 0:
            return []
        d_data, _ = merge_scores(FreshModel(model.obs), G)
        # pooling two states that explain the same kind of data raises the observation term
        ii, jj = np.nonzero(np.isfinite(d_data) & (d_data > 0))
        order = np.argsort(-d_data[ii, jj], kind="stable")
        pairs: list = []
        for o in order:
            a, c = int(G.uids[ii[o]]), int(G.uids[jj[o]])
            if self._failed(("merge", (a, c))) or a in touched or c in touched:
                continue
            if any(a in p or c in p for p in pairs):
                continue
            pairs.append((a, c))
            if len(pairs) >= limit:
                break
        return pairs

    def _pair_stat_candidates(self, model, state, elbo: float) -> list:
        """``(gain, (a, c), memos, elbo)`` of every planned pair over the current objective
        ``elbo``, from the merge tables the lap's local steps tracked (no data pass); empty when
        some batch has no tables."""
        if not self._merge_plan or len(self._pair_tabs) != len(state.memos) or any(m is None for m in state.memos):
            return []
        G = state.stats
        out = []
        for q, (a, c) in enumerate(self._merge_plan):
            i, j = sorted(int(p) for p in G.positions([a, c]))
            memos = [memo_map(_merge_memo, m, i, j, self._pair_tabs[b], q) for b, m in enumerate(state.memos)]
            try:
                new = float(model.elbo(materialize(tree_sum(memos))))
            except Exception:  # a degenerate candidate (non-finite objective) is simply rejected
                new = -np.inf
            out.append((new - elbo, (a, c), memos, new))
        return out

    def _merges(self, model, state, elbo, touched) -> tuple[int, float]:
        G = state.stats
        if G.K < 2:
            return 0, elbo
        accepted = 0
        cands = self._pair_stat_candidates(model, state, elbo)
        rtol = float(self.options["accept_rtol"])
        if cands:
            # every planned pair scored exactly from the tracked tables (no pass); the best one is
            # adopted if it raises the objective. The others keep their exact merged-without-
            # refitting gain as a ranking: the tables describe the unmerged chain, so after one
            # merge (or when refitting the local steps is what makes a merge pay) the next pairs
            # are judged by passes, best-ranked first
            order = sorted(range(len(cands)), key=lambda q: -cands[q][0])
            best = order[0]
            _gain, (a, c), memos, new = cands[best]
            ok = accepts(elbo, new, rtol)
            self._log(state, "merge", [a, c], elbo, new, ok, evaluated="pair_stats")
            if ok:
                elbo = adopt_memos(model, state, memos)
                touched.update((a, c))
                accepted += 1
            pairs = [cands[q][1] for q in order if q != best or not ok][: max(0, self._cap("merge") - accepted)]
        else:
            pairs = self._rank_pairs(model, G, touched, self._cap("merge"))
        for a, c in pairs:
            G = state.stats
            if a in touched or c in touched:
                continue
            i, j = sorted(int(p) for p in G.positions([a, c]))
            K1 = G.K - 1
            glob = G.merge(i, j, 0.0, Hstart=0.0, Htable=np.zeros((K1, K1)))  # entropies unused as globals
            memos, new = self._resummarize(model, glob)
            ok = accepts(elbo, new, float(self.options["accept_rtol"]))
            self._log(state, "merge", [a, c], elbo, new, ok, evaluated="passes")
            if ok:
                elbo = adopt_memos(model, state, memos)
                touched.update((a, c))
                accepted += 1
            else:
                self.failed[("merge", (a, c))] = self.structure_version
        return accepted, elbo

    def _deletes(self, model, state, elbo, touched) -> tuple[int, float]:
        accepted = tried = 0
        G = state.stats
        limit = float(self.options["delete_max_size"]) * float(G.N.sum())
        for i in np.argsort(G.N, kind="stable"):
            G = state.stats
            if tried >= self._cap("delete") or G.K < 2:
                break
            uid = int(G.uids[i]) if i < G.K else None
            if uid is None or uid in touched or uid not in set(G.uids.tolist()) or self._failed(("delete", uid)):
                continue
            j = int(G.positions([uid])[0])
            if G.N[j] > limit:
                break
            tried += 1
            memos, new = self._resummarize(model, G.drop([j]))
            ok = accepts(elbo, new, float(self.options["accept_rtol"]))
            self._log(state, "delete", [uid], elbo, new, ok)
            if ok:
                elbo = adopt_memos(model, state, memos)
                touched.add(uid)
                accepted += 1
            else:
                self.failed[("delete", uid)] = self.structure_version
        return accepted, elbo

    def _birth(self, model, state, elbo, uid, res, swap: bool = False) -> tuple[int, float]:
        """The birth of state ``uid`` from the time steps collected in ``res`` (a Reservoir or
        None), judged by whole-dataset passes. ``swap``: two fresh states replace the target
        and the smallest other state (the finite HMM's move; module docstring)."""
        from bnpcore.moves.birth import fit_fresh_clusters
        from bnpcore.stats import SuffStats

        kind = "swap" if swap else "birth"
        G = state.stats
        if uid not in set(G.uids.tolist()) or (swap and G.K < 2):
            return 0, elbo
        J0 = 2 if swap else int(self.options["birth_n_fresh"])
        if res is None or len(res) < 2 * J0:
            self.failed[(kind, uid)] = self.structure_version
            return 0, elbo
        t = int(G.positions([uid])[0])
        if model.obs.kind == "ar_gauss":
            # Euclidean k-means of the collected rows [x_t, x_(t-1)], each group summarised by
            # the model: measured better for auto-regressive states than the fresh-cluster fit
            # with the likelihood-gap divergence (on the AR toy from one state, up to 4,500
            # nats of final objective; benches/bench_hmm_moves.py)
            N, S = _kmeans_fresh(model.obs, res.X, res.r, J0, state.rng_moves)
        else:
            N, S, _ = fit_fresh_clusters(
                FreshModel(model.obs), np.ascontiguousarray(res.X), np.ascontiguousarray(res.r), J0,
                state.rng_moves, n_seeds=J0, iters=int(self.options["birth_refine_iters"]), n_threads=self.n_threads,
            )
        if N is None or (swap and N.shape[0] != 2):
            self.failed[(kind, uid)] = self.structure_version
            self._log(state, kind, [uid], elbo, -np.inf, False)
            return 0, elbo
        J = N.shape[0]
        # candidate globals: the target replaced by the fresh states (scaled to its mass); the
        # transition counts of the fresh states split the target's in proportion to their mass
        scale = float(G.N[t]) / max(float(N.sum()), 1e-300)
        w = N / N.sum()
        # a swap drops the smallest other state too (its time steps go where the passes put them)
        dropped = next(int(i) for i in np.argsort(G.N, kind="stable") if int(i) != t) if swap else None
        keep = [k for k in range(G.K) if k != t and k != dropped]
        Kn = len(keep) + J
        new_uids = state.new_uids(J)
        M0, M = np.asarray(G["M0"]), np.asarray(G["M"])
        M0n = np.concatenate([M0[keep], M0[t] * w])
        Mn = np.zeros((Kn, Kn))
        Mn[: len(keep), : len(keep)] = M[np.ix_(keep, keep)]
        Mn[: len(keep), len(keep):] = M[keep, t][:, None] * w[None, :]
        Mn[len(keep):, : len(keep)] = w[:, None] * M[t, keep][None, :]
        Mn[len(keep):, len(keep):] = M[t, t] * np.diag(w) + 1e-3
        extra = {"n_seqs": float(G["n_seqs"]), "M0": M0n, "M": Mn, "Hstart": np.zeros(Kn), "Htable": np.zeros((Kn, Kn))}
        glob = SuffStats(np.concatenate([G.N[keep], N * scale]), np.concatenate([G.S[keep], S * scale]), np.zeros(Kn), float(G.h),
                         np.concatenate([G.uids[keep], new_uids]), extra)
        memos, new = self._resummarize(model, glob)
        ok = accepts(elbo, new, float(self.options["accept_rtol"]))
        uids = [uid] if not swap else [uid, int(G.uids[dropped])]
        self._log(state, kind, uids, elbo, new, ok, new_uids=[int(u) for u in new_uids])
        if ok:
            elbo = adopt_memos(model, state, memos)
            return 1, elbo
        self.failed[(kind, uid)] = self.structure_version
        return 0, elbo
