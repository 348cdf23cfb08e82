r"""Birth move (Hughes thesis §4.2; Hughes & Sudderth 2013 §3.3; ``birth_mode="lap"``).

A birth replaces a target cluster :math:`k_t` by :math:`J'\ge2` fresh clusters fitted to the data
it explains. Pipeline (one proposal active, one in preparation):

* **lap ℓ — collection.** Up to ``max_births_per_lap`` targets :math:`t` are chosen by b-score
  (lowest average expected log-likelihood
  :math:`\frac1{N_k}\sum_n\hat r_{nk}\mathbb E_q\log F(x_n\mid\phi_k)`, computed from summaries)
  among clusters with at least ``birth_min_size`` atoms that have not failed at their current
  size. While the batches are visited, the rows with :math:`\hat r_{nt}>0.1` are
  reservoir-sampled (seeded from the fit's move stream, at most :func:`subsample_cap` rows:
  ``birth_max_subsample``, or two average cluster masses when that is less, but enough rows for
  the fresh clusters' seeds) together with :math:`\hat r_{nt}`, for every target at every batch
  visit (the local step returns all the targets' responsibility columns). Before, successive
  visits collected for the targets in turn, so each saw about a third of its rows: on
  15,000 × 64 rows with well-separated means, a cluster holding 2,477 + 128 rows of two true
  clusters had 37 of the 128 in its subsample — too few for a 64-D covariance — and every
  birth split the big one instead; with all its rows the fit separates them.
* **start of lap ℓ+1 — creation.** Bregman k-means++ picks :math:`J'` seeds on the subsample
  :math:`x'` — for the full-covariance Gaussians in 16 or more dimensions each seed is grown to
  its :math:`2D` nearest rows under the same divergence (``birth_seed_rows``, :func:`seed_rows`),
  so that every :math:`D\times D` covariance starts from an estimate and the k-means steps can
  separate clusters by covariance as well as by mean — then ``birth_refine_iters`` restricted VB iterations of a :math:`J'`-cluster DP
  mixture run on :math:`x'` with row weights :math:`w_n=\hat r_{nt}` (preceded by a few weighted
  Bregman k-means iterations); fresh clusters with mass below one atom are dropped and pairs of
  fresh clusters are merged while the weighted subsample ELBO rises, down to two clusters.
  (Weights are not scaled up to the target's whole mass: that would count each subsample row
  several times and favour spurious small clusters.)
* **lap ℓ+1 — construction.** At every batch visit the Rust local step also computes the
  restricted step :math:`\hat r'_{n,K+j}=\hat r_{nt}\,\tilde p_{nj}`,
  :math:`\tilde p_n=\mathrm{softmax}_j(\mathbb E\log F(x_n\mid\tilde\phi_j)+\ln\tilde\pi_j)`, and its
  summaries :math:`(\tilde N_b,\tilde S_b,\tilde H_b)` from the batch's own responsibilities.
* **end of lap ℓ+1 — evaluation.** Candidate = G with column t replaced by the fresh columns;
  accepted iff the exact ELBO rises, then every memo gets the same replacement. If rejected and
  ``birth_laps`` > 1, the fresh parameters are re-estimated from the lap's fresh summaries
  (whole-data fit of the proposal) and the proposal is evaluated again after the next lap;
  otherwise it is discarded and nothing of it remains in the model. The default is one lap:
  on the 25-cluster benchmark and the toy patches (10 seeds) no birth rejected after its first
  lap was accepted after its second, and a second lap doubles the cost of every failing birth.

**Peels** (``birth_peel_seeds``; on for the full-covariance Gaussians with 32 or more features,
:func:`peel_seeds`). Clusters that differ from each other by covariance more than by mean, in
many dimensions, defeat the fits above: k-means seeds grow by position, and a split of a target
into a few parts that are each a union of true clusters scores *below* the target — on
100,000 × 128 rows of 80 such clusters (``benches/bench_births_hd.py --spread 2.5 --truth``)
the truth is 28 nats per row above one cluster but every partition into at most 10 unions of
true clusters is below it, so from one cluster the births were rejected or screened out and the
fit stopped at K = 1 (with a 40,000-row subsample, at 34 mixed clusters, ARI 0.05). A peel
(:func:`peel_clusters`) takes single clusters out of the target instead, each a set of rows the
model's own expected log-likelihood prefers under the set's posterior to under the target's,
and proposes them with the rest of the target as one more fresh cluster. It is the first
attempt, at its current size, on a target holding at least four times the median mass of the
other clusters (or on the only cluster) and at least 32 D rows: targets that may hide many
clusters; a target is not peeled again until its mass has more than doubled. It needs a few
hundred rows of each hidden cluster, so peel-eligible targets collect up to
:data:`PEEL_MAX_ENTRIES` values (the whole target, usually); the fits use a uniform part of the
usual size.

**Abandoned fits.** After ``birth_abandon_after`` (2) VB iterations the fit scores one more step,
and every pairwise merge of its clusters down to two; when the best of these is more than
``birth_abandon_loss`` (0.5) nats per unit of target weight below one cluster, the fit stops
there with that gain: it is not proposed and, having lost more than ``birth_retry_loss``, not
retried at the target's current size. Why: at large K most fits are of broad targets that lose
1–10 nats per row, and they cost a full fit each (on 100,000 image patches at K ≈ 90,
``top_l=4``: 2.6 fits per lap, 0.09 s, a quarter of a lap). Replaying the 154 fits of five
benchmarks (patches from K = 200, the 25-cluster data, the toy patches, both ``--quick`` sets of
``bench_births_hd.py``), every fit that ended with a positive gain scored at least −0.04 nats
per row at that point (a 12× margin), and 35 of the 110 failing fits were cut (14 of 19 on the
patches: their fits' time 0.64 → 0.24 s); the merges matter: without them, two 64-D fits
that ended at +4.1 and +1.4 nats per row scored −0.5 and −7.3 after the k-means iterations
(a small third cluster whose covariance the merge removes).

**Screen and retries.** A fit whose weighted-subsample gain over one cluster is not above
``birth_min_gain`` (0) is not proposed: no lap is spent on it and it counts as a failure. (On
the 25-cluster benchmark every accepted birth had a subsample gain of at least 2,600 nats and
every rejected one between −360 and +210; with whole-target subsamples the sign alone separated
them on the 64-D data.) A target stays eligible until it has failed ``birth_max_fail`` (3) times
at an unchanged size (``birth_retry_change``); each attempt after the first starts from other
seeds, as many (``birth_n_seeds``). (Retries used to start from twice as many: on the
25-cluster benchmark (90,000 rows), where no retry ever succeeds, they were a quarter of a fit's
time — 1.73–1.83 s against 1.36–1.45 s from one cluster, seeds 0–2, the same 25 clusters and
ELBO — and the toy patches found their 8 components in all 10 seeds either way, in 3.4–5.8 s
per seed against 3.9–8.6 s.) A screened-out target is fitted again at once on the same
subsample, first attempts of the lap's targets first, within ``birth_fits_per_lap`` ×
``max_births_per_lap`` fits per lap; a fit that lost more than ``birth_retry_loss`` (0.05) nats
per target row is not retried at the target's current size. The retries that found clusters
lost little before: on the toy patches (100,000 × 25, 8 zero-mean components, 10 seeds) 110
retries succeeded, after fits that had lost at most 0.034 nats per row, while on the 25-cluster
benchmark no retry ever succeeded and the failed fits of true clusters lost 0.01–0.22 nats per
row (median 0.06) at 10–60 ms a fit; 0.25 let those be fitted twice more (2.3–2.5 s →
1.65–1.86 s per fit from one cluster, the same 25 clusters and ELBO). After a rejection on the
whole data, the target's subsample is collected again (when a collection slot is free),
so its next attempt follows in the next lap; :meth:`BirthMove.busy` is true while such an
attempt is prepared, so a fit does not declare convergence in between (before, a fit from one
cluster stopped at lap 2 after its first rejected birth). Three attempts instead of two: with
two, the toy patches (``make_toy_patches``, 100,000 rows) fused two overlapping edges in 2 of
10 seeds and the 60,000 × 128 separated-means data ended at 38 of 40 clusters.

**Settled laps.** Every cluster stays a birth target until its attempts are used up, and a lap
collects for ``max_births_per_lap`` targets: once the clusters are found, a fit kept running a
lap per three clusters whose fits all failed (on 100,000 × 128 rows of 80 clusters,
``benches/bench_births_hd.py --spread 2.5``, 23 of 31 laps and 66 of 115 s). When a lap meets
the convergence test while births are still to be tried, the lap loop marks the manager
``settled`` and the next lap collects for every eligible target, within
:data:`SWEEP_MAX_ENTRIES` collected values; the lap after it fits them all (``birth_fits_per_lap``
fits per target), so the fit ends two laps later unless a birth is accepted (that fit: 11 laps,
58 s, the same 80 clusters).

With ``algorithm="full"`` (one batch) the same pipeline runs across consecutive iterations:
collection in iteration ℓ, creation at the start of iteration ℓ+1, construction and evaluation
in iteration ℓ+1.
"""

