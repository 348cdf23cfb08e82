"""Topic moves: the merged summaries built from the document step's pair statistics are the
exact summaries of explicitly merged local parameters (Hughes thesis §5.5.1), and the accepted
moves of a fit raise the objective to the value reported after them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import hellinger
from bnpcore import ConvergenceWarning, HDPTopicModel
from bnpcore._reference import topic as ref
from bnpcore.datasets import make_bars
from bnpcore.moves.topic import TopicMoveManager
from bnpcore.obs import ObsModel
from bnpcore.topic import HDPTopicAlloc, TopicModel
from scipy.special import digamma, gammaln


def _merged_summaries(indptr, indices, data, local, a_rem, i, j):
    """Summaries of explicitly merged local parameters: r' = r with column j added into i and
    removed, theta' likewise (theta_rem unchanged)."""
    H = P = Q = 0.0
    for d, (r, theta) in enumerate(local):
        c = data[indptr[d] : indptr[d + 1]]
        rt = r[:, i] + r[:, j]
        with np.errstate(divide="ignore", invalid="ignore"):
            H -= float(c @ np.where(rt > 0, rt * np.log(np.where(rt > 0, rt, 1.0)), 0.0))
        tt = theta[i] + theta[j]
        tot = theta.sum() + a_rem
        ell = digamma(tt) - digamma(tot)
        N = c @ r if c.size else np.zeros(theta.size)
        P += ell
        Q += gammaln(tt) + (N[i] + N[j] - tt) * ell
    return H, P, Q


def test_merge_statistics_equal_explicit_merge():
    X, _ = make_bars(n_docs=40, n_tokens=50, random_state=2)
    V, K = X.shape[1], 5
    rng = np.random.default_rng(1)
    alloc = HDPTopicAlloc(0.5, 5.0)
    model = TopicModel(alloc, ObsModel("mult", {"lam": np.full(V, 0.1)}))
    S0 = rng.gamma(1.0, 2.0, (K, V))
    glob = model.stats_from_output(
        {"n_docs": 40, "N": S0.sum(1), "S": S0, "H": np.zeros(K), "P": -rng.random(K) * 20, "P_rem": -30.0, "Q0": 0.0, "Q": np.zeros(K), "Q_rem": 0.0},
        np.arange(K),
    )
    pairs = [(0, 3), (1, 2)]
    out = model.local_step(X, glob, merge_pairs=pairs)
    stats = model.stats_from_output(out, np.arange(K))
    table = np.ascontiguousarray(ref.topic_word_table(model.lam(glob)))
    a, a_rem = alloc.doc_prior(glob)
    r_out = ref.doc_topic_step(X.indptr, X.indices, X.data, table, a, alpha_beta_rem=a_rem, return_local=True)
    for m, (i, j) in enumerate(pairs):
        merged = TopicMoveManager._merge_stats(stats, i, j, out["merge_H"][m], out["merge_P"][m], out["merge_Q"][m])
        H, P, Q = _merged_summaries(X.indptr, X.indices, X.data, r_out["local"], a_rem, i, j)
        assert merged.K == K - 1
        assert merged.H[i] == pytest.approx(H, rel=1e-9)
        assert merged["P"][i] == pytest.approx(P, rel=1e-9)
        assert merged["Q"][i] == pytest.approx(Q, rel=1e-9)
        np.testing.assert_allclose(merged.N[i], stats.N[i] + stats.N[j])
        assert merged["Q0"] == stats["Q0"] and merged["P_rem"] == stats["P_rem"]
        # the merged objective equals the raw-data objective of the explicitly merged state
        local = []
        for r, theta in r_out["local"]:
            r2 = np.delete(r.copy(), j, axis=1)
            r2[:, i] = r[:, i] + r[:, j]
            t2 = np.delete(theta.copy(), j)
            t2[i] = theta[i] + theta[j]
            local.append((r2, t2))
        rho, omega = alloc.sticks(merged)
        raw = ref.elbo_raw(X.indptr, X.indices, X.data, local, model.lam(merged), 0.1, rho, omega, 0.5, 5.0, theta_rem=a_rem)
        assert model.elbo(merged) == pytest.approx(raw["total"], rel=1e-9)


