"""HDP topic model and LDA against their peers: fitting time, number of topics and held-out
document-completion score on the same data with the same evaluation.

Data: the toy bars (``bnpcore.datasets.make_bars``: 2,000 training documents, 200 held out,
10 true topics, 900 words) and, when gensim is installed, its Lee corpus (250 training / 50
held-out documents, ``bnpcore.datasets.load_lee_corpus``); with ``--corpus wiki`` its sample of
Wikipedia articles (200 training / 50 held out, ``load_wiki_sample``; LDA with K = 50).

Topic coherence (``bnpcore.metrics.topic_coherence``, identical for every method): the mean
over a method's topics of the document-co-occurrence NPMI and of gensim's u_mass of their 10
most probable words on the training documents (higher is better for both).

Evaluation (identical for every method): each held-out document's tokens are split by the
seeded rule of ``HDPTopicModel.score`` (a random half observed, the rest held out); with each
method's topic-word probabilities and its document prior (HDP: α β plus the rest mass, LDA:
its α vector), the dense document step of bnpcore on the observed half gives E[π_d], and the
score is the mean log probability of the held-out tokens (nats per token, higher is better).

Methods (peers are skipped when not installed): bnpcore ``HDPTopicModel`` (every default:
memoized, birth/merge/delete, growing from one topic, converged or 100 laps; ``--n-batches``
overrides the batches) and ``FiniteTopicModel`` (K = the true number on the bars, 20 on Lee,
50 on Wikipedia; defaults otherwise, i.e. with its swap move, and again with ``moves=()``),
scikit-learn ``LatentDirichletAllocation`` (batch, same K, ``--laps`` iterations), gensim
``LdaModel`` (``--laps`` passes) and ``HdpModel``, tomotopy ``HDPModel`` and ``LDAModel``
(10 × ``--laps`` iterations).

``--trace`` scores bnpcore's HDP on the held-out documents after every lap (callback; the
scoring time is not counted) and prints, for every peer, when the HDP first reaches the peer's
final score and how that time compares with the peer's fitting time (time to equal quality, beside
the time to a converged fit).

``--hdp-passes N`` also trains gensim's ``HdpModel`` beyond its default single online pass, one
pass over the corpus at a time up to N passes (``max_chunks`` = the chunks of one pass, then
``update`` once per pass), scoring it after every pass (scoring time not counted): its time and
score as it converges, the row "gensim HdpModel, N passes", and with ``--trace`` when bnpcore's
HDP reaches each pass's score. That compares converged fits with converged fits.

``--seeds N`` fits every method (bnpcore and the peers) with seeds 0 … N−1 and prints the mean,
median and range of each method's held-out score: on a 50-document held-out set one seed per
method does not rank methods whose scores differ by a few hundredths. ``--splits S`` scores
every fitted model on S document-completion splits (seeds 0 … S−1; the same splits for every
method) and reports their mean: on Lee the split alone moves a method's score by a few
hundredths.

Usage::

    python benches/bench_topic.py
    python benches/bench_topic.py --docs 1000 --corpus bars
    python benches/bench_topic.py --corpus lee --seeds 12 --splits 10
    python benches/bench_topic.py --corpus wiki --splits 5
    python benches/bench_topic.py --corpus bars --trace
    python benches/bench_topic.py --corpus bars --trace --hdp-passes 20
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent.parent / "bench_results"


def heldout_score(phi, prior, prior_rem, X, seed=0):
    """Document-completion score of topics ``phi`` (K × V, rows sum to 1) with document prior
    pseudocounts ``prior`` (K,) and rest mass ``prior_rem`` (None for LDA)."""
    from bnpcore import _core
    from bnpcore.estimators.topic import _split_tokens

    seen, held = _split_tokens(X, np.random.default_rng(seed))
    table = np.ascontiguousarray(np.asarray(phi, dtype=np.float64).T)
    out = _core.doc_topic_step(seen.indptr, seen.indices, seen.data, table, np.ascontiguousarray(prior, dtype=np.float64),
                               alpha_beta_rem=prior_rem, return_doc_topic=True)
    theta = out["doc_topic"] + np.asarray(prior)[None, :]
    rem = 0.0 if prior_rem is None else float(prior_rem)
    tot = theta.sum(axis=1) + rem
    pi = theta / tot[:, None]
    rows = np.repeat(np.arange(X.shape[0]), np.diff(held.indptr))
    p = np.einsum("ij,ji->i", pi[rows], np.asarray(phi)[:, held.indices]) + (rem / tot)[rows] / X.shape[1]
    return float(held.data @ np.log(p) / held.data.sum())


def _bow(X):
    return [list(zip(X.indices[X.indptr[d]:X.indptr[d + 1]].tolist(), X.data[X.indptr[d]:X.indptr[d + 1]].astype(int).tolist()))
            for d in range(X.shape[0])]


def run_methods(X, Xt, k_lda, laps, n_batches=None, seed=0, splits=1, trace_laps=False, hdp_passes=1):
    import bnpcore

    rows = []

    def split_scores(phi, prior, prior_rem):
        return [heldout_score(phi, prior, prior_rem, Xt, seed=s) for s in range(splits)]

    def record(name, seconds, phi, prior, prior_rem, k):
        from bnpcore.metrics import topic_coherence

        phi = np.asarray(phi, dtype=np.float64)
        phi = phi / phi.sum(axis=1, keepdims=True)
        scores = split_scores(phi, prior, prior_rem)
        # mean over the topics of the coherence of their 10 top words on the training documents
        rows.append({"method": name, "seed": seed, "seconds": round(seconds, 3), "n_topics": int(k),
                     "heldout_per_token": float(np.mean(scores)),
                     "npmi": round(float(topic_coherence(phi, X, measure="npmi").mean()), 4),
                     "u_mass": round(float(topic_coherence(phi, X, measure="u_mass").mean()), 4)})
        if splits > 1:
            rows[-1]["heldout_per_split"] = scores
        print(json.dumps(rows[-1]), flush=True)

    def hdp_prior(m):
        beta, beta_rem = m._make_model(m.obs_model_).alloc.beta(m.summaries_)
        return m.alpha * beta, m.alpha * beta_rem

    trace, paused = [], [0.0]

    def on_lap(m, info):
        # the held-out score after every lap; its own time is not counted in the fit's
        t0 = time.perf_counter()
        prior, rem = hdp_prior(m)
        score = float(np.mean(split_scores(m.topics_, prior, rem)))
        trace.append({"lap": int(info["lap"]), "seconds": round(t0 - t - paused[0], 3), "heldout_per_token": score,
                      "n_topics": int(info["n_components"])})
        paused[0] += time.perf_counter() - t0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batches = {} if n_batches is None else {"n_batches": n_batches}  # None: the estimators' default
        t = time.perf_counter()
        m = bnpcore.HDPTopicModel(random_state=seed, callback=on_lap if trace_laps else None, **batches).fit(X)
        sec = time.perf_counter() - t - paused[0]
        record("bnpcore HDPTopicModel", sec, m.topics_, *hdp_prior(m), m.n_components_)
        if trace_laps:
            rows[-1]["trace"] = trace
        t = time.perf_counter()
        f = bnpcore.FiniteTopicModel(k_lda, random_state=seed, **batches).fit(X)
        record("bnpcore FiniteTopicModel", time.perf_counter() - t, f.topics_, np.full(k_lda, f.alpha / k_lda), None, k_lda)
        t = time.perf_counter()
        f = bnpcore.FiniteTopicModel(k_lda, moves=(), random_state=seed, **batches).fit(X)
        record("bnpcore FiniteTopicModel, no moves", time.perf_counter() - t, f.topics_, np.full(k_lda, f.alpha / k_lda), None, k_lda)

        from sklearn.decomposition import LatentDirichletAllocation

        t = time.perf_counter()
        sk = LatentDirichletAllocation(k_lda, doc_topic_prior=0.5 / k_lda, topic_word_prior=0.1, learning_method="batch",
                                       max_iter=laps, random_state=seed).fit(X)
        record("sklearn LatentDirichletAllocation", time.perf_counter() - t, sk.components_, np.full(k_lda, 0.5 / k_lda), None, k_lda)

        if importlib.util.find_spec("gensim") is not None:
            from gensim.models import HdpModel, LdaModel

            corpus = _bow(X)
            vocab = {i: str(i) for i in range(X.shape[1])}
            t = time.perf_counter()
            lda = LdaModel(corpus, num_topics=k_lda, id2word=vocab, alpha=0.5 / k_lda, eta=0.1, passes=laps, random_state=seed)
            record("gensim LdaModel", time.perf_counter() - t, lda.get_topics(), np.full(k_lda, 0.5 / k_lda), None, k_lda)
            t = time.perf_counter()
            hdp = HdpModel(corpus, id2word=vocab, random_state=seed)
            sec = time.perf_counter() - t
            alpha, beta = hdp.hdp_to_lda()
            used = np.flatnonzero(alpha > 1e-3)
            record("gensim HdpModel", sec, beta[used], alpha[used], None, used.size)
            if hdp_passes > 1:
                rows[-1]["passes"] = 1
                gensim_hdp_passes(corpus, vocab, seed, hdp_passes, record, rows, split_scores)
        if importlib.util.find_spec("tomotopy") is not None:
            import tomotopy as tp

            for name, mdl in (("tomotopy HDPModel", tp.HDPModel(initial_k=50, alpha=0.5, eta=0.1, gamma=10.0, seed=seed)),
                              ("tomotopy LDAModel", tp.LDAModel(k=k_lda, alpha=0.5 / k_lda, eta=0.1, seed=seed))):
                for doc in _bow(X):
                    mdl.add_doc([str(w) for w, c in doc for _ in range(c)])
                t = time.perf_counter()
                mdl.train(laps * 10, workers=2)
                sec = time.perf_counter() - t
                vocab = list(mdl.used_vocabs)
                col = np.array([int(w) for w in vocab])
                ks = [k for k in range(mdl.k) if (not hasattr(mdl, "is_live_topic") or mdl.is_live_topic(k))]
                # tomotopy's topics cover the words seen in training; the others get the
                # posterior-mean mass eta / (n_k + V eta) of a word never assigned to the topic
                n_all = np.asarray(mdl.get_count_by_topics(), dtype=np.float64)
                V = X.shape[1]
                phi = np.empty((len(ks), V))
                for i, k in enumerate(ks):
                    unseen = 0.1 / (n_all[k] + V * 0.1)
                    phi[i] = unseen
                    phi[i, col] = np.asarray(mdl.get_topic_word_dist(k)) * (1.0 - (V - col.size) * unseen)
                if name.endswith("HDPModel"):  # document prior alpha * (global topic shares)
                    n_k = np.asarray(mdl.get_count_by_topics(), dtype=np.float64)[ks]
                    prior = float(mdl.alpha) * n_k / n_k.sum()
                else:
                    prior = np.asarray(mdl.alpha)[ks] if np.ndim(mdl.alpha) else np.full(len(ks), mdl.alpha)
                record(name, sec, phi, np.maximum(prior, 1e-12), None, len(ks))
    return rows


def gensim_hdp_passes(corpus, vocab, seed, n_passes, record, rows, split_scores) -> None:
    """gensim's ``HdpModel`` trained one pass over ``corpus`` at a time (its default stops after
    one): ``max_chunks`` = the chunks of one pass, then ``update(corpus)`` once per further pass
    (each call runs ``max_chunks`` more chunks). After every pass the held-out score (scoring
    time not counted) goes into the ``trace`` of the row "gensim HdpModel, N passes"."""
    from gensim.models import HdpModel

    per_pass = -(-len(corpus) // 256)  # HdpModel's default chunksize
    trace, sec = [], 0.0
    for p in range(1, n_passes + 1):
        t = time.perf_counter()
        if p == 1:
            hdp = HdpModel(corpus, id2word=vocab, random_state=seed, max_chunks=per_pass)
        else:
            hdp.update(corpus)
        sec += time.perf_counter() - t
        alpha, beta = hdp.hdp_to_lda()
        used = np.flatnonzero(alpha > 1e-3)
        final = p == n_passes
        if final:
            record(f"gensim HdpModel, {n_passes} passes", sec, beta[used], alpha[used], None, used.size)
            score = rows[-1]["heldout_per_token"]
        else:
            phi = beta[used] / beta[used].sum(axis=1, keepdims=True)
            score = float(np.mean(split_scores(phi, alpha[used], None)))
        trace.append({"pass": p, "seconds": round(sec, 3), "heldout_per_token": score, "n_topics": int(used.size)})
        print(json.dumps({"gensim HdpModel pass": p, **trace[-1]}), flush=True)
    rows[-1]["passes"] = n_passes
    rows[-1]["trace"] = trace


def time_to_reach(rows) -> None:
    """For every peer: the first lap at which bnpcore's HDP (same seed) scores at least as well on
    held-out documents, its time so far, and the ratio to the peer's fitting time."""
    for r in rows:
        if r["method"].startswith("gensim HdpModel,") and "trace" in r:
            # the other way round: when (if ever) the passes reach bnpcore's converged score
            ours = next((x for x in rows if x["seed"] == r["seed"] and x["method"] == "bnpcore HDPTopicModel"), None)
            if ours is not None:
                hit = next((x for x in r["trace"] if x["heldout_per_token"] >= ours["heldout_per_token"]), None)
                best = max(r["trace"], key=lambda x: x["heldout_per_token"])
                if hit is None:
                    print(f"seed {r['seed']}: gensim HdpModel does not reach bnpcore HDP's {ours['heldout_per_token']:.4f} "
                          f"({ours['seconds']:.2f} s) in {r['passes']} passes: best {best['heldout_per_token']:.4f} after pass "
                          f"{best['pass']} ({best['seconds']:.2f} s, {best['seconds'] / max(ours['seconds'], 1e-9):.1f}x bnpcore's time)")
                else:
                    print(f"seed {r['seed']}: gensim HdpModel reaches bnpcore HDP's {ours['heldout_per_token']:.4f} after pass "
                          f"{hit['pass']} ({hit['seconds']:.2f} s): {hit['seconds'] / max(ours['seconds'], 1e-9):.1f}x bnpcore's "
                          f"{ours['seconds']:.2f} s", flush=True)
    for r in rows:
        if r["method"] == "bnpcore HDPTopicModel" and "trace" in r:
            tr, seed = r["trace"], r["seed"]
            for peer in rows:
                if peer["seed"] != seed or peer["method"].startswith("bnpcore"):
                    continue
                hit = next((x for x in tr if x["heldout_per_token"] >= peer["heldout_per_token"]), None)
                if hit is None:
                    print(f"seed {seed}: bnpcore HDP never reaches {peer['method']} ({peer['heldout_per_token']:.4f})")
                else:
                    print(f"seed {seed}: bnpcore HDP reaches {peer['method']}'s {peer['heldout_per_token']:.4f} at lap {hit['lap']} "
                          f"({hit['seconds']:.2f} s, {hit['n_topics']} topics, {hit['heldout_per_token']:.4f}) against "
                          f"{peer['seconds']:.2f} s: {peer['seconds'] / max(hit['seconds'], 1e-9):.1f}x", flush=True)