from __future__ import annotations

import numpy as np

from bnpcore import _core
from bnpcore.moves._base import BatchRequest, LapContext, Move, accepts, sum_parts
from bnpcore.stats import SuffStats

__all__ = ["BirthMove", "FreshModel", "Reservoir", "b_scores", "fit_fresh_clusters", "peel_clusters", "peel_seeds", "seed_rows", "subsample_cap"]


class _DenseRows:
    """Row access to a CSR matrix that returns dense rows (slices and index arrays)."""

    def __init__(self, csr):
        self.csr = csr
        self.shape = csr.shape

    def __getitem__(self, key):
        return np.asarray(self.csr[key].toarray(), dtype=np.float64)


class FreshModel:
    """What :func:`fit_fresh_clusters` needs of a model outside the mixtures (the HMM states,
    the finite mixture's swap): the observation model ``obs`` and a mixture allocation."""

    def __init__(self, obs):
        from bnpcore.alloc import DPAlloc

        self.obs = obs
        self.alloc = DPAlloc(1.0)


class Reservoir:
    """Uniform reservoir sample (algorithm R) of at most ``cap`` rows and their weights.
    ``fit_rows``: when set, the fits of :func:`fit_fresh_clusters` use a uniform part of this
    many rows (the reservoir is larger for peels, :data:`PEEL_MAX_ENTRIES`)."""

    def __init__(self, cap: int, n_features: int):
        self.cap = int(cap)
        self.X = np.empty((0, n_features))
        self.r = np.empty(0)
        self.seen = 0
        self.fit_rows = None

    def add(self, X: np.ndarray, r: np.ndarray, rng: np.random.Generator) -> None:
        m = X.shape[0]
        if m == 0:
            return
        if hasattr(X, "tocsr") and hasattr(X, "nnz"):
            # sparse rows (count models): only the rows that enter the reservoir are made dense
            X = _DenseRows(X.tocsr())
        room = self.cap - self.X.shape[0]
        start = 0
        if room > 0:
            take = min(room, m)
            self.X = np.concatenate([self.X, X[:take]])
            self.r = np.concatenate([self.r, r[:take]])
            start = take
            self.seen += take
        rest = m - start
        if rest == 0:
            return
        # row i of the rest is the (seen + i + 1)-th eligible row: it replaces a uniform slot
        # with probability cap / (seen + i + 1); later replacements of a slot win
        counts = self.seen + np.arange(1, rest + 1)
        slot = rng.integers(0, counts)
        hit = np.flatnonzero(slot < self.cap)
        if hit.size:
            slots = slot[hit]
            _, last = np.unique(slots[::-1], return_index=True)
            keep = hit[::-1][last]
            self.X[slot[keep]] = X[start + keep]
            self.r[slot[keep]] = r[start + keep]
        self.seen += rest

    def __len__(self) -> int:
        return int(self.X.shape[0])


