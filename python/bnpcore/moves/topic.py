r"""Proposal moves of the topic models: birth, merge and delete of the HDP (Hughes thesis §5.5)
and the fixed-K swap of LDA, each accepted only when the exact objective of the whole-dataset
summaries rises, plus the monotone batch update of memoized learning.

:class:`TopicMoveManager` is driven by the unchanged memoized lap through the hooks every move
manager has (``start_lap``, ``batch_options``, ``after_batch``, ``end_lap``, ``busy``,
``get_state``/``set_state``). It works on the summaries of :class:`bnpcore.topic.TopicModel`.

**Monotone batch update.** The document step is started cold, so a revisited batch can come
back with a slightly lower objective than its memo (the per-document problem is non-convex;
thesis §5.3.3, "Memoized algorithm and monotonicity guarantee"). Both the memo and the new
summaries describe valid local parameters of the batch, so after every visit the manager keeps
whichever gives the larger whole-dataset objective (a block coordinate-ascent step over the
two candidates). With it, full-dataset and memoized learning never decrease the objective once
every batch has a memo. The choice is skipped in the first lap of a smaller family of
responsibilities (dense → L-sparse), whose memos must be replaced.

**Merge** (thesis §5.5.1). Before a lap, candidate pairs :math:`(k_A,k_B)` are ranked by the
exact change of the data term :math:`\sum_k[c_{\rm Dir}(\bar\lambda)-c_{\rm Dir}(\bar\lambda+S_k)]`
(the part of the objective computable from global summaries); during the lap the document
step computes, per batch and pair, the merged entropy, :math:`P` and :math:`Q` of
:math:`\tilde r=r_A+r_B`, :math:`\tilde\theta=\theta_A+\theta_B` (``merge_H``, ``merge_P``,
``merge_Q``). These are the exact summaries of the merged local parameters, so the merged
objective (with its own optimal sticks) is exact. Pairs are accepted greedily; a pair touching
a topic that already merged this lap is skipped.

The pairs are ranked once per structure — at the first lap that plans merges after a move was
accepted (of any kind; and at the first such lap of the fit) — and each is tried at most once
per structure: a rejected pair waits for the next accepted move, as failed delete and birth
targets do, and its slot stays empty. Re-ranking every lap re-tracked the same pairs lap after
lap (their merged entropy, ``P`` and ``Q`` cost the document step of every lap: on the bars, 25
pairs at K = 10, 60 % of a lap's step) and scored every pair of topics each time; the pairs it
added at an unchanged structure (2–7 laps in each of four fits measured) were never accepted,
and in the default fits of Lee (seeds 0–1), Reuters (0–1) and the Wikipedia sample (0) no
accepted merge had been rejected at the same structure before. Ten default fits end exactly
where they did, sooner (``docs/topic_models.md``).

**Delete** (thesis §5.5.2, whole-dataset version). The candidate removes topic :math:`j`: the
document step is rerun on every batch with the remaining :math:`K-1` topics (globals from the
summaries without :math:`j`; ``delete_passes`` passes, default one), and the objective of the resulting summaries is compared
with the current one. Candidates are the smallest topics (by :math:`N_k`) that did not fail
since the last accepted move at about their current size (a change of more than
``delete_retry_change`` of the size at the rejection, default 10 %, makes a topic a candidate
again, as in the mixtures: junk topics shrink while the others take their tokens, and become
deletable late) and that few documents use: a topic used
(:math:`N_{dk}>0.01`, the document step's ``doc_usage`` counts of the lap) by more than
``delete_max_usage`` of the documents (default 15 %) is not a rarely used "junk" topic
(thesis §5.5.2) and is not tried. In the default fits of the bars, Lee, Reuters and the
Wikipedia sample (seeds 0–3 where measured) every accepted delete removed a topic used by at
most 8.1 % of the documents, while the bars' true topics (used by 17–26 %) were each tried
and rejected by 50,000 nats, a whole-corpus pass apiece (``docs/topic_models.md``). The
candidate's documents start from the lap's counts (warm starts, below), and only those that
used the target (count above 0.01) try restart proposals (``restart_mask`` of the document
step): the others' restarts were tried by the lap at nearly the same globals, and were a third
of a delete candidate's passes for nothing (nine default fits ended within 6 nats of where they
did). Deletes need every batch to be revisitable (no frozen memos).

**Deleting small allocations** (``delete_small``, on with deletes). A topic delete removes
one topic from every document; this delete removes, at once, every document's allocations
below ``delete_small_below`` (5 %) of its tokens. Each document starts from the lap's topic
counts with those allocations set to zero, ``delete_small_passes`` (two) document-step passes
follow (the first from the current globals, the next from the summaries of the first), and the
candidate is accepted iff the objective of the last pass's summaries is higher. It is proposed
once per structure (the set of topics), in the lap after one that met the convergence test
(:meth:`TopicMoveManager.busy` keeps the fit going for that lap); it changes no topic, so an
accepted one retries nothing. Logged as a ``"delete"`` with no ``uids`` and the number of
allocations it set to zero (``small_allocations``).

Why: fits that start from many topics (``n_components=50`` with the default
``init="random_docs"``, or 10) reach the ten bars but in a worse local optimum, where each
document keeps a spurious third topic for a few of its off-bar words and the topics stay too
sharp (2.9 topics per document with more than one token, against 1.9 for the fit grown from one
topic; data term +29,500 nats, allocation term −35,300). No topic move leaves it: every
document must drop its spurious topic while the topics broaden, which a document's own restart
proposals cannot do at fixed topics. On the 2,000 bars documents from K = 50 the candidate gains
+2,700 nats, the fits end at the objective of the fit grown from one topic (Hellinger distance
to the bars 0.106–0.111 → 0.080–0.081, seeds 0–2), and likewise from K = 10; the default fits
of Lee, Reuters and the Wikipedia sample end 5–670 nats higher, the fits it cannot improve one
lap and two passes later (``docs/topic_models.md``).

**Settled deletes** (``delete_settled``, default 3, on with deletes). In the same settled lap,
before the small allocations, the ``delete_settled`` smallest topics that an ordinary delete
may try (size and usage limits; earlier rejections aside) are proposed again, one at a time,
with the documents that used the topic started from the prior (``cold_mask`` of the document
step) instead of from their counts without it; the first accepted one ends the round (the lap's
usage counts describe the old topics); the round runs with ``delete_small`` off too. Logged as
a ``"delete"`` with ``settled=True``. Why: a warm start locks in a document that loses most of
its tokens with the deleted topic. Every topic it did not use starts at weight
:math:`\exp\psi(a_k)` (about :math:`e^{-20}` for small :math:`a_k`), so the lost tokens stay on
the topics it kept. From K = 50 on the 1,000 bars documents (seed 1) a document ended explained
by one bar and an eleventh topic of its own (114 tokens, 57 % of the document): its delete lost
225 nats warm and gains 125 with the document restarted. Cold-starting those documents in
*every* delete made better candidates but lower final fits on Reuters and the Wikipedia sample
(more deletes accepted early; module history in ``docs/topic_models.md``), so it is kept for
the lap where the fit was about to end. Where every topic is used by many documents (the bars'
default fits) nothing is proposed; the default fits of Lee, Reuters and the Wikipedia sample
reject their three candidates (−60 … −900 nats) and end where they did.

**Birth** (thesis §5.5.3, whole-dataset version). The target is the largest topic that has not
failed a birth since the last accepted move. During the lap, every document using it
(:math:`N_{dt}>1`, at most ``birth_max_docs``) contributes its target histogram: its word counts
weighted by the plug-in responsibility :math:`\hat\pi_{dt}\hat\phi_{tv}/\sum_k\hat\pi_{dk}\hat\phi_{kv}`
(the document step does not keep per-word responsibilities). Bregman (KL) k-means on these
histograms gives up to ``birth_n_new`` new topics; the target keeps ``birth_keep_fraction`` of its
counts and the new topics share the rest. The document step is then rerun on every batch with the
enlarged set (``birth_passes`` passes) and the proposal is accepted iff the objective of the
resulting summaries is higher. Merges are evaluated first (their per-batch statistics describe the
lap's memos), then deletes, then the birth; a topic takes part in at most one move per lap.

**Swap** (LDA, ``FiniteTopicModel``; its default move). LDA has no birth, merge or delete: its
prior :math:`\mathrm{Dir}_K(\alpha/K)` fixes the number of topics. A swap keeps it. The target
is chosen and its histograms collected as a birth's; Bregman 2-means splits them in two, and the
candidate replaces the target *and the smallest other topic* by the two clusters (sharing the
target's tokens in proportion to their mass); each document starts from the lap's counts with
its count of the target split in the same proportion and its count of the dropped topic removed,
the document step reruns on every batch (``birth_passes``) and the candidate is accepted iff the
objective of the resulting summaries is higher. Logged as ``"swap"`` with ``uids`` (target,
dropped topic) and ``new_uids``. Once a swap is rejected none is proposed again (only an
accepted swap changes LDA's structure): by then every further target is a true topic (on the
bars every later proposal lost 44,000–61,000 nats, one pass each). Why:
variational LDA from random-document topics often ends with one topic holding two true topics
and another empty or duplicating a neighbour, a local optimum that no document step leaves. On
the 2,000 bars documents at the true K = 10 (seeds 0–3) the fits without moves had 6, 0, 3 and 3
bars farther than 0.1 (Hellinger) from their topics and held-out scores of −5.92 … −5.83 nats per
token; with swaps 1, 0, 0 and 2 and −5.841 … −5.834. The objective rose on gensim's Lee corpus,
Reuters' titles and gensim's Wikipedia sample too, in every seed; the held-out score rose on Lee
and the Wikipedia sample and fell on Reuters (by 0.017 nats per token on average over eight
seeds; ``docs/topic_models.md``). The same split
and merge in one step is the idea of split-and-merge EM (Ueda et al. 2000), here with the
smallest topic in place of a merged pair and the exact objective as the judge.

**Warm starts** (``warm_start``, on by default). The lap keeps every document's topic counts
:math:`N_{dk}` (at most :data:`_WARM_MAX_ENTRIES` counts in all, else candidates start cold), and a delete or birth candidate's document step starts each document
from them instead of from the prior: a delete's from the counts without the deleted topic (a
topic merged this lap carries the counts merged into it), a birth's with the target's count
split as its summaries are (``birth_keep_fraction`` kept, the rest to the new topics in
proportion to their mass). Any start gives valid local parameters, so the candidate's
objective stays exact; the start decides how good the candidate is and how many passes it
takes. Default fits, cold against warm: candidate passes 10–45 % cheaper; the objective ended
higher with the warm starts in all eleven fits tried (gensim's Lee corpus, Reuters, gensim's
Wikipedia sample; +49 … +4,158 nats, mostly more births accepted), and the Wikipedia fits took
11.7 and 17.5 s instead of 21.7 and 27.4 s. On a Dask cluster the counts travel with the lap's
other outputs and the starts with the candidate's steps (the same fits as on one machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bnpcore import _core
from bnpcore.algorithms._base import materialize, memo_map, sum_memos
from bnpcore.moves._base import (
    ACCEPT_RTOL,
    ACCEPT_RTOL_RANGE,
    FLAG,
    FRACTION,
    SWAP_KINDS,
    MoveOptions,
    accepts,
    adopt_memos,
    count,
    number,
    size_changed,
    whole_dataset_passes,
)
from bnpcore.moves.merge import neighbour_pairs

__all__ = ["TOPIC_MOVE_KINDS", "TopicMoveConfig", "TopicMoveManager"]

#: the moves of the HDP topic model (they change the number of topics)
TOPIC_MOVE_KINDS = ("birth", "merge", "delete")


#: most document-topic counts (documents × topics, all batches) a lap keeps to warm-start the
#: document step of its delete and birth candidates (128 MB); beyond, candidates start cold
_WARM_MAX_ENTRIES = 1 << 24

#: a document uses a topic when its count there exceeds this (the document step's default
#: ``usage_threshold``, which the lap's ``doc_usage`` counts use)
_USED = _core.DOC_USAGE_THRESHOLD

#: relative shortfall below which a merge candidate's screened objective is not trusted to
#: reject it (round-off of the per-topic sums is ~1e-13 relative)
_SCREEN_MARGIN = 1e-8


def _pair_key(a: int, b: int) -> tuple:
    """A merge pair of uids as :attr:`TopicMoveManager.merge_failed` keeps it (smaller first)."""
    return (min(a, b), max(a, b))


def _merged_data_terms(core, N, S, a, b):
    """The data terms of the topics ``a[i]`` and ``b[i]`` pooled (positions in ``N``, ``S``)."""
    return core.elbo_data_per_pair(np.ascontiguousarray(N), np.ascontiguousarray(S), np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))


def _screened_objective(model, cand, data: float) -> float:
    """The topic model's objective of ``cand`` with its data term given (the per-topic sum):
    data + entropy + allocation, as :meth:`bnpcore.topic.TopicModel.elbo` adds them."""
    return float(data) + float(cand.H.sum()) + float(model.alloc.elbo(cand))


@dataclass(frozen=True)
class TopicMoveConfig:
    """Options of the topic moves.

    Parameters
    ----------
    kinds : tuple of str
        Subset of ``("birth", "merge", "delete")`` (HDP) or ``("swap",)`` (LDA).
    start_lap : dict of str to int
        First lap at which each kind is evaluated (default 2).
    max_per_lap : dict of str to int
        Birth: 0 disables births, otherwise one proposal per lap (default 1); merge: candidate
        pairs tracked per lap (default 25); delete: candidates evaluated per lap (default 2).
    options : dict
        Keys of :attr:`TopicMoveManager.DEFAULT_OPTIONS`: ``accept_rtol`` (acceptance
        ``ΔL > accept_rtol |L|``), ``merge_max_per_topic`` (default 5), ``merge_max_scored_pairs``
        (5000: with more topic pairs, only the pairs of each topic's ``merge_neighbours`` (16)
        nearest topics by word frequencies are ranked), ``delete_passes``
        (document-step passes of a delete candidate, default 1), ``delete_max_size`` (only
        topics with ``N_k`` below this fraction of the tokens, default 0.2), ``delete_max_usage``
        (only topics used by at most this fraction of the documents, default 0.15; module
        docstring), ``delete_retry_change`` (a topic whose delete was rejected is tried again
        at the same structure once its size changed by more than this fraction, default 0.1),
        ``delete_small`` (True: with deletes, propose deleting every document's allocations
        below ``delete_small_below`` = 0.05 of its tokens, judged after
        ``delete_small_passes`` = 2 passes; module docstring), ``delete_settled`` (3: in
        that lap, the smallest deletable topics proposed again with the documents that used
        them restarted from the prior; 0 disables; module docstring), and the birth
        settings ``birth_n_new`` (10), ``birth_passes`` (1), ``birth_max_docs`` (2000),
        ``birth_min_count`` (1), ``birth_kmeans_iters`` (10), ``birth_keep_fraction`` (0.1),
        ``birth_refine_iters`` (10: when the k-means candidate is rejected, iterations of a
        small LDA fit on the target's histograms that build a second, softer candidate; 0
        tries only the first), ``birth_refine_min_share`` (0.25: only for targets holding at
        least this share of the tokens, where a rejected first candidate most likely hides
        structure; on a converged model the second candidate would cost a pass per lap for
        nothing), ``warm_start`` (True: delete and birth candidates start each document from
        the lap's topic counts; module docstring).
    monotone : bool
        Keep a batch's memo when its new summaries lower the objective (module docstring).
    n_threads : int or None
    """

    kinds: tuple = TOPIC_MOVE_KINDS
    start_lap: dict = field(default_factory=dict)
    max_per_lap: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    monotone: bool = True
    n_threads: int | None = None


class TopicMoveManager(MoveOptions):
    """Merge/delete moves and the monotone batch update for topic models (module docstring).

    Every evaluated proposal is recorded in ``state.moves_log`` as a dict with ``lap``,
    ``kind``, ``uids``, ``elbo_before``, ``elbo_after``, ``elbo_gain`` and ``accepted``.
    """

    DEFAULT_OPTIONS: ClassVar[dict] = {
        "accept_rtol": ACCEPT_RTOL,
        "merge_max_per_topic": 5,
        "merge_max_scored_pairs": 5000,
        "merge_neighbours": 16,
        "delete_passes": 1,
        "delete_max_size": 0.2,
        "delete_max_usage": 0.15,
        "delete_retry_change": 0.1,
        "delete_small": True,
        "delete_small_below": 0.05,
        "delete_small_passes": 2,
        "delete_settled": 3,
        "birth_n_new": 10,
        "birth_passes": 1,
        "birth_max_docs": 2000,
        "birth_min_count": 1.0,
        "birth_kmeans_iters": 10,
        "birth_keep_fraction": 0.1,
        "birth_refine_iters": 10,
        "birth_refine_min_share": 0.25,
        "warm_start": True,
    }
    #: kind and range of every option (:class:`~bnpcore.moves._base.OptionRange`; module docstring)
    OPTION_RANGES: ClassVar[dict] = {
        "accept_rtol": ACCEPT_RTOL_RANGE,
        "merge_max_per_topic": count(1),
        "merge_max_scored_pairs": count(0),
        "merge_neighbours": count(1),
        "delete_passes": count(1),  # a candidate is judged by the summaries of its last pass
        "delete_max_size": FRACTION,
        "delete_max_usage": FRACTION,
        "delete_retry_change": number(0),
        "delete_small": FLAG,
        "delete_small_below": FRACTION,
        "delete_small_passes": count(1),
        "delete_settled": count(0),
        # a birth proposes at least two topics from at least two documents' histograms; the
        # target keeps less than all of its counts
        "birth_n_new": count(2),
        "birth_passes": count(1),
        "birth_max_docs": count(2),
        "birth_min_count": number(0),
        "birth_kmeans_iters": count(0),
        "birth_keep_fraction": number(0, 1, high_open=True),
        "birth_refine_iters": count(0),  # 0: no second candidate
        "birth_refine_min_share": FRACTION,
        "warm_start": FLAG,
    }
    DEFAULT_MAX_PER_LAP: ClassVar[dict] = {"birth": 1, "merge": 25, "delete": 2, "swap": 1}

    def __init__(self, config: TopicMoveConfig):
        self._configure(config, TOPIC_MOVE_KINDS + SWAP_KINDS, "topic models support the moves {allowed}, got {bad}")
        self.structure_version = 0
        #: uid -> (structure version, N_k) of its last rejected delete
        self.delete_failed: dict = {}
        self.birth_failed: dict = {}
        #: structure version at which the small allocations were last proposed for deletion
        self.small_tried = -1
        #: the previous lap met the convergence test while :meth:`busy` (set by the lap loop)
        self.settled = False
        self._last_stats = None  # the summaries after the last lap whose moves could run
        #: uid pairs (smaller first) whose merge was rejected at the current structure version
        self.merge_failed: set = set()
        #: (structure version, uid pairs ranked at its first lap that planned merges) or None
        self.merge_plan = None
        self._reset_lap()

    def _reset_lap(self):
        self._pairs: list = []  # (uid_a, uid_b) planned for this lap
        self._pair_stats: dict = {}  # b -> (merge_H, merge_P, merge_Q)
        self._guard = False
        self._lap = 0
        self._exact = False
        self._stale = False
        self._birth_target = None
        self._birth_hist: list = []
        self._birth_docs = 0
        self._warm = False  # this lap keeps the document-topic counts for warm starts
        self._doc_topic: dict = {}  # b -> (D_b × K counts of the lap, uids of their columns)
        self._doc_topic_entries = 0  # counts kept in _doc_topic
        self._merged_into: dict = {}  # uid merged away this lap -> the uid it went into
        self._deletes = False  # deletes are evaluated at the end of this lap
        self._settled_round = False  # the settled round (settled deletes, small allocations) ends this lap
        self._usage: dict = {}  # b -> (documents using each topic, uids of the lap, documents)

    def _start(self, kind: str) -> int:
        return int(self.config.start_lap.get(kind, 2))

    def _cap(self, kind: str) -> int:
        return int(self.config.max_per_lap.get(kind, self.DEFAULT_MAX_PER_LAP[kind]))

    # ------------------------------------------------------------------ hooks
    def start_lap(self, model, state) -> None:
        self._reset_lap()
        self._lap = state.lap + 1
        self._exact = all(m is not None for m in state.memos)
        lap_top_l = model.top_l
        self._guard = self.config.monotone and self._exact and lap_top_l == state.last_top_l and not state.mixed_top_l
        # the HDP's moves need its nested truncation; LDA's swap keeps K and needs none
        movable = self._exact and not state.frozen and (model.alloc.nested or self.kinds == SWAP_KINDS)
        if "merge" in self.kinds and movable and self._lap >= self._start("merge"):
            self._pairs = self._planned_merges(model, state.stats)
        split = "birth" if "birth" in self.kinds else ("swap" if "swap" in self.kinds else None)
        if split == "swap" and self.structure_version in self.birth_failed.values():
            split = None  # a swap was rejected at this structure: the fit keeps its topics (module docstring)
        if split and movable and self._lap >= self._start(split) and self._source is not None and self._cap(split) > 0:
            self._birth_target = self._plan_birth(state.stats)
        deletes = "delete" in self.kinds and self._lap >= self._start("delete") and self._cap("delete") > 0
        self._deletes = bool(deletes and movable)
        # after a lap that met the convergence test (``settled``, set by the lap loop)
        self._settled_round = bool(self._deletes and self.settled and self._round_pending() and self._source is not None)
        self._warm = bool(
            self.options["warm_start"]
            and movable
            and self._source is not None
            and (deletes or self._birth_target is not None)
        )

    def batch_options(self, model, state, b) -> dict:
        opts = {}
        if self._pairs:
            pos = state.stats.positions([u for pair in self._pairs for u in pair]).reshape(-1, 2)
            opts["merge_pairs"] = [(int(a), int(c)) for a, c in pos]
        if self._warm:
            from bnpcore.algorithms.executor import KEEP_DOC_TOPIC

            opts["return_doc_topic"] = True
            opts[KEEP_DOC_TOPIC] = True
        if self._birth_target is not None:
            from bnpcore.algorithms.executor import SELECT_ROWS

            opts["return_doc_topic"] = True
            self._birth_glob = G = state.stats
            if self._birth_target in set(G.uids.tolist()):  # on a cluster only the collected documents travel
                t = int(G.positions([self._birth_target])[0])
                opts[SELECT_ROWS] = ("doc_topic", t, float(self.options["birth_min_count"]))
        return opts

    def after_batch(self, model, state, b, out, X=None) -> None:
        if self._birth_target is not None and X is not None and "doc_topic" in out:
            self._collect_birth(model, self._birth_glob, X, out["doc_topic"])
        uids = np.asarray(state.stats.uids).copy()  # the columns of this batch's counts
        if self._warm:
            dt = np.asarray(out.get("doc_topic_all", out.get("doc_topic")))
            old = self._doc_topic.get(b)
            self._doc_topic[b] = (dt, uids)  # a batch redone replaces its counts
            self._doc_topic_entries += dt.size - (0 if old is None else old[0].size)
            if self._doc_topic_entries > _WARM_MAX_ENTRIES:  # too large: candidates start cold
                self._warm, self._doc_topic, self._doc_topic_entries = False, {}, 0
        if self._pairs:
            self._pair_stats[b] = (np.asarray(out["merge_H"]), np.asarray(out["merge_P"]), np.asarray(out["merge_Q"]))
        if self._deletes and "doc_usage" in out:
            self._usage[b] = (np.asarray(out["doc_usage"], dtype=np.float64), uids, float(out["n_docs"]))

    @property
    def guards_batches(self) -> bool:
        """The monotone batch update (``config.monotone``) is on for this lap: the memoized lap
        keeps a batch's new summaries only if the objective does not drop."""
        return bool(self._guard)

    def batch_rejected(self, b) -> None:
        """The lap kept batch ``b``'s previous summaries: its merge statistics describe the
        rejected ones."""
        self._stale = True

    def busy(self) -> bool:
        """True while the settled round (the settled deletes, ``delete_settled``, and the small
        allocations' delete, ``delete_small``) was not yet proposed at the current structure: a
        fit that meets the convergence test runs one more lap, whose end proposes them (module
        docstring).

        Births do not hold a fit. They once meant to (until every topic had been tried at the
        structure), but that test never fired: it read a flag already cleared for the next
        lap, and every measurement of the default fits was made without it. Made to fire, it
        kept the default fits of Reuters (seeds 0-3) and of the Wikipedia sample running to
        ``max_laps`` (some topic stayed a birth target lap after lap), for +20 … +90
        nats."""
        if self._last_stats is None or self._source is None:
            return False
        return "delete" in self.kinds and self._cap("delete") > 0 and self._round_pending()

    def _round_pending(self) -> bool:
        """Whether the settled round is still to be proposed at the current structure (either of
        its moves on; both start documents from the lap's counts). ``small_tried`` (its name in
        saved move states) is the structure at which it was last proposed."""
        on = bool(self.options["delete_small"]) or int(self.options["delete_settled"]) > 0
        return on and self.options["warm_start"] and self.small_tried != self.structure_version

    def end_lap(self, model, state, elbo) -> tuple[int, float]:
        accepted = 0
        touched: set = set()
        if self._pairs and not self._stale and len(self._pair_stats) == len(state.memos):
            n, elbo = self._evaluate_merges(model, state, elbo, touched)
            accepted += n
        if self._deletes:
            n, elbo = self._evaluate_deletes(model, state, elbo, touched)
            accepted += n
        if self._birth_target is not None and self._birth_target not in touched:
            n, elbo = (self._evaluate_swap if "swap" in self.kinds else self._evaluate_birth)(model, state, elbo)
            accepted += n
        small = 0
        if self._settled_round and not accepted:
            self.small_tried = self.structure_version
            accepted, elbo = self._evaluate_settled_deletes(model, state, elbo)
            if not accepted and self.options["delete_small"]:
                small, elbo = self._evaluate_small(model, state, elbo)
        if accepted:
            self.structure_version += 1
            self.merge_failed = set()  # a failed pair is tried again after any accepted move
        accepted += small  # (the topics are the same ones: nothing is retried for it)
        exact = self._exact  # (before the reset below clears it)
        self._reset_lap()
        self._last_stats = state.stats if (exact and model.alloc.nested and not state.frozen) else None
        return accepted, elbo

    def get_state(self) -> dict:
        return {
            "structure_version": int(self.structure_version),
            "delete_failed": {str(k): [int(v), float(n)] for k, (v, n) in self.delete_failed.items()},
            "birth_failed": {str(k): int(v) for k, v in self.birth_failed.items()},
            "small_tried": int(self.small_tried),
            "settled": bool(self.settled),
            "merge_failed": [[int(a), int(b)] for a, b in sorted(self.merge_failed)],
            "merge_plan_version": -1 if self.merge_plan is None else int(self.merge_plan[0]),
            "merge_plan": [] if self.merge_plan is None else [[int(a), int(b)] for a, b in self.merge_plan[1]],
        }

    def set_state(self, state) -> None:
        if not state:
            return
        self.structure_version = int(state.get("structure_version", 0))
        # (a state saved before the size was kept: a failure counts until the next accepted move)
        self.delete_failed = {int(k): (int(v[0]), float(v[1])) if isinstance(v, (list, tuple)) else (int(v), float("nan"))
                              for k, v in (state.get("delete_failed") or {}).items()}
        self.birth_failed = {int(k): int(v) for k, v in (state.get("birth_failed") or {}).items()}
        self.small_tried = int(state.get("small_tried", -1))
        self.settled = bool(state.get("settled", False))
        self.merge_failed = {(int(a), int(b)) for a, b in (state.get("merge_failed") or [])}
        version = int(state.get("merge_plan_version", -1))
        self.merge_plan = None if version < 0 else (version, [(int(a), int(b)) for a, b in (state.get("merge_plan") or [])])

    # ---------------------------------------------------------------- helpers
    def _log(self, state, kind, uids, before, after, accepted, **extra):
        rec = {
            "lap": int(self._lap),
            "kind": kind,
            "uids": [int(u) for u in uids],
            "elbo_before": float(before),
            "elbo_after": float(after),
            "elbo_gain": float(after - before),
            "accepted": bool(accepted),
        }
        rec.update(extra)
        state.moves_log.append(rec)

    def _accepts(self, before, after) -> bool:
        return accepts(before, after, float(self.options["accept_rtol"]))

    # ------------------------------------------------------------------ merge
    def _planned_merges(self, model, G) -> list:
        """This lap's merge pairs: the pairs ranked (:meth:`_plan_merges`) at the first lap of
        the current structure version that planned merges, without those rejected since
        (module docstring)."""
        if self.merge_plan is None or self.merge_plan[0] != self.structure_version:
            self.merge_plan = (self.structure_version, self._plan_merges(model, G))
        present = set(G.uids.tolist())
        return [(a, b) for a, b in self.merge_plan[1] if _pair_key(a, b) not in self.merge_failed and a in present and b in present]

    def _plan_merges(self, model, G) -> list:
        """Up to ``max_per_lap["merge"]`` pairs ranked by the exact change of the data term
        (at most ``merge_max_per_topic`` pairs per topic); beyond ``merge_max_scored_pairs``
        pairs only neighbour pairs (:func:`bnpcore.moves.merge.neighbour_pairs`) are ranked."""
        K = G.K
        cap = self._cap("merge")
        if K < 2 or cap < 1:
            return []
        core = model.obs.core
        N, S = np.ascontiguousarray(G.N), np.ascontiguousarray(G.S)
        single = core.elbo_data_per_cluster(N, S)
        if int(self.options["merge_max_scored_pairs"]) < K * (K - 1) // 2:
            # many topics: score only neighbour pairs (similar word frequencies), so the cost of
            # planning grows as K m V instead of K² V / 2 (the mixtures' rule)
            ia, ib = neighbour_pairs(G, np.ones(K, dtype=bool), int(self.options["merge_neighbours"]))
        else:
            ia, ib = np.triu_indices(K, 1)
        gain = _merged_data_terms(core, N, S, ia, ib) - single[ia] - single[ib]
        order = np.argsort(-gain, kind="stable")
        per_topic = np.zeros(K, dtype=np.int64)
        limit = int(self.options["merge_max_per_topic"])
        pairs = []
        for m in order:
            a, b = int(ia[m]), int(ib[m])
            if per_topic[a] >= limit or per_topic[b] >= limit:
                continue
            pairs.append((int(G.uids[a]), int(G.uids[b])))
            per_topic[a] += 1
            per_topic[b] += 1
            if len(pairs) >= cap:
                break
        return pairs

    @staticmethod
    def _merge_stats(s, a: int, b: int, H, P, Q):
        return s.merge(a, b, H=float(H), P=float(P), Q=float(Q), P_rem=s["P_rem"], Q0=s["Q0"], Q_rem=s["Q_rem"])

    def _evaluate_merges(self, model, state, elbo, touched) -> tuple[int, float]:
        """Each planned pair's merged summaries, accepted iff the exact objective rises.

        Merging is linear in the batch summaries, so a candidate's whole-dataset summaries are
        the current ones with the pair merged and its merged entropy, ``P`` and ``Q`` summed
        over the batches; the batch memos are transformed only when the candidate passes. The
        data term of a merge changes in two topics only: with the per-topic terms of the
        current summaries, the candidate's objective costs one V-sized term instead of K
        (:func:`_screened_objective`). A candidate that falls short of the current objective by
        more than any round-off could explain is rejected on that value; the others are
        decided on the exact objective of their summaries, and an accepted merge is confirmed
        on the exact objective of its transformed memos' sum (the state the fit keeps)."""
        accepted = 0
        core = model.obs.core
        per_topic = data_total = merged_terms = None
        # per pair, the merged H, P, Q summed over the batches in batch order
        totals = [np.sum([np.asarray(self._pair_stats[i][f]) for i in range(len(state.memos))], axis=0) for f in range(3)]
        for m, (ua, ub) in enumerate(self._pairs):
            if ua in touched or ub in touched:
                continue
            G = state.stats
            a, b = (int(p) for p in G.positions([ua, ub]))
            cand = self._merge_stats(G, a, b, *(t[m] for t in totals))
            if per_topic is None:
                # the current summaries' per-topic terms, and the pooled terms of every pair
                # still to evaluate in one call (until a merge changes the summaries)
                N, S = np.ascontiguousarray(G.N), np.ascontiguousarray(G.S)
                per_topic = core.elbo_data_per_cluster(N, S)
                data_total = float(core.elbo_data(N, S))
                rest = [(mm, G.positions([pa, pb])) for mm, (pa, pb) in enumerate(self._pairs) if mm >= m and pa not in touched and pb not in touched]
                pos = np.array([p for _, p in rest], dtype=np.int64).reshape(-1, 2)
                merged_terms = dict(zip((mm for mm, _ in rest), _merged_data_terms(core, N, S, pos[:, 0], pos[:, 1])))
            merged = float(merged_terms[m])
            new = _screened_objective(model, cand, data_total - per_topic[a] - per_topic[b] + merged)
            memos = None
            if not np.isfinite(new) or new - elbo >= -_SCREEN_MARGIN * (1.0 + abs(elbo)):
                new = model.elbo(cand)  # close to (or above) the current objective: the exact value decides
                if self._accepts(elbo, new):
                    memos = [memo_map(self._merge_stats, s, a, b, *(v[m] for v in self._pair_stats[i])) for i, s in enumerate(state.memos)]
                    new = model.elbo(materialize(sum_memos(memos)))
            ok = self._accepts(elbo, new)
            self._log(state, "merge", [ua, ub], elbo, new, ok)
            if not ok:
                self.merge_failed.add(_pair_key(ua, ub))
            if ok:
                elbo = adopt_memos(model, state, memos)
                touched.update((ua, ub))
                accepted += 1
                per_topic = None  # the per-topic terms of the new summaries
                self._merged_into[ub] = ua
        return accepted, elbo

    # ----------------------------------------------------------------- delete
    def _evaluate_deletes(self, model, state, elbo, touched) -> tuple[int, float]:
        if self._source is None:
            return 0, elbo
        return self._delete_smallest(model, state, elbo, touched, self._cap("delete"), settled=False)

    def _evaluate_settled_deletes(self, model, state, elbo) -> tuple[int, float]:
        """At the settled lap (as the small allocations), propose deleting again the
        ``delete_settled`` smallest topics an ordinary delete may try (size and usage limits;
        failures and retries aside), each candidate with the documents that used the topic
        restarted from the prior (``cold_mask``) instead of from their counts without it; the
        first accepted one ends the round (module docstring)."""
        return self._delete_smallest(model, state, elbo, set(), int(self.options["delete_settled"]), settled=True)

    def _delete_smallest(self, model, state, elbo, touched, cap: int, *, settled: bool) -> tuple[int, float]:
        """Up to ``cap`` delete candidates, smallest topic first, among the topics under the
        size limit and used by at most ``delete_max_usage`` of the documents. Ordinary deletes
        (``settled=False``) skip the topics whose rejection still holds (:meth:`_delete_retry`),
        record each rejection and go on after an acceptance; settled ones (``settled=True``)
        restart the target's documents cold and end at the first acceptance."""
        accepted = tried = 0
        if cap < 1 or state.stats.K < 2:
            return 0, elbo
        G = state.stats
        max_size = float(self.options["delete_max_size"]) * float(G.N.sum())
        usage = self._usage_shares(len(state.memos))
        max_usage = float(self.options["delete_max_usage"])
        for uid in [int(u) for u in G.uids[np.argsort(G.N, kind="stable")]]:
            if tried >= cap or state.stats.K < 2:
                break
            G = state.stats
            if uid in touched or uid not in set(G.uids.tolist()):
                continue
            j = int(G.positions([uid])[0])
            if G.N[j] > max_size:
                break
            if not settled and not self._delete_retry(uid, float(G.N[j])):
                continue
            share = usage.get(uid, 0.0) if usage is not None else None
            if share is not None and share > max_usage:
                continue  # used by many documents: not a junk topic (module docstring)
            tried += 1
            memos, cand = self._delete_candidate(model, state, j, cold=settled)
            new = model.elbo(cand)
            ok = self._accepts(elbo, new)
            extra = {"settled": True} if settled else ({} if share is None else {"doc_share": float(share)})
            self._log(state, "delete", [uid], elbo, new, ok, **extra)
            if ok:
                elbo = adopt_memos(model, state, memos)
                touched.add(uid)
                accepted += 1
                self.delete_failed.pop(uid, None)
                if settled:
                    break  # the lap's usage shares describe the old topics
            elif not settled:
                self.delete_failed[uid] = (self.structure_version, float(G.N[j]))
        return accepted, elbo

    def _delete_retry(self, uid: int, n: float) -> bool:
        """Whether topic ``uid`` (now holding ``n`` tokens) may be a delete candidate: it never
        failed, or it failed at another structure version, or its size changed by more than
        ``delete_retry_change`` of its size at the failure (the mixtures' rule). A junk topic
        that outlives its first delete usually shrinks lap after lap while the topics around it
        take its tokens; on the bars from K = 10 two such topics failed at laps 4-5 holding
        2,800 and 1,800 tokens and ended the fit with 200 and 300, deletable then (+190 and
        +280 nats) but never tried again."""
        failed = self.delete_failed.get(uid)
        if failed is None or failed[0] != self.structure_version:
            return True
        return size_changed(n, failed[1], float(self.options["delete_retry_change"]))

    def _usage_shares(self, n_batches: int):
        """Per topic (uid) of the lap, the share of the documents using it (``doc_usage`` summed
        over the batches, divided by their documents); None unless every batch reported its
        counts this lap. Topics merged or born after the lap's steps are not in it (a merged
        topic is not a delete candidate in the lap of its merge)."""
        if len(self._usage) != n_batches:
            return None
        used: dict = {}
        docs = 0.0
        for counts, uids, n in self._usage.values():
            docs += n
            for u, c in zip(uids.tolist(), counts.tolist()):
                used[u] = used.get(u, 0.0) + c
        return {u: c / max(docs, 1.0) for u, c in used.items()}

    def _delete_candidate(self, model, state, j: int, *, cold: bool = False) -> tuple:
        """Batch summaries after ``delete_passes`` document-step passes with topic ``j``
        removed (the first pass uses the current summaries without ``j`` as globals), and
        their sum. ``cold``: the documents that used ``j`` start from the prior, not from
        their counts without it."""
        saved_top_l = model.top_l
        uid = int(state.stats.uids[j])
        glob = state.stats.drop([j])
        inits = self._warm_inits(glob.uids, len(state.memos))
        self._restart_where_used(inits, uid)
        if cold:
            for init in inits or ():
                if "restart_mask" in init:
                    init["cold_mask"] = init["restart_mask"]
        memos, total = whole_dataset_passes(model, self._source, self._executor, glob, int(self.options["delete_passes"]),
                                        n_threads=self.n_threads, inits=inits)
        model.top_l = saved_top_l
        return memos, total

    def _evaluate_small(self, model, state, elbo) -> tuple[int, float]:
        """Propose deleting every document's small allocations at once: each document starts
        from the lap's topic counts with those below ``delete_small_below`` of its tokens set
        to zero, ``delete_small_passes`` document-step passes follow (the first from the
        current globals, each next one from the summaries of the last), and the candidate is
        accepted iff the objective of the last pass's summaries is higher (module docstring)."""
        G = state.stats
        below = float(self.options["delete_small_below"])
        dropped = 0

        def drop_small(b, cols):
            nonlocal dropped
            small = cols < below * cols.sum(axis=1, keepdims=True)
            dropped += int(np.count_nonzero(small & (cols > 0)))
            return np.where(small, 0.0, cols)

        inits = self._warm_inits(G.uids, len(state.memos), extra=drop_small)
        if inits is None or dropped == 0:
            return 0, elbo
        memos, total = whole_dataset_passes(model, self._source, self._executor, G, int(self.options["delete_small_passes"]),
                                            n_threads=self.n_threads, inits=inits)
        new = model.elbo(total)
        ok = self._accepts(elbo, new)
        self._log(state, "delete", [], elbo, new, ok, small_allocations=dropped)
        if not ok:
            return 0, elbo
        return 1, adopt_memos(model, state, memos)

    def _restart_where_used(self, inits, uid: int) -> None:
        """Limit the restart proposals of a candidate's warm-started document step to the
        documents that used its target ``uid`` in the lap (``restart_mask`` per batch): the
        others start from the lap's solution, whose restarts the lap has just tried."""
        for b, init in enumerate(inits or ()):
            dt, lap_uids = self._doc_topic[b]
            col = np.flatnonzero(lap_uids == uid)
            if col.size == 1:
                init["restart_mask"] = np.ascontiguousarray(dt[:, int(col[0])] > _USED)

    def _warm_inits(self, uids, n_batches: int, extra=None):
        """Per batch, the warm start of a candidate's document step with topics ``uids``: the
        lap's document-topic counts of each topic (a topic merged this lap gathers the
        columns merged into it; a topic the lap did not have starts at zero), or
        ``extra(b, columns)`` adjusting them (a birth's new topics). None where the lap kept
        no counts (candidates start cold)."""
        if not self._warm or len(self._doc_topic) != n_batches:
            return None
        out = []
        where = {int(u): i for i, u in enumerate(uids)}
        for b in range(n_batches):
            dt, lap_uids = self._doc_topic[b]
            cols = np.zeros((dt.shape[0], len(uids)))
            for c, u in enumerate(lap_uids.tolist()):
                while u not in where and u in self._merged_into:
                    u = self._merged_into[u]
                if u in where:
                    cols[:, where[u]] += dt[:, c]
            if extra is not None:
                cols = extra(b, cols)
            out.append({"init_doc_topic": np.ascontiguousarray(cols)})
        return out

    #: the batch source of the fit and the executor of its local steps (set by the estimator;
    #: delete and birth candidates pass over every batch)
    _source = None
    _executor = None

    # ------------------------------------------------------------------ birth
    def _plan_birth(self, G):
        """The largest topic that has not failed a birth since the last accepted move."""
        for pos in np.argsort(-G.N, kind="stable"):
            uid = int(G.uids[pos])
            if self.birth_failed.get(uid) != self.structure_version and G.N[pos] >= 2 * float(self.options["birth_n_new"]):
                return uid
        return None

    def _collect_birth(self, model, glob, X, doc_topic) -> None:
        r"""Target histograms of this batch: for every document using the target topic
        :math:`t` (:math:`N_{dt}` above ``birth_min_count``), its word counts weighted by the
        plug-in responsibility :math:`\hat\pi_{dt}\hat\phi_{tv}/\sum_k\hat\pi_{dk}\hat\phi_{kv}`."""
        budget = int(self.options["birth_max_docs"]) - self._birth_docs
        if budget <= 0:
            return
        t = int(glob.positions([self._birth_target])[0])
        docs = np.flatnonzero(doc_topic[:, t] > float(self.options["birth_min_count"]))[:budget]
        if docs.size == 0:
            return
        a, _ = model.alloc.doc_prior(glob)
        theta = doc_topic[docs] + a[None, :]
        pi = theta / theta.sum(axis=1, keepdims=True)
        lam = model.lam(glob)
        phi_t = np.ascontiguousarray((lam / lam.sum(axis=1, keepdims=True)).T)  # (V, K)
        lo, hi = np.asarray(X.indptr[docs], dtype=np.int64), np.asarray(X.indptr[docs + 1], dtype=np.int64)
        lengths = hi - lo
        # the documents' entries, in their order: entry e of document i is X's entry lo[i] + e
        at = np.repeat(lo - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(int(lengths.sum()))
        w = np.asarray(X.indices[at], dtype=np.int64)
        row = np.repeat(np.arange(docs.size), lengths)
        den = np.empty(w.size)
        step = max(1, (1 << 20) // pi.shape[1])  # entries per block: a block's gather stays ~8 MB
        for s in range(0, w.size, step):
            e = slice(s, s + step)
            den[e] = np.einsum("ek,ek->e", pi[row[e]], phi_t[w[e]])
        num = pi[row, t] * phi_t[w, t]
        self._birth_hist.append((lengths, w, np.asarray(X.data[at], dtype=np.float64) * num / np.maximum(den, 1e-300)))
        self._birth_docs += docs.size

    def _cluster_histograms(self, V: int, J: int, rng) -> np.ndarray:
        """Bregman (KL) k-means of the collected target histograms into ``J`` clusters
        (k-means++ seeding, ``birth_kmeans_iters`` Lloyd iterations); returns the cluster sums
        (J, V)."""
        from bnpcore.topic import _kmeanspp_docs

        H = self._birth_matrix(V)
        n = H.shape[0]
        J = min(J, n)
        seeds = _kmeanspp_docs(H, J, 0.1, rng)
        from bnpcore.topic import csr_rows_dense

        centers = csr_rows_dense(H, seeds)
        labels = None
        for _ in range(int(self.options["birth_kmeans_iters"])):
            mu = centers + 0.1
            log_mu = np.log(mu / mu.sum(axis=1, keepdims=True))
            new = np.argmax(np.asarray(H @ log_mu.T), axis=1)
            if labels is not None and np.array_equal(new, labels):
                break
            labels = new
            # the cluster sums as one product of the histograms with the one-hot labels (n × J,
            # dense): each cluster adds its histograms in row order, as a per-cluster row
            # selection and column sum would, without J sparse selections per iteration
            onehot = np.zeros((n, J))
            onehot[np.arange(n), labels] = 1.0
            centers = np.ascontiguousarray((H.T @ onehot).T)
        return centers[centers.sum(axis=1) > 0]

    def _try_birth(self, model, state, G, t, sums, drop=None):
        """One birth candidate: topic ``t`` keeps ``birth_keep_fraction`` of its mass, new
        topics get the rest in proportion to ``sums`` (J, V); ``birth_passes`` document-step
        passes over every batch. With ``drop`` (LDA's swap), topics ``t`` and ``drop`` leave
        and the new topics take all of ``t``'s mass and each document's count of it (its count
        of ``drop`` is dropped). Returns ``(objective, memos, new_uids)``."""
        keep = float(self.options["birth_keep_fraction"]) if drop is None else 0.0
        scale = (1.0 - keep) * G.N[t] / sums.sum()
        S_new = sums * scale
        J = S_new.shape[0]
        new_uids = np.arange(state.next_uid, state.next_uid + J, dtype=np.int64)
        if drop is None:
            glob = G.copy()
            glob.S = np.concatenate([G.S[:t], keep * G.S[t : t + 1], G.S[t + 1 :]])
            glob.N = glob.S.sum(axis=1)
        else:
            glob = G.drop([t, drop])
        extra = {"P": np.full(J, G["P"][t]), "Q": np.full(J, G["Q"][t])}
        glob = glob.append(N=S_new.sum(axis=1), S=S_new, H=np.zeros(J), uids=new_uids, **extra)
        share = S_new.sum(axis=1) / S_new.sum()
        uid_t = int(G.uids[t])

        def split(b, cols):
            if drop is None:
                # the target (position t here too: the new topics are appended) keeps `keep` of
                # each document's count, the new topics share the rest
                moved = (1.0 - keep) * cols[:, t]
                cols[:, t] -= moved
            else:
                # the target has left the topics: the new ones share its lap counts
                dt, lap_uids = self._doc_topic[b]
                col = np.flatnonzero(lap_uids == uid_t)
                if col.size != 1:
                    return cols
                moved = dt[:, int(col[0])]
            cols[:, -J:] = moved[:, None] * share[None, :]
            return cols

        inits = self._warm_inits(glob.uids, len(state.memos), extra=split)
        memos, glob = whole_dataset_passes(model, self._source, self._executor, glob, int(self.options["birth_passes"]), n_threads=self.n_threads,
                                           inits=inits)
        new = model.elbo(glob)
        return new, memos, new_uids

    def _refine_birth_topics(self, sums, prior) -> np.ndarray:
        r"""A second birth candidate from the k-means cluster sums ``sums`` (J, V):
        ``birth_refine_iters`` iterations of variational LDA on the target's histograms (the
        target's share of each collected document), topics :math:`\bar\lambda+S_j`, document
        prior :math:`1/J` per topic, the Rust document step as E-step.

        Hard clusters give sharp topics that put almost no mass on their neighbours' words;
        with a sparse topic prior (``prior_count=0.01``) such candidates lost thousands of nats
        after the birth's pass, and a fit from one topic on Reuters never grew
        (``benches/bench_truncation_free.py``). The LDA iterations give the candidates soft,
        overlapping supports. Returns the refined sums, empty topics removed."""

        H = self._birth_matrix(sums.shape[1])
        J = sums.shape[0]
        a = np.full(J, 1.0 / J)
        S = np.asarray(sums, dtype=np.float64)
        for _ in range(int(self.options["birth_refine_iters"])):
            table = _core.topic_word_table(np.ascontiguousarray(prior[None, :] + S), prior=np.ascontiguousarray(prior, dtype=np.float64), n_threads=self.n_threads)
            out = _core.doc_topic_step(H.indptr, H.indices, H.data, table, a, max_iter=20, restarts=False, n_threads=self.n_threads)
            S = np.asarray(out["S"])
        return S[S.sum(axis=1) > 0]

    def _birth_matrix(self, V: int):
        """The collected target histograms as a CSR matrix (documents × V), in collection order."""
        from bnpcore._validation import make_csr

        lengths = np.concatenate([n for n, _, _ in self._birth_hist])
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return make_csr(np.concatenate([c for _, _, c in self._birth_hist]), np.concatenate([w for _, w, _ in self._birth_hist]), indptr, (lengths.size, V))

    def _evaluate_birth(self, model, state, elbo) -> tuple[int, float]:
        """Split the target into new topics built from the clusters of its histograms, rerun
        the document step on every batch with the enlarged set (``birth_passes`` passes) and
        accept iff the objective of the resulting summaries is higher."""
        uid = self._birth_target
        G = state.stats
        if uid not in set(G.uids.tolist()) or self._birth_docs < 2:
            return 0, elbo
        t = int(G.positions([uid])[0])
        sums = self._cluster_histograms(G.S.shape[1], int(self.options["birth_n_new"]), state.rng_moves)
        if sums.shape[0] < 2:
            self.birth_failed[uid] = self.structure_version
            return 0, elbo
        new, memos, new_uids = self._try_birth(model, state, G, t, sums)
        ok = self._accepts(elbo, new)
        self._log(state, "birth", [uid], elbo, new, ok, new_uids=[int(u) for u in new_uids] if ok else [])
        share = G.N[t] / max(float(G.N.sum()), 1e-300)
        if not ok and int(self.options["birth_refine_iters"]) > 0 and share >= float(self.options["birth_refine_min_share"]):
            refined = self._refine_birth_topics(sums, model.prior_lam)
            if refined.shape[0] >= 2:
                new, memos, new_uids = self._try_birth(model, state, G, t, refined)
                ok = self._accepts(elbo, new)
                self._log(state, "birth", [uid], elbo, new, ok, refined=True, new_uids=[int(u) for u in new_uids] if ok else [])
        if not ok:
            self.birth_failed[uid] = self.structure_version
            return 0, elbo
        return 1, adopt_memos(model, state, memos, len(new_uids))

    # ------------------------------------------------------------------ swap (LDA)
    def _evaluate_swap(self, model, state, elbo) -> tuple[int, float]:
        """LDA's fixed-K move (module docstring): the birth target (the largest topic not tried
        at this structure) and the smallest other topic are replaced by two topics, the Bregman
        2-means clusters of the target's histograms; the document step reruns on every batch
        (``birth_passes`` passes) and the candidate is accepted iff the objective is higher."""
        uid = self._birth_target
        G = state.stats
        if uid not in set(G.uids.tolist()) or self._birth_docs < 2 or G.K < 2:
            return 0, elbo
        t = int(G.positions([uid])[0])
        w = next(int(p) for p in np.argsort(G.N, kind="stable") if int(p) != t)
        sums = self._cluster_histograms(G.S.shape[1], 2, state.rng_moves)
        if sums.shape[0] < 2:
            self.birth_failed[uid] = self.structure_version
            return 0, elbo
        new, memos, new_uids = self._try_birth(model, state, G, t, sums, drop=w)
        ok = self._accepts(elbo, new)
        self._log(state, "swap", [uid, int(G.uids[w])], elbo, new, ok, new_uids=[int(u) for u in new_uids] if ok else [])
        if not ok:
            self.birth_failed[uid] = self.structure_version
            return 0, elbo
        return 1, adopt_memos(model, state, memos, len(new_uids))