def test_accepted_moves_raise_the_objective():
    X, _ = make_bars(n_docs=150, n_tokens=80, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = HDPTopicModel(15, n_batches=3, max_laps=6, random_state=0).fit(X)
    acc = [r for r in m.moves_log_ if r["accepted"]]
    assert {"merge", "delete"} <= {r["kind"] for r in m.moves_log_}
    assert acc and all(r["elbo_after"] > r["elbo_before"] for r in acc)
    for r in m.moves_log_:
        assert set(r) >= {"lap", "kind", "uids", "elbo_before", "elbo_after", "elbo_gain", "accepted"}
    e = m.history_["elbo"]
    assert np.all(np.diff(e) >= -1e-9 * np.abs(e[1:]))


def _shared_vocabulary_corpus(seed, D=300, V=500, K=8, L=100):
    """Topics that share half their mass (a Zipf background) and differ in 30 words each: with
    a sparse topic prior the k-means birth candidate of a one-topic model is rejected."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, V + 1)
    zipf /= zipf.sum()
    topics = []
    for _ in range(K):
        spec = np.zeros(V)
        spec[rng.choice(V, 30, replace=False)] = rng.dirichlet(np.ones(30))
        topics.append(0.5 * zipf + 0.5 * spec)
    topics = np.array(topics)
    X = np.stack([rng.multinomial(L, rng.dirichlet(np.full(K, 0.2)) @ topics) for _ in range(D)]).astype(np.float64)
    return sp.csr_array(X)


def test_refined_birth_candidate_grows_a_stuck_model():
    """With prior_count=0.01 the first (k-means) birth candidate of a one-topic model loses
    objective and, before the refined second candidate existed, the fit stayed at one topic;
    the refined candidate is accepted, raises the objective, and the model grows."""
    import warnings

    from bnpcore import HDPTopicModel
    from bnpcore.exceptions import ConvergenceWarning

    X = _shared_vocabulary_corpus(0)
    kw = dict(random_state=0, max_laps=15, alpha=1.0, gamma=1.0, prior_count=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        stuck = HDPTopicModel(move_options={"birth_refine_iters": 0}, **kw).fit(X)
        grown = HDPTopicModel(**kw).fit(X)
    assert stuck.n_components_ == 1
    assert grown.n_components_ >= 5 and grown.elbo_ > stuck.elbo_ + 1000
    births = [r for r in grown.moves_log_ if r["kind"] == "birth"]
    first_refined = next(r for r in births if r.get("refined"))
    assert first_refined["accepted"] and first_refined["elbo_gain"] > 0
    # the refined candidate is tried only after the first one of the same target failed
    i = births.index(first_refined)
    assert i > 0 and not births[i - 1]["accepted"] and births[i - 1]["uids"] == first_refined["uids"]
    assert np.all(np.diff(grown.history_["elbo"][1:]) >= -1e-8 * np.abs(grown.history_["elbo"][1:-1]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_birth_histograms_equal_per_document_reference(seed):
    """The target histograms collected for a birth (one vectorised pass over a batch's
    documents, in blocks) equal the per-document definition: for each document with
    ``N_dt > birth_min_count``, its counts times ``pi_dt phi_tv / sum_k pi_dk phi_kv``; the
    document budget ``birth_max_docs`` cuts the list across batches."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    D, V, K = 60, 40, 7
    X = sp.random(D, V, density=0.3, random_state=seed, format="csr", data_rvs=lambda n: rng.integers(1, 5, n).astype(float))
    X.sort_indices()
    X = X[rng.permutation(D)]
    alloc = HDPTopicAlloc(0.5, 5.0)
    model = TopicModel(alloc, ObsModel("mult", {"lam": np.full(V, 0.1)}))
    S0 = rng.gamma(1.0, 2.0, (K, V))
    glob = model.stats_from_output(
        {"n_docs": D, "N": S0.sum(1), "S": S0, "H": np.zeros(K), "P": -rng.random(K) * 20, "P_rem": -30.0, "Q0": 0.0, "Q": np.zeros(K), "Q_rem": 0.0},
        np.arange(10, 10 + K),
    )
    doc_topic = rng.gamma(0.5, 3.0, (D, K)) * (rng.random((D, K)) < 0.6)
    t_uid, t = 12, 2
    budget = int((doc_topic[:, t] > 1.0).sum()) - 2  # the budget ends the list inside a batch
    assert budget >= 4
    mgr = TopicMoveManager.__new__(TopicMoveManager)
    mgr.options = {**TopicMoveManager.DEFAULT_OPTIONS, "birth_max_docs": budget}
    mgr._reset_lap()
    mgr._birth_target = t_uid
    half = D // 2
    mgr._collect_birth(model, glob, X[:half], doc_topic[:half])
    mgr._collect_birth(model, glob, X[half:], doc_topic[half:])
    H = mgr._birth_matrix(V)

    a, _ = alloc.doc_prior(glob)
    lam = model.lam(glob)
    phi = lam / lam.sum(axis=1, keepdims=True)
    rows = []
    for d in np.flatnonzero(doc_topic[:, t] > 1.0)[:budget]:
        pi = (doc_topic[d] + a) / (doc_topic[d] + a).sum()
        lo, hi = X.indptr[d], X.indptr[d + 1]
        w = X.indices[lo:hi]
        rows.append((w, X.data[lo:hi] * pi[t] * phi[t, w] / (pi @ phi[:, w])))
    assert mgr._birth_docs == len(rows) == H.shape[0]
    for i, (w, c) in enumerate(rows):
        np.testing.assert_array_equal(H.indices[H.indptr[i] : H.indptr[i + 1]], w)
        np.testing.assert_allclose(H.data[H.indptr[i] : H.indptr[i + 1]], c, rtol=1e-13)


def test_warm_starts_of_candidates_follow_the_topics():
    """A candidate's warm start takes each of its topics' columns of the lap's document-topic
    counts: a topic merged away this lap adds its column to the topic it went into, a topic the
    lap did not have starts at zero, and ``extra`` adjusts the result (a birth's split)."""
    mgr = TopicMoveManager.__new__(TopicMoveManager)
    mgr.options = dict(TopicMoveManager.DEFAULT_OPTIONS)
    mgr._reset_lap()
    rng = np.random.default_rng(0)
    lap_uids = np.array([3, 5, 7, 9])
    dts = [rng.gamma(1.0, 2.0, (4, 4)), rng.gamma(1.0, 2.0, (2, 4))]
    mgr._warm = True
    mgr._doc_topic = {b: (dt, lap_uids) for b, dt in enumerate(dts)}
    mgr._merged_into = {5: 3}  # 5 went into 3; 9 is the deleted topic; 11 is new
    inits = mgr._warm_inits(np.array([3, 7, 11]), 2)
    for dt, init in zip(dts, inits):
        np.testing.assert_array_equal(init["init_doc_topic"], np.column_stack([dt[:, 0] + dt[:, 1], dt[:, 2], np.zeros(len(dt))]))
    halved = mgr._warm_inits(np.array([3, 7, 11]), 2, extra=lambda b, cols: cols / 2)
    np.testing.assert_array_equal(halved[1]["init_doc_topic"], inits[1]["init_doc_topic"] / 2)
    assert mgr._warm_inits(np.array([3]), 3) is None  # a batch without counts: every candidate starts cold
    mgr._warm = False
    assert mgr._warm_inits(np.array([3]), 2) is None


def test_delete_and_birth_candidates_start_from_the_lap(monkeypatch):
    """In a default fit every delete and birth candidate's document step is warm-started from
    the lap's counts (one array per batch, the candidate's topics as columns, non-negative): a
    delete's start drops the deleted topic's counts, a birth's splits the target's count with
    its new topics and keeps the documents' totals (but for a topic deleted earlier in the same
    lap). With ``warm_start=False`` they start cold."""
    from bnpcore.moves import topic as mt

    seen, kind = [], []
    orig = mt.whole_dataset_passes

    def spy(model, source, executor, glob, n_passes, *, n_threads=None, inits=None):
        seen.append((kind[-1], glob.K, inits))
        return orig(model, source, executor, glob, n_passes, n_threads=n_threads, inits=inits)

    def tagged(name, fn):
        def run(*args, **kwargs):
            kind.append(name)
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(mt, "whole_dataset_passes", spy)
    monkeypatch.setattr(TopicMoveManager, "_try_birth", tagged("birth", TopicMoveManager._try_birth))
    monkeypatch.setattr(TopicMoveManager, "_delete_candidate", tagged("delete", TopicMoveManager._delete_candidate))
    X, _ = make_bars(n_docs=150, n_tokens=80, random_state=0)
    kw = dict(n_components=1, n_batches=3, max_laps=6, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = HDPTopicModel(**kw).fit(X)
    kinds = [r["kind"] for r in m.moves_log_ if r["kind"] != "merge"]
    assert {"birth", "delete"} <= set(kinds) and len(seen) >= len(kinds)
    lengths = np.diff(X.indptr)
    totals = np.add.reduceat(X.data, X.indptr[:-1])[lengths > 0]
    assert {k for k, _, _ in seen} == {"birth", "delete"}
    for k, K, inits in seen:
        assert inits is not None and len(inits) == 3
        starts = np.concatenate([i["init_doc_topic"] for i in inits])
        assert starts.shape[1] == K and np.all(starts >= 0) and np.all(np.isfinite(starts))
        docs = starts.sum(axis=1)[lengths > 0]
        assert np.all(docs <= totals * (1 + 1e-9))
        if k == "birth":  # the target's count is split, not lost (a topic deleted earlier in the lap is)
            assert np.mean(np.isclose(docs, totals, rtol=1e-9)) > 0.8
            assert all("restart_mask" not in i for i in inits)
        else:
            assert np.any(docs < totals * (1 - 1e-6))
            # restart proposals only in the documents that used the deleted topic (their start
            # lacks its count, above 0.01); most documents did not
            mask = np.concatenate([i["restart_mask"] for i in inits])
            assert mask.dtype == bool and mask.shape == (starts.shape[0],) and 0 < mask.sum() < 0.5 * mask.size
            assert np.all((totals - docs)[mask[lengths > 0]] > 0.01 * (1 - 1e-9))
    seen.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        HDPTopicModel(move_options={"warm_start": False}, **kw).fit(X)
    assert seen and all(inits is None for _, _, inits in seen)


def test_deletes_skip_topics_that_many_documents_use():
    """A topic used by more than ``delete_max_usage`` of the documents is not a delete
    candidate. On the bars from one topic the births find the ten bars, each used by about a
    sixth of the documents: with the limit off they are tried (a whole-corpus pass each) and
    rejected; with the default only the rarely used topics are tried and the fit is the same. Every logged
    delete carries the share of the documents using its target, which is the lap's
    ``doc_usage`` over its documents."""
    X, _ = make_bars(n_docs=400, random_state=0)
    kw = dict(n_batches=2, max_laps=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        loose = HDPTopicModel(move_options={"delete_max_usage": 1.0}, **kw).fit(X)
        default = HDPTopicModel(**kw).fit(X)
    broad = [r for r in loose.moves_log_ if r["kind"] == "delete" and r["doc_share"] > 0.15]
    assert loose.n_components_ == 10 and len(broad) >= 4 and not any(r["accepted"] for r in broad)
    deletes = [r for r in default.moves_log_ if r["kind"] == "delete"]
    assert deletes and all(0 <= r["doc_share"] <= 0.15 for r in deletes)  # the rarely used ones are still tried
    assert default.n_components_ == 10 and default.elbo_ == pytest.approx(loose.elbo_, rel=1e-12)
    # the share is the lap's document-usage counts over the documents
    mgr = TopicMoveManager.__new__(TopicMoveManager)
    mgr._reset_lap()
    mgr._deletes = True
    mgr._usage = {0: (np.array([3.0, 0.0, 5.0]), np.array([4, 6, 8]), 10.0), 1: (np.array([1.0, 2.0, 5.0]), np.array([4, 6, 8]), 6.0)}
    assert mgr._usage_shares(2) == {4: 0.25, 6: 0.125, 8: 0.625}
    assert mgr._usage_shares(3) is None  # a batch without counts: no screen


def test_kept_counts_stay_under_their_cap(monkeypatch):
    """The lap keeps document-topic counts for warm starts up to ``_WARM_MAX_ENTRIES`` in all;
    a batch visited again replaces its counts (not counted twice); past the cap every count is
    dropped and candidates start cold."""
    import types

    from bnpcore.moves import topic as mt

    monkeypatch.setattr(mt, "_WARM_MAX_ENTRIES", 100)
    mgr = TopicMoveManager(mt.TopicMoveConfig())
    mgr._warm = True
    state = types.SimpleNamespace(stats=types.SimpleNamespace(uids=np.arange(5)))
    for _ in range(3):
        mgr.after_batch(None, state, 0, {"doc_topic": np.ones((12, 5))})
    assert mgr._warm and mgr._doc_topic_entries == 60
    mgr.after_batch(None, state, 1, {"doc_topic": np.ones((8, 5))})  # 100: at the cap
    assert mgr._warm and mgr._warm_inits(np.arange(5), 2) is not None
    mgr.after_batch(None, state, 2, {"doc_topic": np.ones((1, 5))})  # 105: past it
    assert not mgr._warm and mgr._doc_topic == {} and mgr._doc_topic_entries == 0
    assert mgr._warm_inits(np.arange(5), 3) is None


def test_a_rejected_merge_pair_waits_for_the_next_accepted_move(monkeypatch):
    """Merge pairs are ranked once per structure (the moves accepted so far), and a pair
    rejected at some structure is not evaluated again until a move of any kind is accepted: on
    the bars, whose ten topics are found early, the rejected pairs are not re-tracked lap after
    lap."""
    ranked = []
    orig = TopicMoveManager._plan_merges

    def spy(self, model, G):
        ranked.append(self.structure_version)
        return orig(self, model, G)

    monkeypatch.setattr(TopicMoveManager, "_plan_merges", spy)
    X, _ = make_bars(n_docs=400, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = HDPTopicModel(n_batches=2, max_laps=12, tol=0, random_state=0).fit(X)
    assert ranked and len(ranked) == len(set(ranked)) and len(ranked) < m.n_iter_ - 3
    laps_with_accept = sorted({r["lap"] for r in m.moves_log_ if r["accepted"]})
    seen = set()
    merges = [r for r in m.moves_log_ if r["kind"] == "merge"]
    for r in merges:
        version = sum(lap < r["lap"] for lap in laps_with_accept)  # moves are accepted at a lap's end
        key = (tuple(sorted(r["uids"])), version)
        assert key not in seen, f"pair {key[0]} evaluated twice at structure {version}"
        seen.add(key)
    assert merges and m.n_iter_ > laps_with_accept[-1] + 3  # laps enough to re-track a pair


def test_move_state_round_trip():
    """Everything the topic moves carry between laps comes back from ``get_state`` through
    ``set_state``: the structure version, failed delete and birth targets, the merge plan of the
    current structure and its rejected pairs (a state without the merge keys, as older files
    have, starts with neither)."""
    from bnpcore.moves.topic import TopicMoveConfig

    a = TopicMoveManager(TopicMoveConfig())
    a.structure_version = 4
    a.delete_failed, a.birth_failed = {7: (4, 120.5), 9: (2, 3.0)}, {3: 4}
    a.merge_plan = (4, [(5, 2), (3, 8)])
    a.merge_failed = {(2, 5)}
    b = TopicMoveManager(TopicMoveConfig())
    b.set_state(a.get_state())
    for name in ("structure_version", "delete_failed", "birth_failed", "merge_plan", "merge_failed"):
        assert getattr(b, name) == getattr(a, name), name
    assert b.get_state() == a.get_state()
    old = {k: v for k, v in a.get_state().items() if not k.startswith("merge")}
    c = TopicMoveManager(TopicMoveConfig())
    c.set_state(old)
    assert c.merge_plan is None and c.merge_failed == set() and c.structure_version == 4
    # a state saved before deletes kept the target's size: the failure holds until a move is accepted
    c.set_state({"structure_version": 4, "delete_failed": {"7": 4, "9": 2}})
    assert c.delete_failed[9] == (2, pytest.approx(float("nan"), nan_ok=True))
    assert not c._delete_retry(7, 1.0) and c._delete_retry(9, 1.0)


def test_a_rejected_delete_is_retried_when_its_topic_has_shrunk():
    """A topic whose delete was rejected is tried again at the same structure once its size has
    changed by more than ``delete_retry_change`` (default 0.1) of its size at the rejection, as
    the mixtures' deletes are. On the bars from K = 10 (seed 0) a birth leaves two junk topics;
    their deletes are rejected at laps 4-5, when they hold 2,800 and 1,800 tokens, and they
    shrink lap after lap while the bars take their tokens. Without the retry (a change that
    never comes; and without the settled deletes, which remove both in the end) the fit ends
    with both, 12 topics, 200 and 300 tokens each; with it they are deleted once deletable and
    the fit ends with the 10 bars and a higher objective, in fewer laps."""
    from scipy.optimize import linear_sum_assignment

    mgr = TopicMoveManager.__new__(TopicMoveManager)
    mgr.options = {"delete_retry_change": 0.1}
    mgr.structure_version, mgr.delete_failed = 3, {5: (3, 1000.0), 6: (2, 1000.0)}
    assert mgr._delete_retry(4, 10.0)  # never failed
    assert not mgr._delete_retry(5, 1000.0) and not mgr._delete_retry(5, 901.0) and not mgr._delete_retry(5, 1099.0)
    assert mgr._delete_retry(5, 899.0) and mgr._delete_retry(5, 1101.0)
    assert mgr._delete_retry(6, 1000.0)  # failed at another structure

    X, topics = make_bars(n_docs=2000, random_state=0)
    # (without the settled deletes too: they would remove the junk topics at the end; and with
    # plain laps, the path this scenario was found on: over-relaxed laps move the junk topics'
    # tokens at another pace, and without the retry the default fit ends with one of them)
    never = HDPTopicModel(10, move_options={"delete_retry_change": 1e12, "delete_settled": 0}, overrelax=1.0, random_state=0).fit(X)
    m = HDPTopicModel(10, overrelax=1.0, random_state=0).fit(X)
    assert never.n_components_ == 12 and min(never.counts_) < 400  # the two junk topics stay
    assert m.n_components_ == 10 and m.elbo_ > never.elbo_ and m.n_iter_ < never.n_iter_
    H = hellinger(m.topics_, topics)
    rows, cols = linear_sum_assignment(H)
    assert np.all(H[rows, cols] < 0.15)
    deletes = [r for r in m.moves_log_ if r["kind"] == "delete" and r["uids"]]  # (not the small allocations)
    retried = {r["uids"][0] for r in deletes if r["accepted"]} & {r["uids"][0] for r in deletes if not r["accepted"]}
    assert retried  # deleted after an earlier rejection
    for uid in retried:
        tries = [r for r in deletes if r["uids"][0] == uid]
        assert not tries[0]["accepted"] and tries[-1]["accepted"] and tries[-1]["elbo_after"] > tries[-1]["elbo_before"]
    # with the default (over-relaxed) laps, without the retry a junk topic stays too
    never = HDPTopicModel(10, move_options={"delete_retry_change": 1e12, "delete_settled": 0}, random_state=0).fit(X)
    m = HDPTopicModel(10, random_state=0).fit(X)
    assert never.n_components_ > 10 and m.n_components_ == 10 and m.elbo_ > never.elbo_ and m.n_iter_ < never.n_iter_


def test_birth_clusters_ignore_zero_histogram_entries():
    """Target histograms with zero entries (a responsibility that underflowed): the k-means++
    seeding and Lloyd iterations of a birth give the clusters of the same histograms without
    them (0·ln 0 = 0, never the NaN that made the seeding fall back to a uniform choice)."""
    X, _ = make_bars(n_docs=40, n_tokens=50, random_state=7)
    X = X.tocsr()
    V = X.shape[1]
    lengths = np.diff(X.indptr)
    w = np.asarray(X.indices, dtype=np.int64)
    c = np.asarray(X.data, dtype=np.float64) * np.random.default_rng(0).random(X.nnz)
    c[::3] = 0.0
    keep = c > 0
    row = np.repeat(np.arange(lengths.size), lengths)
    clusters = []
    for hist in ([(lengths, w, c)], [(np.bincount(row[keep], minlength=lengths.size), w[keep], c[keep])]):
        mgr = TopicMoveManager.__new__(TopicMoveManager)
        mgr.options = dict(TopicMoveManager.DEFAULT_OPTIONS)
        mgr._reset_lap()
        mgr._birth_hist = hist
        with np.errstate(all="raise"):
            clusters.append(mgr._cluster_histograms(V, 6, np.random.default_rng(3)))
    np.testing.assert_allclose(clusters[0], clusters[1], rtol=1e-12, atol=0)
    assert clusters[0].shape[0] >= 2


def test_deleting_small_allocations_leaves_the_spurious_topics_optimum():
    """From K = 50 on the bars the fit finds the ten bars but keeps a spurious small topic in
    most documents, with topics sharper than the bars. Deleting every document's allocations
    below 5 % of its tokens at once (``delete_small``, proposed once per set of topics after a
    lap that met the convergence test) is accepted on the exact objective, the documents end
    with fewer topics and the topics closer to the bars; without it the fit ends lower. The
    proposal sets to zero only allocations below the fraction, is logged as a delete without
    targets, is made at most once per structure, and the fit stops after a rejected one."""
    X, topics = make_bars(n_docs=1000, random_state=0)
    kw = dict(n_components=50, moves=("merge", "delete"), n_batches=5, random_state=0)
    m = HDPTopicModel(**kw).fit(X)
    off = HDPTopicModel(move_options={"delete_small": False}, **kw).fit(X)
    small = [r for r in m.moves_log_ if "small_allocations" in r]
    assert small and small[0]["accepted"] and small[0]["uids"] == [] and small[0]["kind"] == "delete"
    assert small[0]["elbo_after"] > small[0]["elbo_before"] + 100
    assert not any("small_allocations" in r for r in off.moves_log_)
    assert m.elbo_ > off.elbo_ + 100 and m.n_components_ == off.n_components_ == 10

    def used(model):  # topics per document with more than one token
        dt = model._make_model(model.obs_model_).local_step(X, model.summaries_, return_doc_topic=True)["doc_topic"]
        return float(np.mean(np.sum(np.asarray(dt) > 1.0, axis=1)))

    def worst(model):
        return float(hellinger(model.topics_, topics).min(axis=1).max())

    assert used(m) < used(off) - 0.3 and worst(m) < worst(off)
    # once per structure: the accepted moves before each proposal differ
    laps_with_accept = sorted({r["lap"] for r in m.moves_log_ if r["accepted"] and "small_allocations" not in r})
    versions = [sum(lap < r["lap"] for lap in laps_with_accept) for r in small]
    assert len(versions) == len(set(versions))

    # the start of the candidate: allocations below the fraction set to zero, the others kept
    mgr = TopicMoveManager.__new__(TopicMoveManager)
    mgr.options = dict(TopicMoveManager.DEFAULT_OPTIONS)
    mgr._reset_lap()
    mgr._warm, mgr.n_threads = True, None
    dt = np.array([[90.0, 6.0, 4.0], [0.0, 50.0, 50.0]])
    mgr._doc_topic = {0: (dt, np.array([1, 2, 3]))}
    seen = {}

    def spy(model, source, executor, glob, n_passes, *, n_threads=None, inits=None):
        seen["start"], seen["passes"] = inits[0]["init_doc_topic"], n_passes
        return [glob], glob

    import types

    from bnpcore.moves import topic as mt

    orig = mt.whole_dataset_passes
    mt.whole_dataset_passes = spy
    try:
        mgr._source = object()
        state = types.SimpleNamespace(stats=types.SimpleNamespace(uids=np.array([1, 2, 3])), memos=[None], moves_log=[])
        model = types.SimpleNamespace(elbo=lambda g: -10.0)
        mgr._lap = 7
        assert mgr._evaluate_small(model, state, -5.0) == (0, -5.0)  # lower: rejected
    finally:
        mt.whole_dataset_passes = orig
    np.testing.assert_array_equal(seen["start"], [[90.0, 6.0, 0.0], [0.0, 50.0, 50.0]])
    assert seen["passes"] == 2 and state.moves_log[-1]["small_allocations"] == 1 and not state.moves_log[-1]["accepted"]

    # a default fit the proposal cannot improve: rejected once, and the fit stops a lap later
    k1 = HDPTopicModel(1, n_batches=5, random_state=0).fit(X)
    tried = [r for r in k1.moves_log_ if "small_allocations" in r]
    assert k1.converged_ and len(tried) == 1 and not tried[0]["accepted"] and tried[0]["lap"] == k1.n_iter_


def test_a_settled_delete_restarts_the_documents_a_warm_delete_locks_in():
    """From K = 50 on the 1,000 bars documents (seed 1) one document ends explained by a bar
    and an eleventh topic of its own (114 tokens, 57 % of the document). Its ordinary delete
    starts the document from its counts without that topic: every other topic then weighs
    ``exp ψ(a_k)``, the tokens stay on the one bar it kept, and the delete loses 225 nats.
    At the settled lap the smallest topics are proposed again with the documents that used
    them restarted from the prior (``cold_mask``): accepted, the fit ends with the ten bars
    and a higher objective; without it (``delete_settled=0``) with eleven. The candidate's
    cold documents are exactly those that used the topic in the lap; a fit stopped before the
    settled round and continued (``warm_start``) ends at the same model."""
    X, _ = make_bars(n_docs=1000, random_state=0)
    kw = dict(n_components=50, moves=("merge", "delete"), n_batches=5, random_state=1)
    off = HDPTopicModel(move_options={"delete_settled": 0}, **kw).fit(X)
    assert off.n_components_ == 11
    small = int(off.summaries_.uids[np.argmin(off.summaries_.N)])
    assert [r["accepted"] for r in off.moves_log_ if r["uids"] == [small]][-1] is False

    from bnpcore.moves import topic as mt

    seen = []
    orig = mt.whole_dataset_passes

    def spy(model, source, executor, glob, n_passes, *, n_threads=None, inits=None):
        if inits and "cold_mask" in inits[0]:
            seen.append([(i["cold_mask"].copy(), i["restart_mask"].copy()) for i in inits])
        return orig(model, source, executor, glob, n_passes, n_threads=n_threads, inits=inits)

    mt.whole_dataset_passes = spy
    try:
        m = HDPTopicModel(**kw).fit(X)
    finally:
        mt.whole_dataset_passes = orig
    settled = [r for r in m.moves_log_ if r.get("settled")]
    assert settled and settled[-1]["accepted"] and settled[-1]["uids"] == [small] and settled[-1]["kind"] == "delete"
    assert settled[-1]["elbo_after"] > settled[-1]["elbo_before"] + 50
    assert m.n_components_ == 10 and m.converged_ and m.elbo_ > off.elbo_ + 50
    assert len(seen) == len(settled)
    for masks in seen:  # the documents that used the topic, and only those, start cold
        assert all(np.array_equal(cold, used) for cold, used in masks)
        assert 0 < sum(int(cold.sum()) for cold, _ in masks) < X.shape[0] // 10
    # a fit stopped in the lap before the settled round and continued ends where this one does
    lap = settled[-1]["lap"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        part = HDPTopicModel(max_laps=lap - 1, **kw).fit(X)
    part.set_params(warm_start=True, max_laps=m.n_iter_ - (lap - 1))
    part.fit(X)
    assert part.moves_log_ == m.moves_log_ and part.elbo_ == m.elbo_
    np.testing.assert_array_equal(part.summaries_.S, m.summaries_.S)
    # the other fits of the toy are unchanged: their topics are each used by many documents
    k1 = HDPTopicModel(1, n_batches=5, random_state=0).fit(X)
    assert not any(r.get("settled") for r in k1.moves_log_)


def test_a_fit_stopped_at_its_settled_lap_continues_to_the_same_model():
    """The lap that met the convergence test tells the moves to propose the small allocations'
    delete in the next lap (``settled``); a fit stopped right after it and continued
    (``warm_start``) proposes it at the same lap and ends where the uninterrupted fit does."""
    X, _ = make_bars(n_docs=1000, random_state=0)
    kw = dict(n_components=50, moves=("merge", "delete"), n_batches=5, random_state=0)
    ref = HDPTopicModel(**kw).fit(X)
    lap = next(r["lap"] for r in ref.moves_log_ if "small_allocations" in r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        part = HDPTopicModel(max_laps=lap - 1, **kw).fit(X)
    assert part.state_.moves_state["settled"]
    part.set_params(warm_start=True, max_laps=ref.n_iter_ - (lap - 1))
    part.fit(X)
    assert part.moves_log_ == ref.moves_log_ and part.elbo_ == ref.elbo_ and part.converged_
    np.testing.assert_array_equal(part.summaries_.S, ref.summaries_.S)