def b_scores(model, G: SuffStats) -> np.ndarray:
    r"""b-score of every cluster: :math:`\frac1{N_k}\sum_n\hat r_{nk}\mathbb E_q\log F(x_n\mid\phi_k)`
    from the summaries (lower = worse explained); ``+inf`` for empty clusters."""
    tot = np.asarray(model.obs.core.e_log_lik_sum_from_stats(G.N, G.S, G.N, G.S))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(G.N > 0, tot / np.where(G.N > 0, G.N, 1.0), np.inf)
    return out


def seed_rows(model, option) -> int:
    r"""Rows of each initial fresh cluster (the ``seed_rows`` of :func:`fit_fresh_clusters`).

    ``option`` is the ``birth_seed_rows`` move option: an int is used as given; ``"auto"`` gives
    :math:`2D` for the full-covariance Gaussians (``gauss``, ``zero_mean_gauss``) with
    :math:`D\ge16` features — a cluster's :math:`D\times D` covariance then starts from an
    estimate on twice as many rows as dimensions instead of the prior's, so the k-means steps can
    tell clusters apart by covariance — and 1 (one-atom seeds) otherwise.
    """
    if option != "auto":
        return max(1, int(option))
    d = int(getattr(model.obs, "n_features", 0) or 0)
    if model.obs.kind in ("gauss", "zero_mean_gauss") and d >= 16:
        return 2 * d
    return 1


def subsample_cap(model, G: SuffStats, options) -> int:
    r"""Rows of a birth target's subsample: ``birth_max_subsample`` at most, and at most
    ``birth_subsample_sizes`` average cluster masses :math:`\sum_kN_k/K` (clusters with mass),
    but never fewer than :math:`\max(1000,\;4\,g\,J)` with :math:`g` the rows of each seed
    (:func:`seed_rows`) and :math:`J` the initial fresh clusters (the larger of ``birth_n_fresh``
    and ``birth_n_seeds``).

    A fresh fit costs about its rows × :math:`J` × its iterations, while a lap's local step costs
    rows × K: with a fixed cap the fits' share of a lap grew with K."""
    cap = int(options["birth_max_subsample"])
    per = options.get("birth_subsample_sizes")
    N = np.asarray(G.N, dtype=np.float64)
    k = int(np.sum(N > 0))
    if per is None or k < 1:
        return cap
    j = max(int(options["birth_n_fresh"]), int(options["birth_n_seeds"]))
    low = max(1000, 4 * seed_rows(model, options["birth_seed_rows"]) * j)
    return int(min(cap, max(low, np.ceil(float(per) * float(N.sum()) / k))))