def summarise(rows) -> None:
    """Per method over the seeds: mean, median and range of the held-out score, mean seconds and
    mean topic coherence (NPMI)."""
    print(f"{'method':36s} {'seeds':>5s} {'mean':>9s} {'median':>9s} {'min':>9s} {'max':>9s} {'s (mean)':>9s} {'npmi':>7s}")
    for name in dict.fromkeys(r["method"] for r in rows):
        h = np.array([r["heldout_per_token"] for r in rows if r["method"] == name])
        sec = np.mean([r["seconds"] for r in rows if r["method"] == name])
        npmi = np.mean([r["npmi"] for r in rows if r["method"] == name])
        print(f"{name:36s} {h.size:5d} {h.mean():9.4f} {np.median(h):9.4f} {h.min():9.4f} {h.max():9.4f} {sec:9.2f} {npmi:7.4f}",
              flush=True)


def main() -> None:
    from bnpcore.datasets import load_lee_corpus, load_wiki_sample, make_bars

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--laps", type=int, default=50)
    ap.add_argument("--corpus", choices=("bars", "lee", "wiki", "all"), default="all")
    ap.add_argument("--n-batches", type=int, default=None, help="bnpcore's n_batches (default: the estimators' default)")
    ap.add_argument("--seeds", type=int, default=1,
                    help="fit every method (peers included) with seeds 0 .. SEEDS-1 and summarise the held-out scores per method")
    ap.add_argument("--splits", type=int, default=1,
                    help="score every fitted model on the document-completion splits of seeds 0 .. SPLITS-1 and report the mean")
    ap.add_argument("--hdp-passes", type=int, default=1,
                    help="also train gensim's HdpModel for this many passes, one at a time, scoring it after each")
    ap.add_argument("--trace", action="store_true",
                    help="score bnpcore's HDP after every lap (not counted in its time) and report when it reaches each peer's score")
    args = ap.parse_args()
    out = {}

    def runs(X, Xt, k):
        rows = []
        for seed in range(args.seeds):
            rows += run_methods(X, Xt, k, args.laps, args.n_batches, seed, args.splits, trace_laps=args.trace,
                                 hdp_passes=args.hdp_passes)
        if args.seeds > 1:
            summarise(rows)
        if args.trace:
            time_to_reach(rows)
        return rows

    if args.corpus in ("bars", "all"):
        X, _ = make_bars(n_docs=args.docs, random_state=0)
        Xt, _ = make_bars(n_docs=max(args.docs // 10, 50), random_state=1)
        print(f"# toy bars: {X.shape[0]} training docs, {Xt.shape[0]} held out", flush=True)
        out["bars"] = runs(X, Xt, 10)
    if args.corpus in ("lee", "all") and importlib.util.find_spec("gensim") is not None:
        X, _ = load_lee_corpus()
        print("# Lee corpus: 250 training docs, 50 held out", flush=True)
        out["lee"] = runs(X[:250], X[250:], 20)
    if args.corpus == "wiki" and importlib.util.find_spec("gensim") is not None:  # not in "all": ~3 minutes with the peers
        X, _ = load_wiki_sample()
        print("# Wikipedia sample: 200 training articles, 50 held out", flush=True)
        out["wiki"] = runs(X[:200], X[200:], 50)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_topic.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