def fit_fresh_clusters(model, X, w, n_fresh, rng, *, n_seeds=None, iters=20, kmeans_iters=10, seed_rows=1, abandon_loss=None,
                       abandon_after=2, n_threads=None):
    r"""Fit fresh clusters to a weighted subsample (Hughes thesis §4.2), in one Rust call.

    With :math:`J=\min(\max(n_{fresh}, n_{seeds}), \lfloor m/2\rfloor)` (nothing is fitted if
    :math:`J<2`):

    1. :math:`J` Bregman k-means++ seeds (the model's divergence, uniforms ``rng.random(J)``),
       each the posterior after its one atom, or with ``seed_rows`` :math:`g>1` after the
       :math:`\min(g,\lfloor m/J\rfloor)` rows nearest to it under the same divergence
       (unweighted; ties by row index);
    2. up to ``kmeans_iters`` weighted hard-assignment (Bregman k-means) iterations: row
       :math:`n` adds :math:`w_n` to the cluster :math:`\arg\max_k \mathbb E\log F(x_n|\phi_k)+
       \mathbb E\ln\pi_k` (the first one, log weights within :math:`10^{-9}` relative of the
       largest counting as tied); after every step clusters are sorted by decreasing mass and
       those with :math:`N_k<1` dropped; stops when the counts repeat;
    3. up to ``iters`` VB iterations of the mixture (the model's allocation) on ``X`` with row
       weights ``w``, until :math:`\max_k|\Delta N_k|<10^{-5}\max(1,\sum_k N_k)`;
    (with ``abandon_loss``: after ``abandon_after`` of these iterations, one more soft step; if
    its gain over one cluster, and that of every pairwise merge of its clusters, is below
    :math:`-\text{abandon\_loss}\sum_nw_n` the fit stops there and returns that step's clusters
    with the best of these gains)

    4. greedy merges of fresh pairs, judged by the weighted subsample ELBO
       :math:`\sum_k[c(\bar\lambda)-c(\bar\lambda\oplus(N_k,S_k))]+\sum_kH_k+\mathcal L_{alloc}(N)`,
       while a merge raises it or more than ``n_fresh`` clusters remain (never below two), each
       followed by ``max(1, iters // 4)`` VB iterations.

    The pure-Python oracle is :func:`bnpcore._reference.birth.fit_fresh_clusters`.

    Returns
    -------
    N, S : ndarray
        Effective summaries of the fresh clusters (sorted by decreasing mass), or ``None`` if
        fewer than two clusters survive.
    gain : float
        Weighted-subsample ELBO of the fit (after one more VB step) minus that of a single
        cluster; ``-inf`` when ``N`` is ``None``.
    """
    from bnpcore.exceptions import ShapeError

    X = np.ascontiguousarray(X, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    if X.ndim != 2:
        raise ShapeError(f"`X` must be 2-D (n_samples, n_features), got shape {X.shape}")
    if w.ndim != 1:
        raise ShapeError(f"`w` must be 1-D (n_samples,), got shape {w.shape}")
    n_seeds = max(int(n_fresh), int(n_seeds or 0))
    J = int(min(n_seeds, X.shape[0] // 2))
    uniforms = rng.random(J) if J >= 2 else np.empty(0)
    out = _core.fit_fresh_clusters(
        model.obs.core, X, w, model.alloc.core, uniforms,
        int(n_fresh), n_seeds, int(iters), int(kmeans_iters), seed_rows=int(seed_rows),
        abandon_loss=None if abandon_loss is None else float(abandon_loss), abandon_after=int(abandon_after), n_threads=n_threads,
    )
    if out is None:
        return None, None, -np.inf
    N, S, gain = out
    return N, S, float(gain)


#: most entries (rows × features) of the subsample a target collects when peels are on (128 MB
#: of doubles): a peel needs a few hundred rows of each cluster hidden in the target, so the
#: target is read whole when it fits (the fits of :func:`fit_fresh_clusters` use a uniform part
#: of it, of their usual size)
PEEL_MAX_ENTRIES = 1 << 24


def _peel_cap(cap: int, d: int) -> int:
    """Rows of the reservoir of a target that may be peeled: its whole mass, up to
    :data:`PEEL_MAX_ENTRIES` values of ``d`` features, and never fewer than the usual ``cap``."""
    return max(int(cap), PEEL_MAX_ENTRIES // max(int(d), 1))


#: most entries (rows × features) the subsamples of all targets collected in a settled lap hold
#: together (256 MB of doubles; :meth:`BirthMove.plan_next`)
SWEEP_MAX_ENTRIES = 1 << 25

#: a target is peeled when it holds at least this many times the median mass of the other
#: clusters (or is the only one): it may hide that many clusters, too many for a split into a
#: few fresh ones (a target of two or three clusters is split by the fits)
PEEL_MIN_RATIO = 4.0

#: a target is peeled only when its subsample holds at least this many sets of ``4 D`` rows
#: (the size of a peeled set): room for many clusters (on image patches, whose median cluster
#: holds a few dozen rows, targets of 600–2,000 rows were peeled in vain at every lap)
PEEL_MIN_SETS = 8

#: a target is peeled again only once its mass has changed by more than this fraction since its
#: last peel (1: only once it has more than doubled): a large cluster that is one Gaussian (the
#: smooth patches of an image) was peeled in vain again and again while it absorbed merges
PEEL_RETRY_CHANGE = 1.0


def peel_seeds(model, option) -> int:
    r"""Seeds of a peel (:func:`peel_clusters`): the ``birth_peel_seeds`` move option; ``"auto"``
    gives 32 for the full-covariance Gaussians (``gauss``, ``zero_mean_gauss``) with
    :math:`D\ge32` features and 0 (no peels) otherwise. (With 16 features the fits of
    :func:`fit_fresh_clusters` find the clusters of ``make_gaussian_mixture(100_000, 16, 25)``
    from one cluster, and peels only doubled the fit's time, to the same objective.)"""
    if option != "auto":
        return max(0, int(option))
    d = int(getattr(model.obs, "n_features", 0) or 0)
    return 32 if model.obs.kind in ("gauss", "zero_mean_gauss") and d >= 32 else 0


def peel_clusters(model, X, r, rng, n_seeds, *, scale=1.0, iters=8, expand_iters=3, give_up_after=8, n_threads=None):
    r"""Fresh clusters peeled one at a time out of a target's subsample: each is a set of rows
    that the model's own expected log-likelihood prefers under the set's posterior to under the
    target's; the rows of no set form one more cluster (the rest).

    Mixtures whose clusters differ by covariance more than by mean (in many dimensions) defeat
    the fits of :func:`fit_fresh_clusters`: k-means seeds grow by position, and a split of the
    target into a few parts that are each a union of true clusters scores below the target itself
    (``benches/bench_births_hd.py --truth``), so only fresh clusters that are *not* such unions
    can be accepted. A peel looks for those directly. For each seed row :math:`x_s` (drawn with
    probability :math:`\propto r_n`):

    1. the :math:`g=4D` rows most aligned with it, :math:`(x_n^\top\hat\Sigma^{-1}x_s)^2` largest
       (:math:`\hat\Sigma` the subsample's weighted covariance, rows centred at its mean, or not
       for ``zero_mean_gauss``), form the set;
    2. up to ``iters`` times, the set's posterior :math:`q_A` (the model's prior and the set's
       summaries, weights :math:`r_n`) gives every row its score
       :math:`\ell_n=\mathbb E_{q_A}\log F(x_n)-\mathbb E_{q_T}\log F(x_n)` against the
       target's posterior :math:`q_T` (all rows), and the :math:`g` rows of largest score become
       the set, until at most 1 % of them change (the set has settled);
    3. up to ``expand_iters`` times the set becomes the rows with :math:`\ell_n>0`, until it
       settles (a set of fewer than :math:`2D` rows is dropped).

    The seeds' sets evolve together (one summary and one log-likelihood call per step for all).
    After ``give_up_after`` steps (8, every step of 2.) the peel stops if no set would yet raise
    the objective split off the target. On the covariance data at ``--spread 2.5`` a fifth of
    the 32 sets already did after two steps; at ``--spread 2.0`` (where the true clusters score
    8.6 nats per row above one cluster) the sets become pure in 5–8 steps, and a limit of four
    steps gave up on all of them (the fit stopped at one cluster; with eight it finds the 80
    clusters, ARI 1.0, in 68 s). On image patches no peel of a large cluster (one non-Gaussian
    blob) had a set that raised the objective after four steps nor later: there the longer limit
    costs 1.33 → 1.50 s of peels in the README demo's fit, which is otherwise unchanged. Then,
    in seed order, a set is kept when splitting it off the target raises
    the weighted-subsample objective (below) and it shares less than half of its rows with every
    set kept before (a target that is one cluster keeps none). On the covariance mixture of
    ``benches/bench_births_hd.py`` (``--spread 2.5``: 100,000 × 128, 80 clusters, ~1,100 rows
    each) step 1 puts ~15 % of a cluster's rows in the set, and step 2 reaches a set of one
    cluster in 5–8 steps.

    Parameters
    ----------
    model : Model
        The mixture (its observation model's kernels are used).
    X : ndarray of shape (m, D)
        The target's subsample.
    r : ndarray of shape (m,)
        Its responsibilities for the target (the weights of every posterior above).
    rng : numpy.random.Generator
        Draws the seeds.
    n_seeds : int
        Seeds tried (at most ``m``).
    scale : float, default=1.0
        Factor of the returned summaries' weights (the target's mass over ``r.sum()``, as the
        fits of :func:`fit_fresh_clusters` weigh their rows).
    iters, expand_iters : int
        Steps 2 and 3 above.
    give_up_after : int
        Steps after which the peel stops when no set raises the objective yet.
    n_threads : int, optional
        Threads of the kernels.

    Returns
    -------
    N, S : ndarray or None
        Summaries of the peeled clusters and then of the rest (clusters below one atom of
        weight dropped), weights ``scale * r``; ``None`` when no set was kept or the subsample
        has fewer than :math:`8D` rows.
    gain : float
        The weighted-subsample objective of this partition (hard assignments) minus that of one
        cluster (as the gain of :func:`fit_fresh_clusters`); ``-inf`` when ``N`` is ``None``.
    """
    core = model.obs.core
    X = np.ascontiguousarray(X, dtype=np.float64)
    r = np.ascontiguousarray(r, dtype=np.float64)
    m, d = X.shape
    g = 4 * d
    if m < 2 * g or n_seeds < 1 or not r.sum() > 0:
        return None, None, -np.inf
    N0, S0 = _set_summaries(model.obs.kind, X, r, [np.arange(m)])
    base = np.asarray(core.e_log_lik(X, N0, S0, n_threads=n_threads))[:, 0]
    centre = np.zeros(d) if model.obs.kind == "zero_mean_gauss" else r @ X / r.sum()
    Xc = X - centre
    cov = (Xc * r[:, None]).T @ Xc / r.sum()
    cov[np.diag_indices(d)] += 1e-9 * max(float(np.trace(cov)) / d, 1e-300)
    alloc = model.alloc.core

    def objective(N, S):
        """Weighted-subsample objective of clusters with summaries ``N, S`` (entropy left out)."""
        return float(core.elbo_data(N, S)) + float(alloc.elbo(N))

    one = objective(N0 * scale, S0 * scale)

    def split_gain(rows):
        """Subsample objective of ``rows`` split off the target, minus the target's."""
        Na, Sa = _set_summaries(model.obs.kind, X, r, [rows])
        return objective(np.array([Na[0], N0[0] - Na[0]]) * scale, np.stack([Sa[0], S0[0] - Sa[0]]) * scale) - one

    seeds = rng.choice(m, size=min(int(n_seeds), m), replace=False, p=r / r.sum())

    def evolve(seeds):
        """Every seed's set, evolved at once: one summary and one log-likelihood call per step
        for all of them (a call's cost is mostly the rows' feature map, whatever the number of
        sets); None for a seed whose set fell below 2 D rows."""
        Z = Xc @ np.linalg.solve(cov, Xc[seeds].T)
        sel: list = [_top_rows(Z[:, j] ** 2, g) for j in range(len(seeds))]
        active = np.ones(len(seeds), dtype=bool)
        expand = np.zeros(len(seeds), dtype=bool)
        for it in range(iters + expand_iters):
            live = np.flatnonzero(active)
            if live.size == 0:
                break
            Ns, Ss = _set_summaries(model.obs.kind, X, r, [sel[j] for j in live])
            score = np.asarray(core.e_log_lik(X, Ns, Ss, n_threads=n_threads)) - base[:, None]
            if it == give_up_after and not any(split_gain(sel[j]) > 0 for j in live):
                return [None] * len(seeds)  # no set on its way to a cluster: one cluster, likely
            for c, j in enumerate(live):
                expand[j] |= it >= iters
                new = np.flatnonzero(score[:, c] > 0) if expand[j] else _top_rows(score[:, c], g)
                if new.size < 2 * d:
                    sel[j], active[j] = None, False
                else:
                    # a set has settled when at most 1 % of its rows changed
                    settled = np.setxor1d(new, sel[j], assume_unique=True).size <= new.size // 100
                    active[j] = not (settled and expand[j])
                    expand[j] |= settled
                    sel[j] = new
        return sel

    sets: list = []
    for t in evolve(seeds):
        if t is not None and all(np.intersect1d(t, u).size * 2 < min(t.size, u.size) for u in sets) and split_gain(t) > 0:
            sets.append(t)
    if not sets:
        return None, None, -np.inf
    # rows in several sets are shared equally among them; the rest holds the rows of none
    tot = np.zeros(m)
    for t in sets:
        tot[t] += 1.0
    rest = np.flatnonzero(tot == 0)
    N, S = _set_summaries(model.obs.kind, X, scale * r, sets + [rest], [1.0 / tot[t] for t in sets] + [np.ones(rest.size)])
    keep = np.flatnonzero(N >= 1.0)
    if keep.size < 2:
        return None, None, -np.inf
    N, S = np.ascontiguousarray(N[keep]), np.ascontiguousarray(S[keep])
    # weighted-subsample objective of the hard partition against one cluster (the entropy of
    # rows shared by two sets left out: the gain is not overstated by it)
    return N, S, objective(N, S) - one


def _set_summaries(kind, X, r, sets, weights=None):
    """Summaries (``N``, ``S`` in the layout of ``ObsModel.summarize``: ``[Σ w x, Σ w x xᵀ]``,
    without the first part for ``zero_mean_gauss``) of the rows ``sets[j]`` of ``X`` with
    weights ``r`` (times ``weights[j]``, one per row of the set, when given): a ``D × D``
    product per set, where the kernel builds every row's ``D(D+1)/2`` features (1.4 s for
    90,000 rows at ``D = 128``)."""
    N, S = [], []
    for j, t in enumerate(sets):
        Xt, w = X[t], r[t] if weights is None else r[t] * weights[j]
        xx = (Xt * w[:, None]).T @ Xt
        xx = (xx + xx.T) / 2.0
        N.append(w.sum())
        S.append(xx.ravel() if kind == "zero_mean_gauss" else np.concatenate([w @ Xt, xx.ravel()]))
    return np.array(N), np.ascontiguousarray(np.array(S))


def _top_rows(v, g):
    """Indices of the ``g`` largest entries of ``v`` (ties: lower index first), sorted: a
    partition, then a stable sort of the entries at or above the ``g``-th largest value."""
    cut = np.partition(v, v.size - g)[v.size - g]
    cand = np.flatnonzero(v >= cut)
    return np.sort(cand[np.argsort(-v[cand], kind="stable")[:g]])


class _Proposal:
    def __init__(self, target, N, S, model, laps):
        self.target = int(target)
        self.set_fresh(N, S, model)
        self.laps_left = int(laps)
        self.attempts = 0
        self.parts: dict = {}

    def set_fresh(self, N, S, model):
        self.N = np.ascontiguousarray(N, dtype=np.float64)
        self.S = np.ascontiguousarray(S, dtype=np.float64)
        with np.errstate(divide="ignore"):
            fresh = SuffStats(self.N, self.S, np.zeros(self.N.shape[0]), 0.0, np.arange(self.N.shape[0]))
            self.e_log_pi = np.ascontiguousarray(np.log(model.alloc.weights(fresh)))


class BirthMove(Move):
    """Birth move with lap-long collection, construction and exact end-of-lap evaluation.

    ``max_per_lap`` caps the births evaluated per lap (and the targets collected per lap; with
    one batch, i.e. ``algorithm="full"``, at most one target is collected per iteration).
    """

    kind = "birth"
    plans_early = True
    carried = ("targets", "reservoirs", "pending", "failures", "peeled")

    def __init__(self, manager, start_lap, max_per_lap):
        super().__init__(manager, start_lap, max_per_lap)
        self.targets: list = []  # uids collected this lap
        self.reservoirs: dict = {}  # uid -> Reservoir
        self.active: list = []  # proposals evaluated at the end of this lap
        self.pending: list = []  # proposals carried to the next lap
        self.failures: dict = {}  # uid -> (count, N_k at the last failure)
        self.peeled: dict = {}  # uid -> N_k at its last peel

    # ------------------------------------------------------------------------ planning
    def busy(self) -> bool:
        """True while a birth is prepared for the next lap: a pending proposal, or a collected
        subsample of a target that has not used up its ``birth_max_fail`` attempts."""
        return bool(self.pending) or any(len(r) > 0 and not self._blocked(uid) for uid, r in self.reservoirs.items())

    def _blocked(self, uid: int) -> bool:
        count = self.failures.get(uid, (0, 0.0))[0]
        return count >= self.manager.options["birth_max_fail"]

    def reserve(self, ctx: LapContext) -> None:
        keep = []
        for p in self.pending:
            if ctx.exact and ctx.alive([p.target]):
                ctx.involved.add(p.target)
                ctx.targets.add(p.target)
                keep.append(p)
        self.pending = keep

    def _eligible(self, ctx: LapContext, uid: int, n: float) -> bool:
        if uid in ctx.targets:
            return False
        if uid in self.failures:
            count, n0 = self.failures[uid]
            if abs(n - n0) > self.manager.options["birth_retry_change"] * max(n0, 1e-300):
                del self.failures[uid]
            elif count >= self.manager.options["birth_max_fail"]:
                return False
        return True

    def _fail(self, uid, n):
        count = self.failures.get(uid, (0, 0.0))[0]
        self.failures[uid] = (count + 1, float(n))

    def plan(self, ctx: LapContext) -> None:
        self.peeled = {u: n for u, n in self.peeled.items() if ctx.alive([u])}
        self.active = list(self.pending)
        self.pending = []
        reservoirs, self.reservoirs, self.targets = self.reservoirs, {}, []
        if not ctx.exact or ctx.lap < max(self.start_lap, 2):
            return
        opts = self.manager.options
        G = ctx.G
        # the lap's targets, then their fits: first attempts first, then retries on the same
        # subsample, at most birth_fits_per_lap x max_births_per_lap fits in all
        todo = []
        for uid, res in reservoirs.items():
            if not ctx.alive([uid]) or uid in ctx.involved:
                continue
            Nt = float(G.N[int(ctx.pos([uid])[0])])
            if Nt < opts["birth_min_size"] or len(res) < 4 or not self._eligible(ctx, uid, Nt):
                continue
            todo.append((uid, res, Nt))
        # (more targets than max_per_lap were collected after a settled lap: each gets its fits)
        budget = int(opts["birth_fits_per_lap"]) * max(self.max_per_lap, len(todo))
        fits = n_new = 0
        while todo and fits < budget and n_new < self.max_per_lap:
            failed = []
            for uid, res, Nt in todo:
                if fits >= budget or n_new >= self.max_per_lap:
                    break
                fits += 1
                N, S, gain = self._attempt(ctx, res, Nt, uid)
                if N is None:
                    # nothing to propose, or a fit that does not beat one cluster on the
                    # target's own rows: no lap is spent on it; it counts as a failure and the
                    # next attempt follows on the same rows (this lap if the budget allows),
                    # unless the fit lost more than birth_retry_loss nats per target row: then
                    # the target is left alone at its current size
                    self._fail(uid, Nt)
                    if gain < -float(opts["birth_retry_loss"]) * Nt:
                        self.failures[uid] = (int(opts["birth_max_fail"]), float(Nt))
                    if self._eligible(ctx, uid, Nt):
                        failed.append((uid, res, Nt))
                    continue
                self.active.append(_Proposal(uid, N, S, ctx.model, opts["birth_laps"]))
                ctx.involved.add(uid)
                ctx.targets.add(uid)
                n_new += 1
            todo = failed

    def _peelable(self, ctx, uid, Nt) -> bool:
        """Whether target ``uid`` of mass ``Nt`` is to be peeled (:meth:`_attempt`): peels on
        for the model, no failure at its current size, not peeled since its mass changed by
        :data:`PEEL_RETRY_CHANGE`, a mass of :data:`PEEL_MIN_SETS` sets of ``4 D`` rows, and at
        least :data:`PEEL_MIN_RATIO` times the median mass of the other clusters (of at least
        one atom) or no other cluster: a target that may hide many clusters."""
        if not peel_seeds(ctx.model, self.manager.options["birth_peel_seeds"]):
            return False
        last = self.peeled.get(uid)
        if self.failures.get(uid, (0, 0.0))[0] or (last is not None and abs(Nt - last) <= PEEL_RETRY_CHANGE * last):
            return False
        if Nt < PEEL_MIN_SETS * 4 * int(ctx.model.obs.n_features):
            return False
        G = ctx.G
        N = np.asarray(G.N, dtype=np.float64)
        others = np.delete(N, int(G.positions([uid])[0]))
        others = others[others >= 1.0]
        return others.size == 0 or Nt >= PEEL_MIN_RATIO * float(np.median(others))

    def _attempt(self, ctx, res, Nt, uid):
        """One subsample fit for a target of mass ``Nt``: its fresh summaries and the
        fit's gain over one cluster on the target's own rows, with ``N, S = None`` when there is
        nothing to propose or the gain is not above ``birth_min_gain``. A retry draws other seeds
        from the move stream (as many: ``birth_n_seeds``).

        With peels on, the first attempt on a target that :meth:`_peelable` accepts (and whose
        subsample was collected whole, with :data:`PEEL_MIN_SETS` sets of ``4 D`` rows) is a peel
        (:func:`peel_clusters`, screened by its gain as a fit is); when the peel proposes
        nothing, and on later attempts, the fit runs on a uniform part of the subsample of the
        usual size (``Reservoir.fit_rows``)."""
        opts = self.manager.options
        scale = Nt / res.r.sum() if opts["birth_scale_weights"] else 1.0
        X, r = res.X, res.r
        fit_rows = getattr(res, "fit_rows", None)  # set: collected whole for a peel
        if fit_rows is not None and len(res) >= PEEL_MIN_SETS * 4 * X.shape[1] and self._peelable(ctx, uid, Nt):
            self.peeled[uid] = float(Nt)
            n_peel = peel_seeds(ctx.model, opts["birth_peel_seeds"])
            N, S, gain = peel_clusters(ctx.model, X, r, ctx.state.rng_moves, n_peel, scale=scale, n_threads=ctx.n_threads)
            if N is not None and gain > float(opts["birth_min_gain"]):
                return N, S, gain
        if fit_rows is not None and len(res) > fit_rows:
            idx = np.sort(ctx.state.rng_moves.choice(len(res), int(fit_rows), replace=False))
            X, r = X[idx], r[idx]
            scale = Nt / r.sum() if opts["birth_scale_weights"] else 1.0
        w = r * scale
        n_seeds = int(opts["birth_n_seeds"])
        N, S, gain = fit_fresh_clusters(
            ctx.model, np.ascontiguousarray(X), np.ascontiguousarray(w), int(opts["birth_n_fresh"]),
            ctx.state.rng_moves, n_seeds=n_seeds, iters=int(opts["birth_refine_iters"]), kmeans_iters=int(opts["birth_create_iters"]),
            n_threads=ctx.n_threads, seed_rows=seed_rows(ctx.model, opts["birth_seed_rows"]),
            abandon_loss=opts["birth_abandon_loss"], abandon_after=int(opts["birth_abandon_after"]),
        )
        if N is None or not gain > float(opts["birth_min_gain"]):
            return None, None, gain
        return N, S, gain

    def plan_next(self, ctx: LapContext) -> None:
        if ctx.lap + 1 < max(self.start_lap, 2) or self.max_per_lap < 1:
            return
        G = ctx.G
        min_size = self.manager.options["birth_min_size"] if ctx.exact else 0.0
        score = b_scores(ctx.model, G)
        cands = [
            i for i in np.lexsort((G.uids, score))
            if G.N[i] > 0 and G.N[i] >= min_size and self._eligible(ctx, int(G.uids[i]), float(G.N[i]))
        ]
        n = self.max_per_lap
        if ctx.settled and ctx.exact:
            # the previous lap met the convergence test while targets were still to be tried:
            # collect for every eligible target now (within SWEEP_MAX_ENTRIES collected values),
            # so that their fits all follow in the next lap instead of max_per_lap a lap
            n = self._sweep_targets(ctx, cands)
        self.targets = [int(G.uids[i]) for i in cands[:n]]
        # slots left: collect again for this lap's own birth targets that may still be retried
        # (if their birth is accepted the subsample is dropped), so that a rejection is followed
        # by another attempt in the next lap instead of a lap without any birth
        for p in self.active:
            if len(self.targets) >= n or p.target in self.targets or not ctx.alive([p.target]):
                continue
            count = self.failures.get(p.target, (0, 0.0))[0]
            pos = int(ctx.pos([p.target])[0])
            if count + 1 < self.manager.options["birth_max_fail"] and G.N[pos] >= min_size:
                self.targets.append(int(p.target))
        self.reservoirs = {}

    def _sweep_targets(self, ctx, cands) -> int:
        """How many of the ranked candidates ``cands`` (positions) a settled lap collects for:
        as many as the reservoirs' largest possible sizes keep within
        :data:`SWEEP_MAX_ENTRIES` values, and at least ``max_per_lap``. A reservoir holds at most
        its cap, and at most ``N_k / birth_collect_threshold`` rows (each collected row has more
        than that responsibility), times ``D`` values."""
        G, d = ctx.G, int(ctx.model.obs.n_features)
        opts = self.manager.options
        cap = subsample_cap(ctx.model, G, opts)
        thr = max(float(opts["birth_collect_threshold"]), 1e-12)
        total = n = 0
        for i in cands:
            Nt = float(G.N[i])
            rows = min(Nt / thr, _peel_cap(cap, d) if self._peelable(ctx, int(G.uids[i]), Nt) else cap)
            total += int(np.ceil(rows)) * d
            if total > SWEEP_MAX_ENTRIES and n >= self.max_per_lap:
                break
            n += 1
        return max(n, self.max_per_lap)

    # ------------------------------------------------------------------------- batches
    def batch_request(self, ctx, b, visit):
        props = []
        for p in self.active:
            props.append({
                "src": [int(ctx.pos([p.target])[0])],
                "fresh_N": p.N, "fresh_S": p.S, "fresh_e_log_pi": p.e_log_pi,
            })
        cols = [int(c) for c in ctx.pos(self.targets)] if self.targets else []
        if not props and not cols:
            return None
        return BatchRequest(proposals=props, collect_cols=cols)

    def after_batch(self, ctx, b, visit, result):
        for p, part in zip(self.active, result["proposals"]):
            p.parts[b] = tuple(np.array(a, dtype=np.float64, copy=True) for a in part)
        X = getattr(self.manager, "_batch_X", None)
        if not self.targets or result["cols"] is None or X is None:
            return
        cols = np.asarray(result["cols"])
        for i, uid in enumerate(self.targets):
            col = cols[:, i]
            rows = np.flatnonzero(col > self.manager.options["birth_collect_threshold"])
            if rows.size == 0:
                continue
            res = self.reservoirs.get(uid)
            if res is None:
                opts = self.manager.options
                # (in a first lap G holds the visited batches only: no average cluster mass yet)
                cap = subsample_cap(ctx.model, ctx.G, opts) if ctx.exact else int(opts["birth_max_subsample"])
                if hasattr(X, "nnz"):  # sparse rows are kept dense in the reservoir: bound its memory (128 MB)
                    cap = max(64, min(cap, (1 << 24) // max(int(X.shape[1]), 1)))
                fit_rows = None
                # a target that may be peeled collects its whole mass (up to PEEL_MAX_ENTRIES)
                if not hasattr(X, "nnz") and self._peelable(ctx, uid, float(ctx.G.N[int(ctx.pos([uid])[0])])):
                    fit_rows, cap = cap, _peel_cap(cap, X.shape[1])
                res = self.reservoirs[uid] = Reservoir(cap, X.shape[1])
                res.fit_rows = fit_rows
            res.add(X[rows], col[rows], ctx.state.rng_moves)

    # ----------------------------------------------------------------------- evaluation
    def evaluate(self, ctx: LapContext, elbo: float):
        mgr, model = self.manager, ctx.model
        B = ctx.n_batches
        # accepted births are chained on G for the decisions (each candidate: the exact summaries
        # of the model with the births accepted so far) and applied to the memos once at the end
        G = ctx.G
        done: list = []  # (target uid, per-batch parts, new uids), in order
        for p in self.active:
            p.attempts += 1
            alive = {int(u) for u in G.uids}
            if len(p.parts) != B or p.target not in alive:  # pragma: no cover - defensive
                continue
            parts = [p.parts[b] for b in range(B)]
            N, S, H = sum_parts(parts)
            pos = int(G.positions([p.target])[0])
            J = N.shape[0]
            cand = G.append(N, S, H, -1 - np.arange(J), drop=[pos])
            after = model.elbo(cand)
            if accepts(elbo, after, mgr.accept_rtol):
                new_uids = ctx.state.new_uids(J)
                G = G.append(N, S, H, new_uids, drop=[pos])
                mgr.log(ctx, "birth", [p.target], elbo, after, True, new_uids=[int(u) for u in new_uids], attempts=p.attempts)
                elbo = after
                done.append((p.target, parts, new_uids))
                self.failures.pop(p.target, None)
                continue
            p.laps_left -= 1
            keep = N >= 1.0
            if p.laps_left > 0 and keep.sum() >= 2:
                order = np.argsort(-N[keep], kind="stable")
                p.set_fresh(N[keep][order], S[keep][order], model)
                p.parts = {}
                self.pending.append(p)
                continue
            mgr.log(ctx, "birth", [p.target], elbo, after, False, attempts=p.attempts)
            self._fail(p.target, G.N[pos])
        self.active = []
        if done:

            def append_all(s, parts):
                for (target, _, new_uids), part in zip(done, parts):
                    s = s.append(part[0], part[1], part[2], new_uids, drop=[int(s.positions([target])[0])])
                return s

            def frozen_parts(s):  # a frozen memo holds no mass of the fresh clusters
                return [(np.zeros(len(u)), np.zeros((len(u), s.S.shape[1])), np.zeros(len(u))) for _, _, u in done]

            elbo = mgr.apply(ctx, append_all, [[parts[b] for _, parts, _ in done] for b in range(B)], frozen_part=frozen_parts)
        return len(done), elbo


BirthMove.state_classes = {"Reservoir": Reservoir, "_Proposal": _Proposal}
