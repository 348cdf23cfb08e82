"""Topic-model kernels (HDP topic model and LDA): the Rust document local step and the HDP
allocation math against the numpy reference ``bnpcore._reference.topic``.

Kernel-level properties of the HDP property list covered here: P1 (valid, finite outputs with
tiny priors and zero table entries), P2 (count identities), P3 (surrogate bound, incl. a Monte
Carlo check of the exact top term), P4 (objective from summaries == direct term-by-term
objective, incl. batch-summed summaries), P5 (restart proposals never decrease the document
objective; the rho step never decreases f), P6 (L-sparse with L >= K is the dense step; the
L-sparse step with L < K matches its reference), P8 (merge-pair statistics == statistics of the
explicitly merged r', theta'), P11 (rho gradient vs finite differences), P12 (prior recovery at
D = 0), P13 (LDA objective), P14 (document permutation and duplicate word entries), P15
(bit-identical results for 1 and 2 threads), plus additivity over splits of the documents.
P5 (whole coordinate ascent), P7, P9, P10 and P16 need the estimator and the moves.
"""

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from _helpers import close
from bnpcore import _core
from bnpcore._reference import topic as ref
from bnpcore.exceptions import DataError, ParameterError, ShapeError
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import gammaln

SETTINGS = settings(max_examples=25, deadline=None)
KEYS = ("N", "S", "H", "P", "P_rem", "Q0", "Q", "Q_rem", "doc_usage", "merge_H", "merge_P", "merge_Q")


def make_corpus(rng, n_docs, n_vocab, max_types=12, fractional=False):
    """CSR counts (int64 indices) with some empty documents."""
    indptr, indices, data = [0], [], []
    for _ in range(n_docs):
        u = int(rng.integers(0, max_types + 1)) if rng.random() > 0.15 else 0
        w = rng.choice(n_vocab, size=min(u, n_vocab), replace=False)
        c = rng.gamma(1.0, 2.0, w.size) if fractional else rng.integers(1, 6, w.size).astype(float)
        indices.extend(w.tolist())
        data.extend(c.tolist())
        indptr.append(len(indices))
    return np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int64), np.array(data, dtype=float)


def make_globals(rng, n_vocab, K, alpha=0.7):
    lam = rng.gamma(0.5, 2.0, (K, n_vocab)) + 0.02
    rho = rng.uniform(0.05, 0.7, K)
    beta, beta_rem = ref.beta_from_rho(rho)
    return lam, rho, alpha * beta, alpha * beta_rem


def compare(out, want, keys=KEYS, rtol=1e-10):
    for key in keys:
        assert close(out[key], want[key], rtol), (key, out[key], want[key])


problem = st.fixed_dictionaries(
    dict(
        seed=st.integers(0, 2**32 - 1),
        D=st.integers(0, 10),
        V=st.integers(1, 50),
        K=st.integers(1, 8),
        max_iter=st.integers(0, 9),
        restarts=st.booleans(),
        hdp=st.booleans(),
        sparse=st.booleans(),
        fractional=st.booleans(),
    )
)


def problem_inputs(pb):
    """The generator, a corpus and the globals (HDP or LDA prior) of a ``problem`` draw."""
    rng = np.random.default_rng(pb["seed"])
    V, K = pb["V"], pb["K"]
    corpus = make_corpus(rng, pb["D"], V, fractional=pb["fractional"])
    lam, _, a, a_rem = make_globals(rng, V, K)
    if not pb["hdp"]:
        a, a_rem = np.full(K, 0.7 / K), None
    return rng, corpus, lam, a, a_rem


@SETTINGS
@given(problem)
def test_doc_topic_step_matches_reference(pb):
    rng, (indptr, indices, data), lam, a, a_rem = problem_inputs(pb)
    K = pb["K"]
    table = _core.topic_word_table(lam)
    pairs = [tuple(int(x) for x in rng.choice(K, 2, replace=False)) for _ in range(3)] if K > 1 else []
    kw = dict(
        alpha_beta_rem=a_rem,
        max_iter=pb["max_iter"],
        tol=0.0,
        restarts=pb["restarts"],
        restart_max_trials=3,
        top_l=int(rng.integers(1, K + 1)) if pb["sparse"] else None,
        merge_pairs=pairs,
        return_doc_topic=True,
    )
    out = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
    want = ref.doc_topic_step(indptr, indices, data, ref.topic_word_table(lam), a, **kw)
    compare(out, want, KEYS + ("doc_topic",))
    assert out["n_docs"] == pb["D"]
    for key in ("n_iter", "restarts_tried", "restarts_accepted"):
        assert out[key] == want[key], key


@SETTINGS
@given(problem)
def test_warm_started_doc_topic_step_matches_reference(pb):
    """``init_doc_topic`` (the counts each document's first pass starts from: zeros, random
    counts, or the cold step's own solution with one topic's column emptied) against the
    reference, dense and L-sparse (whose warm first pass selects each row's support itself)."""
    rng, (indptr, indices, data), lam, a, a_rem = problem_inputs(pb)
    K = pb["K"]
    table = _core.topic_word_table(lam)
    top_l = int(rng.integers(1, K + 1)) if pb["sparse"] else None
    kw = dict(alpha_beta_rem=a_rem, max_iter=pb["max_iter"], tol=0.0, restarts=pb["restarts"], restart_max_trials=3, top_l=top_l,
              return_doc_topic=True)
    cold = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
    inits = [np.zeros((pb["D"], K)), rng.gamma(0.7, 3.0, (pb["D"], K)), cold["doc_topic"].copy()]
    inits[2][:, int(rng.integers(K))] = 0.0
    for init in inits:
        out = _core.doc_topic_step(indptr, indices, data, table, a, init_doc_topic=init, **kw)
        want = ref.doc_topic_step(indptr, indices, data, ref.topic_word_table(lam), a, init_doc_topic=init, **kw)
        compare(out, want, KEYS + ("doc_topic",))
        for key in ("n_iter", "restarts_tried", "restarts_accepted"):
            assert out[key] == want[key], key


@SETTINGS
@given(problem)
def test_cold_mask_matches_reference(pb):
    """``cold_mask`` starts the documents it marks from the prior despite ``init_doc_topic`` (a
    settled delete restarts the documents that used the deleted topic): against the reference
    with a random mask, dense and L-sparse; an all-true mask is the cold step and an
    all-false mask the warm one, bit for bit; a mask of the wrong length is refused by name."""
    rng, (indptr, indices, data), lam, a, a_rem = problem_inputs(pb)
    K, D = pb["K"], pb["D"]
    table = _core.topic_word_table(lam)
    top_l = int(rng.integers(1, K + 1)) if pb["sparse"] else None
    kw = dict(alpha_beta_rem=a_rem, max_iter=pb["max_iter"], tol=0.0, restart_max_trials=3, top_l=top_l, return_doc_topic=True)
    mask, init = rng.random(D) < 0.5, rng.gamma(0.7, 3.0, (D, K))
    out = _core.doc_topic_step(indptr, indices, data, table, a, cold_mask=mask, init_doc_topic=init, **kw)
    want = ref.doc_topic_step(indptr, indices, data, ref.topic_word_table(lam), a, cold_mask=mask, init_doc_topic=init, **kw)
    compare(out, want, KEYS + ("doc_topic",))
    for key in ("n_iter", "restarts_tried", "restarts_accepted"):
        assert out[key] == want[key], key
    every = _core.doc_topic_step(indptr, indices, data, table, a, cold_mask=np.ones(D, dtype=bool), init_doc_topic=init, **kw)
    cold = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
    none = _core.doc_topic_step(indptr, indices, data, table, a, cold_mask=np.zeros(D, dtype=bool), init_doc_topic=init, **kw)
    warm = _core.doc_topic_step(indptr, indices, data, table, a, init_doc_topic=init, **kw)
    for x, y in ((every, cold), (none, warm)):
        for key in KEYS + ("doc_topic", "restarts_tried", "n_type_passes"):
            np.testing.assert_array_equal(np.asarray(x[key]), np.asarray(y[key]), err_msg=key)
    with pytest.raises(ShapeError, match="cold_mask"):
        _core.doc_topic_step(indptr, indices, data, table, a, cold_mask=np.ones(D + 1, dtype=bool), init_doc_topic=init, **kw)


@SETTINGS
@given(problem)
def test_restart_mask_matches_reference(pb):
    """``restart_mask`` tries the restart proposals only in the documents it marks (a move's
    candidate skips them where the lap tried them): against the reference with a random mask,
    dense and L-sparse, cold and warm-started; an all-true mask is no mask and an all-false
    mask is ``restarts=False``, bit for bit; a mask of the wrong length is refused by name."""
    rng, (indptr, indices, data), lam, a, a_rem = problem_inputs(pb)
    K, D = pb["K"], pb["D"]
    table = _core.topic_word_table(lam)
    top_l = int(rng.integers(1, K + 1)) if pb["sparse"] else None
    kw = dict(alpha_beta_rem=a_rem, max_iter=pb["max_iter"], tol=0.0, restart_max_trials=3, top_l=top_l, return_doc_topic=True)
    mask = rng.random(D) < 0.5
    for init in (None, rng.gamma(0.7, 3.0, (D, K))):
        out = _core.doc_topic_step(indptr, indices, data, table, a, restart_mask=mask, init_doc_topic=init, **kw)
        want = ref.doc_topic_step(indptr, indices, data, ref.topic_word_table(lam), a, restart_mask=mask, init_doc_topic=init, **kw)
        compare(out, want, KEYS + ("doc_topic",))
        for key in ("n_iter", "restarts_tried", "restarts_accepted"):
            assert out[key] == want[key], key
    every = _core.doc_topic_step(indptr, indices, data, table, a, restart_mask=np.ones(D, dtype=bool), **kw)
    default = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
    none = _core.doc_topic_step(indptr, indices, data, table, a, restart_mask=np.zeros(D, dtype=bool), **kw)
    off = _core.doc_topic_step(indptr, indices, data, table, a, restarts=False, **kw)
    for x, y in ((every, default), (none, off)):
        for key in KEYS + ("doc_topic", "restarts_tried", "n_type_passes"):
            np.testing.assert_array_equal(np.asarray(x[key]), np.asarray(y[key]), err_msg=key)
    with pytest.raises(ShapeError, match="restart_mask"):
        _core.doc_topic_step(indptr, indices, data, table, a, restart_mask=np.ones(D + 1, dtype=bool), **kw)


def test_warm_start_converges_faster_and_checks_its_input():
    """From its own solution a document needs far fewer passes than from the prior, and lands on
    the same summaries to the tolerance (dense and L-sparse); a wrong shape, a negative or a NaN
    count are refused, naming ``init_doc_topic``."""
    rng = np.random.default_rng(5)
    V, K = 40, 6
    indptr, indices, data = make_corpus(rng, 30, V, max_types=20)
    lam, _, a, a_rem = make_globals(rng, V, K)
    table = _core.topic_word_table(lam)
    cold = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, tol=1e-9, restarts=False, return_doc_topic=True)
    warm = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, tol=1e-9, restarts=False, init_doc_topic=cold["doc_topic"])
    assert warm["n_type_passes"] * 3 < cold["n_type_passes"]
    np.testing.assert_allclose(warm["N"], cold["N"], rtol=1e-6)
    kw = dict(alpha_beta_rem=a_rem, tol=1e-9, restarts=False, top_l=3)
    cold = _core.doc_topic_step(indptr, indices, data, table, a, return_doc_topic=True, **kw)
    warm = _core.doc_topic_step(indptr, indices, data, table, a, init_doc_topic=cold["doc_topic"], **kw)
    assert warm["n_type_passes"] * 2 < cold["n_type_passes"]
    np.testing.assert_allclose(warm["N"], cold["N"], rtol=1e-3)  # supports need not be a fixed point of full reselection
    bad = {"shape": cold["doc_topic"][:-1], "negative": -cold["doc_topic"], "nan": np.full_like(cold["doc_topic"], np.nan)}
    for what, init in bad.items():
        with pytest.raises((ShapeError, DataError), match="init_doc_topic"):
            _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, init_doc_topic=init)
            pytest.fail(f"a {what} warm start was accepted")


@SETTINGS
@given(
    st.fixed_dictionaries(
        dict(
            seed=st.integers(0, 2**32 - 1),
            K=st.integers(17, 90),
            L=st.integers(1, 10),
            max_iter=st.integers(1, 25),
            restarts=st.booleans(),
            peaked=st.booleans(),
        )
    )
)
def test_sparse_doc_step_with_many_topics_matches_reference(pb):
    """The L-sparse step where |A_d| >> L: reselection skips entries below a bound of the L-th
    weight (from the row's previous support, the heaviest topics, or block maxima); the
    selected supports, hence every summary, must equal the reference's full sort."""
    rng = np.random.default_rng(pb["seed"])
    V, K = 60, pb["K"]
    indptr, indices, data = make_corpus(rng, 4, V, max_types=30)
    lam, _, a, a_rem = make_globals(rng, V, K)
    if pb["peaked"]:  # few heavy topics per word: active sets shrink, supports lose topics
        lam = lam * rng.gamma(0.2, 5.0, lam.shape) + 0.01
    kw = dict(alpha_beta_rem=a_rem, max_iter=pb["max_iter"], tol=0.0, restarts=pb["restarts"], top_l=pb["L"], return_doc_topic=True)
    out = _core.doc_topic_step(indptr, indices, data, _core.topic_word_table(lam), a, **kw)
    want = ref.doc_topic_step(indptr, indices, data, ref.topic_word_table(lam), a, **kw)
    compare(out, want, ("N", "S", "H", "P", "Q", "doc_topic"))
    for key in ("n_iter", "restarts_tried", "restarts_accepted"):
        assert out[key] == want[key], key
    # warm-started from that solution with its heaviest topic emptied (a delete's start)
    init = out["doc_topic"].copy()
    init[:, int(np.argmax(out["N"]))] = 0.0
    out = _core.doc_topic_step(indptr, indices, data, _core.topic_word_table(lam), a, init_doc_topic=init, **kw)
    want = ref.doc_topic_step(indptr, indices, data, ref.topic_word_table(lam), a, init_doc_topic=init, **kw)
    compare(out, want, ("N", "S", "H", "P", "Q", "doc_topic"))
    assert out["n_iter"] == want["n_iter"]


def test_default_tolerance_and_scipy_int32_csr():
    rng = np.random.default_rng(3)
    X = sp.random_array((40, 30), density=0.2, rng=rng, format="csr", dtype=float)
    X.data = np.ceil(5 * X.data)
    X = sp.csr_array(X)
    assert X.indices.dtype == np.int32
    lam, _, a, a_rem = make_globals(rng, 30, 6)
    table = _core.topic_word_table(lam)
    out32 = _core.doc_topic_step(X.indptr, X.indices, X.data, table, a, alpha_beta_rem=a_rem)
    out64 = _core.doc_topic_step(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, table, a, alpha_beta_rem=a_rem)
    for key in KEYS:
        np.testing.assert_array_equal(out32[key], out64[key])
    want = ref.doc_topic_step(X.indptr, X.indices, X.data, table, a, alpha_beta_rem=a_rem)
    compare(out32, want, ("N", "S", "P", "Q"), rtol=1e-8)


@SETTINGS
@given(problem)
def test_objective_from_summaries_equals_direct(pb):
    """P4: summaries (Rust) -> objective == term-by-term objective from r, theta (reference)."""
    rng = np.random.default_rng(pb["seed"])
    V, K, alpha, gamma, lam_bar = pb["V"], pb["K"], 0.7, 3.0, 0.1
    indptr, indices, data = make_corpus(rng, pb["D"], V, fractional=pb["fractional"])
    lam, rho, a, a_rem = make_globals(rng, V, K, alpha)
    omega = ref.hdp_omega(pb["D"], K, gamma) * rng.uniform(0.5, 2.0, K)
    table = ref.topic_word_table(lam)
    kw = dict(max_iter=pb["max_iter"], tol=0.0, restarts=pb["restarts"], top_l=2 if pb["sparse"] else None)
    if pb["hdp"]:
        loc = ref.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, return_local=True, **kw)["local"]
        summ = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, **kw)
        direct = ref.elbo_raw(indptr, indices, data, loc, lam, lam_bar, rho, omega, alpha, gamma)
        from_summ = ref.elbo_from_summaries(summ, lam, lam_bar, rho, omega, alpha, gamma)
        beta, beta_rem = _core.hdp_beta_from_rho(rho)
        doc_core = _core.hdp_elbo_doc(summ["Q0"], summ["Q"], summ["Q_rem"], summ["P"], summ["P_rem"], alpha, beta, beta_rem)
        top_core = _core.hdp_elbo_top(rho, omega, float(pb["D"]), alpha, gamma)
        assert close(doc_core, direct["doc"])
        assert close(top_core, direct["top"])
    else:
        a = np.full(K, alpha / K)
        loc = ref.doc_topic_step(indptr, indices, data, table, a, return_local=True, **kw)["local"]
        summ = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
        direct = ref.lda_elbo_raw(indptr, indices, data, loc, lam, lam_bar, alpha)
        from_summ = ref.elbo_from_summaries(summ, lam, lam_bar, rho, omega, alpha, gamma)
        from_summ["doc"] = _core.lda_elbo_doc(float(pb["D"]), alpha, summ["Q0"], summ["Q"], summ["P"])
        assert close(from_summ["doc"], ref.lda_elbo_doc(pb["D"], alpha, summ["Q0"], summ["Q"], summ["P"]))
    for term in ("data", "ent", "doc"):
        assert close(from_summ[term], direct[term]), term


def test_summaries_add_over_splits_of_the_documents():
    rng = np.random.default_rng(5)
    indptr, indices, data = make_corpus(rng, 57, 40)
    lam, _, a, a_rem = make_globals(rng, 40, 7)
    table = _core.topic_word_table(lam)
    kw = dict(alpha_beta_rem=a_rem, merge_pairs=[(0, 1), (2, 6)], return_doc_topic=True)
    whole = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
    parts = []
    for lo, hi in ((0, 20), (20, 21), (21, 57)):
        s, e = indptr[lo], indptr[hi]
        parts.append(_core.doc_topic_step(indptr[lo : hi + 1] - s, indices[s:e], data[s:e], table, a, **kw))
    for key in KEYS:
        assert close(sum(np.asarray(p[key]) for p in parts), whole[key]), key
    np.testing.assert_array_equal(np.vstack([p["doc_topic"] for p in parts]), whole["doc_topic"])
    assert sum(p["n_docs"] for p in parts) == whole["n_docs"] == 57


@pytest.mark.parametrize("top_l", [None, 3])
def test_thread_count_bit_identity(top_l):
    """P15: 200 documents span 13 leaves of 16 documents."""
    rng = np.random.default_rng(6)
    indptr, indices, data = make_corpus(rng, 200, 60, max_types=20)
    lam, _, a, a_rem = make_globals(rng, 60, 9)
    table = _core.topic_word_table(lam)
    kw = dict(alpha_beta_rem=a_rem, top_l=top_l, merge_pairs=[(1, 4)], return_doc_topic=True)
    one = _core.doc_topic_step(indptr, indices, data, table, a, n_threads=1, **kw)
    two = _core.doc_topic_step(indptr, indices, data, table, a, n_threads=2, **kw)
    for key in KEYS + ("doc_topic", "n_iter", "restarts_accepted"):
        np.testing.assert_array_equal(one[key], two[key])


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 9), st.booleans())
def test_count_identities(seed, K, sparse):
    """P2 (and P1 for the summaries)."""
    rng = np.random.default_rng(seed)
    indptr, indices, data = make_corpus(rng, 15, 30, fractional=True)
    alpha = float(rng.uniform(0.05, 5.0))
    lam, rho, a, a_rem = make_globals(rng, 30, K, alpha)
    beta, beta_rem = _core.hdp_beta_from_rho(rho)
    assert abs(beta.sum() + beta_rem - 1.0) < 1e-12
    table = _core.topic_word_table(lam)
    out = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, top_l=2 if sparse else None, return_doc_topic=True)
    T = np.add.reduceat(np.append(data, 0.0), indptr[:-1]) * (np.diff(indptr) > 0)
    assert close(out["doc_topic"].sum(axis=1), T)
    assert close(out["N"].sum(), data.sum())
    assert close(out["S"].sum(axis=1), out["N"])
    assert np.all(out["H"] >= -1e-12)
    # theta_d. = T_d + alpha after the step, so Q0 = -sum_d ln Gamma(T_d + alpha)
    assert close(out["Q0"], -gammaln(T + alpha).sum())
    # documents using each topic: N_dk above the threshold (by default the one the moves read)
    np.testing.assert_array_equal(out["doc_usage"], (out["doc_topic"] > _core.DOC_USAGE_THRESHOLD).sum(axis=0))
    half = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, top_l=2 if sparse else None, usage_threshold=0.5)
    np.testing.assert_array_equal(half["doc_usage"], (out["doc_topic"] > 0.5).sum(axis=0))


def test_topic_table_near_tiny_priors_is_the_exact_one():
    """The table's expansion around the prior (first-order digamma) is skipped where the prior's
    trigamma overflows (below ~7.5e-155): there 0 · inf was NaN; the table is then the exact
    one, bit for bit, and everywhere finite."""
    rng = np.random.default_rng(3)
    V, K = 40, 5
    for p in (1e-160, 1e-300, 5e-324):
        prior = np.full(V, p)
        lam = prior[None, :] + np.where(rng.random((K, V)) < 0.5, 0.0, rng.uniform(0, 20, (K, V)))
        got = _core.topic_word_table(lam, prior=prior)
        assert np.all(np.isfinite(got)), p
        np.testing.assert_array_equal(got, _core.topic_word_table(lam))


def test_tiny_priors_and_zero_table_entries_stay_finite():
    """P1: a_k down to 1e-300 and exp(E ln phi) entries equal to 0 give finite summaries."""
    rng = np.random.default_rng(7)
    indptr, indices, data = make_corpus(rng, 30, 20)
    K = 6
    table = rng.random((20, K))
    table[rng.random((20, K)) < 0.4] = 0.0
    table[:, 0] = 1e-3
    a = np.array([1e-300, 1e-200, 0.5, 1e-300, 2.0, 1e-10])
    for top_l in (None, 2):
        out = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=1e-300, top_l=top_l, return_doc_topic=True)
        for key in KEYS + ("doc_topic",):
            assert np.all(np.isfinite(out[key])), key
        assert close(out["N"].sum(), data.sum())
        want = ref.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=1e-300, top_l=top_l)
        compare(out, want, ("N", "S", "H"), rtol=1e-8)


@pytest.mark.parametrize("max_iter", [0, 1, 5])
def test_dense_entropy_of_extreme_rows_matches_reference(max_iter):
    """The dense step's entropy (summed from ``S`` times the table's logarithms and per-document
    terms, not from ``r ln r`` per token) equals the reference's ``-sum c r ln r`` on rows the
    decomposition must not touch: a word no topic emits (its table row all zeros: uniform
    responsibilities), rows whose sums fall below the log-domain threshold (entries ~1e-290),
    zero table entries, priors down to 1e-300 and warm starts from zero counts (log weights
    ~ -1e300, where ``p - L`` would lose every digit if the shift were not taken out)."""
    rng = np.random.default_rng(11)
    indptr, indices, data = make_corpus(rng, 40, 12)
    K = 5
    table = rng.random((12, K))
    table[rng.random((12, K)) < 0.3] = 0.0
    table[3] = 0.0
    table[5] = 1e-290 * rng.random(K)
    table[7, :2] = 1e-295
    inits = (None, np.zeros((40, K)), rng.gamma(0.5, 2.0, (40, K)))
    for a in (np.array([0.3, 1e-300, 0.5, 2.0, 1e-10]), np.full(K, 1e-300)):
        for init in inits:
            if init is not None and not init.any() and a.max() < 1e-200:
                continue  # every log weight ~ -1e300: the reference's C + psi loses the table (below)
            kw = dict(alpha_beta_rem=0.2, max_iter=max_iter, tol=0.0, restarts=True, restart_max_trials=3, init_doc_topic=init,
                      merge_pairs=[(0, 1), (2, 4)])
            out = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
            want = ref.doc_topic_step(indptr, indices, data, table, a, **kw)
            for key in ("N", "S", "H", "merge_H"):
                assert np.all(np.isfinite(out[key])), key
            compare(out, want, ("N", "S", "H", "merge_H"), rtol=1e-9)
    # equal log weights of -1e300 (zero counts, equal priors of 1e-300), first pass only: the
    # responsibilities are the table's rows normalised (uniform where a row is all zeros)
    out = _core.doc_topic_step(indptr, indices, data, table, np.full(K, 1e-300), alpha_beta_rem=0.2, max_iter=0, restarts=False,
                               init_doc_topic=inits[1])
    tot = table.sum(axis=1, keepdims=True)
    r = np.where(tot > 0, table / np.where(tot > 0, tot, 1.0), 1.0 / K)[indices]
    H = -(data[:, None] * np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)).sum(axis=0)
    assert close(out["N"], data @ r, 1e-9) and close(out["H"], H, 1e-9), (out["H"], H)


def test_top_l_at_least_k_is_the_dense_step():
    """P6 at the API: top_l >= K runs the dense kernel (bit-identical); in the reference, the
    L-sparse step with L = K and eps = 0 equals the dense step."""
    rng = np.random.default_rng(8)
    indptr, indices, data = make_corpus(rng, 25, 30)
    lam, _, a, a_rem = make_globals(rng, 30, 5)
    table = _core.topic_word_table(lam)
    dense = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem)
    for L in (5, 9):
        sparse = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, top_l=L)
        for key in KEYS:
            np.testing.assert_array_equal(sparse[key], dense[key])
    dense_ref = ref.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, max_iter=15, tol=0.0, restarts=False)
    counters = dict(n_iter=0, restarts_tried=0, restarts_accepted=0)
    opts = dict(max_iter=15, tol=0.0, restarts=False, restart_max_trials=25, restart_iters=2, restart_min_mass=0.1, sparse_eps=0.0)
    C = np.log(table)
    n_sparse = np.zeros(a.size)
    for doc in range(indptr.size - 1):
        w, c = indices[indptr[doc] : indptr[doc + 1]], data[indptr[doc] : indptr[doc + 1]]
        n_sparse += ref._sparse_doc(C[w], c, a, a_rem, a.size, opts, counters)[1]
    assert close(n_sparse, dense_ref["N"], 1e-12)


def test_sparse_rows_have_at_most_l_nonzeros():
    """P1: the L-sparse rows are on the simplex with at most L non-zeros."""
    rng = np.random.default_rng(9)
    indptr, indices, data = make_corpus(rng, 20, 30)
    lam, _, a, a_rem = make_globals(rng, 30, 8)
    table = _core.topic_word_table(lam)
    loc = ref.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, top_l=2, return_local=True)["local"]
    for r, _ in loc:
        assert np.all((r > 0).sum(axis=1) <= 2)
        assert close(r.sum(axis=1), np.ones(r.shape[0]), 1e-12)


def test_restarts_never_decrease_the_document_objective():
    """P5 (restart part): per document, L_d with restarts >= L_d without (same cold start)."""
    rng = np.random.default_rng(10)
    indptr, indices, data = make_corpus(rng, 40, 25, max_types=15)
    lam, _, a, a_rem = make_globals(rng, 25, 8, alpha=0.3)
    table = ref.topic_word_table(lam)
    C = np.log(table)
    vals = {}
    for restarts in (False, True):
        for top_l in (None, 3):
            out = ref.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, restarts=restarts, top_l=top_l, return_local=True)
            obj = []
            for d, (r, theta) in enumerate(out["local"]):
                w, c = indices[indptr[d] : indptr[d + 1]], data[indptr[d] : indptr[d + 1]]
                obj.append(ref.doc_objective(C[w], c, r, theta - a, a, a_rem))
            vals[restarts, top_l] = np.array(obj)
            if restarts:
                core = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, top_l=top_l)
                assert core["restarts_accepted"] == out["restarts_accepted"]
                assert core["restarts_tried"] >= core["restarts_accepted"] > 0
    for top_l in (None, 3):
        assert np.all(vals[True, top_l] >= vals[False, top_l] - 1e-10 * np.abs(vals[False, top_l]))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(2, 7), st.sampled_from([None, 2]))
def test_merge_pair_statistics_equal_explicit_merge(seed, K, top_l):
    """P8: merged H, P, Q from the step == the same statistics of the explicitly merged
    r' = r_a + r_b, theta' = theta_a + theta_b (theta'_d. = theta_d.)."""
    rng = np.random.default_rng(seed)
    indptr, indices, data = make_corpus(rng, 12, 20)
    lam, _, a, a_rem = make_globals(rng, 20, K)
    table = _core.topic_word_table(lam)
    pairs = [(int(i), int(j)) for i, j in (rng.choice(K, 2, replace=False) for _ in range(4))]
    out = _core.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, top_l=top_l, merge_pairs=pairs)
    loc = ref.doc_topic_step(indptr, indices, data, table, a, alpha_beta_rem=a_rem, top_l=top_l, return_local=True)["local"]
    from scipy.special import digamma

    for m, (i, j) in enumerate(pairs):
        H = P = Q = 0.0
        for d, (r, theta) in enumerate(loc):
            c = data[indptr[d] : indptr[d + 1]]
            rt = r[:, i] + r[:, j]
            H -= float(c @ np.where(rt > 0, rt * np.log(np.where(rt > 0, rt, 1.0)), 0.0))
            keep = [k for k in range(K) if k not in (i, j)]
            theta_m = np.append(theta[keep], theta[i] + theta[j])
            N = c @ r if c.size else np.zeros(K)
            tot = theta_m.sum() + a_rem
            assert abs(tot - (theta.sum() + a_rem)) < 1e-9 * tot
            ell = digamma(theta_m[-1]) - digamma(tot)
            P += ell
            Q += gammaln(theta_m[-1]) + (N[i] + N[j] - theta_m[-1]) * ell
        assert close(out["merge_H"][m], H) and close(out["merge_P"][m], P) and close(out["merge_Q"][m], Q)


def test_document_permutation_and_duplicate_entries():
    """P14: permuting documents or splitting a word type into duplicate entries changes
    nothing beyond round-off."""
    rng = np.random.default_rng(11)
    indptr, indices, data = make_corpus(rng, 30, 25)
    lam, _, a, a_rem = make_globals(rng, 25, 6)
    table = _core.topic_word_table(lam)
    kw = dict(alpha_beta_rem=a_rem, merge_pairs=[(0, 3)], return_doc_topic=True)
    base = _core.doc_topic_step(indptr, indices, data, table, a, **kw)
    X = sp.csr_array((data, indices, indptr), shape=(30, 25))
    perm = rng.permutation(30)
    Xp = X[perm]
    out = _core.doc_topic_step(Xp.indptr.astype(np.int64), Xp.indices.astype(np.int64), Xp.data, table, a, **kw)
    compare(out, base)
    assert close(out["doc_topic"], base["doc_topic"][perm])
    # duplicate entries: every (v, c) becomes (v, c/3), (v, 2c/3)
    ind2 = np.repeat(indices, 2)
    dat2 = np.stack([data / 3, 2 * data / 3], axis=1).ravel()
    out = _core.doc_topic_step(2 * indptr, ind2, dat2, table, a, **kw)
    compare(out, base)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.floats(0.05, 5.0), st.floats(0.5, 20.0))
def test_rho_gradient_matches_finite_differences(seed, K, alpha, gamma):
    """P11, and Rust f/gradient == the reference written term by term."""
    rng = np.random.default_rng(seed)
    D = float(rng.integers(0, 200))
    rho = rng.uniform(0.05, 0.95, K)
    P = -rng.gamma(2.0, 3.0, K) * max(D, 1.0)
    P_rem = -rng.gamma(2.0, 10.0) * max(D, 1.0)
    omega = ref.hdp_omega(D, K, gamma) * rng.uniform(0.5, 2.0, K)
    for om in (None, omega):
        f, g = _core.hdp_rho_objective(rho, P, P_rem, D, alpha, gamma, om)
        f_ref, g_ref = ref.hdp_rho_objective(rho, P, P_rem, D, alpha, gamma, om)
        assert close(f, f_ref) and close(g, g_ref)
        for k in range(K):
            h = 1e-6 * min(rho[k], 1 - rho[k])
            up, dn = rho.copy(), rho.copy()
            up[k] += h
            dn[k] -= h
            fd = (_core.hdp_rho_objective(up, P, P_rem, D, alpha, gamma, om)[0] - _core.hdp_rho_objective(dn, P, P_rem, D, alpha, gamma, om)[0]) / (2 * h)
            scale = max(abs(g[k]), 1e-3 * np.abs(g).max(), 1.0)
            assert abs(fd - g[k]) <= 1e-5 * scale, (k, fd, g[k])


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 15), st.floats(0.05, 5.0), st.floats(0.5, 20.0))
def test_rho_optimizer(seed, K, alpha, gamma):
    """The rho step never decreases f (P5) and reaches scipy's L-BFGS-B optimum."""
    rng = np.random.default_rng(seed)
    D = float(rng.integers(1, 300))
    P = -rng.gamma(2.0, 3.0, K) * D
    P_rem = -rng.gamma(2.0, 10.0) * D
    r0 = _core.hdp_rho_init(D, K, gamma)
    assert close(r0, ref.hdp_rho_init(D, K, gamma))
    f0 = _core.hdp_rho_objective(r0, P, P_rem, D, alpha, gamma)[0]
    res = _core.hdp_optimize_rho(r0, P, P_rem, D, alpha, gamma)
    assert res["f"] >= f0
    assert close(res["omega"], ref.hdp_omega(D, K, gamma))

    def neg(y):
        r = 1.0 / (1.0 + np.exp(-y))
        f, g = ref.hdp_rho_objective(r, P, P_rem, D, alpha, gamma)
        return -f, -g * r * (1 - r)

    y0 = np.log(r0 / (1 - r0))
    best = scipy.optimize.minimize(neg, y0, jac=True, method="L-BFGS-B", options=dict(ftol=1e-15, gtol=1e-11, maxiter=2000))
    assert res["f"] >= -best.fun - 1e-8 * abs(best.fun)


@pytest.mark.parametrize("gamma", [1.0, 4.5])
def test_rho_prior_recovery_without_documents(gamma):
    """P12: D = 0 gives rho_k = 1 / (1 + gamma), omega_k = 1 + gamma."""
    K = 5
    res = _core.hdp_optimize_rho(np.linspace(0.1, 0.9, K), np.zeros(K), 0.0, 0.0, 0.5, gamma)
    np.testing.assert_allclose(res["omega"], 1 + gamma, rtol=1e-12)
    np.testing.assert_allclose(res["rho"], 1 / (1 + gamma), rtol=1e-6)


def test_beta_rho_round_trip():
    rng = np.random.default_rng(12)
    rho = rng.uniform(0.01, 0.9, 20)
    beta, rem = _core.hdp_beta_from_rho(rho)
    b_ref, rem_ref = ref.beta_from_rho(rho)
    assert close(beta, b_ref, 1e-14) and abs(rem - rem_ref) < 1e-15
    assert close(_core.hdp_rho_from_beta(beta), rho, 1e-12)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(0, 12), st.floats(1e-3, 200.0))
def test_surrogate_bound(seed, K, alpha):
    """P3: c_Dir(alpha b) >= K ln alpha + sum ln b for b on the (K+1)-simplex."""
    rng = np.random.default_rng(seed)
    b = rng.dirichlet(np.full(K + 1, 0.5))
    b = np.maximum(b, 1e-300)
    b /= b.sum()
    lhs = gammaln(alpha * b.sum()) - gammaln(alpha * b).sum()
    rhs = K * np.log(alpha) + np.log(b).sum()
    assert lhs >= rhs - 1e-9 * max(1.0, abs(rhs))
    if K == 0:
        assert abs(lhs - rhs) < 1e-12


def test_surrogate_top_term_is_below_monte_carlo_exact_top_term():
    """P3: L_top^sur <= L_top = sum_k E ln p(u)/q(u) + D E[c_Dir(alpha pi^G(u))] (Monte Carlo)."""
    rng = np.random.default_rng(13)
    K, D, alpha, gamma = 4, 20, 0.5, 3.0
    rho = np.array([0.4, 0.3, 0.35, 0.5])
    omega = ref.hdp_omega(D, K, gamma)
    sur = _core.hdp_elbo_top(rho, omega, float(D), alpha, gamma)
    assert close(sur, ref.hdp_elbo_top_direct(rho, omega, D, alpha, gamma))
    u = rng.beta(rho * omega, (1 - rho) * omega, size=(20000, K))
    rest = np.cumprod(1 - u, axis=1)
    pi = np.concatenate([u * np.concatenate([np.ones((u.shape[0], 1)), rest[:, :-1]], axis=1), rest[:, -1:]], axis=1)
    c_dir = gammaln(alpha) - gammaln(alpha * pi).sum(axis=1)
    bound = K * np.log(alpha) + np.log(pi).sum(axis=1)
    exact = sur + D * (c_dir.mean() - bound.mean())
    se = D * (c_dir - bound).std() / np.sqrt(u.shape[0])
    assert exact - sur > 0 and exact - sur > 3 * se


def test_make_bars():
    from bnpcore.datasets import make_bars

    X, topics = make_bars(n_docs=60, random_state=0)
    assert isinstance(X, sp.csr_array) and X.shape == (60, 900)
    assert topics.shape == (10, 900) and np.allclose(topics.sum(axis=1), 1.0)
    np.testing.assert_array_equal(X.sum(axis=1), 200)
    on = topics > 0.5 * topics.max(axis=1, keepdims=True)
    assert np.all(on.sum(axis=1) == 180) and np.all((topics * on).sum(axis=1) > 0.94)
    X2, _ = make_bars(n_docs=60, random_state=0)
    assert (X != X2).nnz == 0
    _, _, doc_topics = make_bars(n_docs=60, random_state=1, return_doc_topics=True)
    assert doc_topics.shape == (60, 10) and np.allclose(doc_topics.sum(axis=1), 1.0)
    assert np.all(((doc_topics > 0).sum(axis=1) >= 1) & ((doc_topics > 0).sum(axis=1) <= 3))


def _call(indptr, indices, data, table, a, **kw):
    return _core.doc_topic_step(indptr, indices, data, table, a, **kw)


def test_bad_inputs_raise_clear_errors():
    rng = np.random.default_rng(14)
    indptr, indices, data = make_corpus(rng, 5, 10)
    indices[0] = 3
    table = rng.random((10, 3))
    a = np.full(3, 0.2)
    with pytest.raises(DataError, match="indices"):
        _call(indptr, np.where(np.arange(indices.size) == 0, 10, indices), data, table, a)
    with pytest.raises(DataError, match="indices"):
        _call(indptr, np.where(np.arange(indices.size) == 0, -1, indices), data, table, a)
    bad = indptr.copy()
    bad[2], bad[3] = bad[3], bad[2] - 1 if bad[3] > bad[2] else bad[2] + 1
    with pytest.raises((DataError, ShapeError), match="indptr"):
        _call(np.array([0, 5, 2, indices.size]), indices, data, table, a)
    with pytest.raises(DataError, match="indptr"):
        _call(np.array([1, indices.size]), indices, data, table, a)
    with pytest.raises(DataError, match="data"):
        _call(indptr, indices, np.where(np.arange(data.size) == 0, -1.0, data), table, a)
    with pytest.raises(DataError, match="data"):
        _call(indptr, indices, np.where(np.arange(data.size) == 0, np.nan, data), table, a)
    with pytest.raises(ShapeError, match="indices/data"):
        _call(indptr, indices[:-1], data[:-1], table, a)
    with pytest.raises(ShapeError, match="alpha_beta"):
        _call(indptr, indices, data, table, np.full(4, 0.2))
    with pytest.raises(ParameterError, match="alpha_beta"):
        _call(indptr, indices, data, table, np.array([0.2, 0.0, 0.1]))
    with pytest.raises(ParameterError, match="alpha_beta_rem"):
        _call(indptr, indices, data, table, a, alpha_beta_rem=0.0)
    with pytest.raises(DataError, match="exp_elog_phi"):
        _call(indptr, indices, data, np.where(table > 0.5, np.inf, table), a)
    with pytest.raises(ParameterError, match="top_l"):
        _call(indptr, indices, data, table, a, top_l=0)
    with pytest.raises(ParameterError, match="merge_pairs"):
        _call(indptr, indices, data, table, a, merge_pairs=[(0, 3)])
    with pytest.raises(ParameterError, match="tol"):
        _call(indptr, indices, data, table, a, tol=-1.0)
    with pytest.raises(TypeError, match="indptr"):
        _call(indptr.astype(float), indices, data, table, a)
    with pytest.raises(ParameterError, match="n_threads"):
        _call(indptr, indices, data, table, a, n_threads=0)
    with pytest.raises(ParameterError, match="rho"):
        _core.hdp_rho_objective(np.array([0.5, 1.0]), np.zeros(2), 0.0, 1.0, 0.5, 1.0)
    with pytest.raises(ParameterError, match="alpha"):
        _core.hdp_optimize_rho(np.array([0.5]), np.zeros(1), 0.0, 1.0, -0.5, 1.0)
    with pytest.raises(DataError, match="lam"):
        _core.topic_word_table(np.zeros((2, 3)))
    # empty batch: zero summaries of the right shapes
    out = _call(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), table, a, return_doc_topic=True)
    assert out["n_docs"] == 0 and out["S"].shape == (3, 10) and out["doc_topic"].shape == (0, 3)


def test_topic_table_reuses_columns_bit_for_bit(monkeypatch):
    """``TopicModel.topic_table`` copies the columns of topics whose Dirichlet row is unchanged
    (same uid, same values) from the last table and computes the rest: every result equals a
    fresh ``topic_word_table`` bit for bit, and only the changed topics are computed."""
    from bnpcore.obs import ObsModel
    from bnpcore.stats import SuffStats
    from bnpcore.topic import HDPTopicAlloc, TopicModel

    rng = np.random.default_rng(5)
    V, K = 40, 6
    prior = rng.uniform(0.05, 0.5, V)
    model = TopicModel(HDPTopicAlloc(), ObsModel("mult", {"lam": prior}))
    S = rng.gamma(0.3, 4.0, (K, V)) * (rng.random((K, V)) < 0.5)
    uids = np.arange(10, 10 + K)

    def stats(S, uids):
        return SuffStats(S.sum(axis=1), S, np.zeros(len(uids)), 0.0, np.asarray(uids, dtype=np.int64))

    computed = []
    real = _core.topic_word_table
    monkeypatch.setattr(_core, "topic_word_table", lambda lam, **kw: computed.append(lam.shape[0]) or real(lam, **kw))
    S2 = S.copy()
    S2[2, 5] += 1.0  # topic 12 changes
    S3 = np.vstack([S2[[4, 0, 1]], rng.gamma(0.3, 4.0, (1, V))])  # reordered, one new topic
    cases = [
        (S, uids, K),  # nothing cached: every topic
        (np.delete(S, 3, axis=0), np.delete(uids, 3), 0),  # a delete: a copy
        (S2, uids, 2),  # against the last table (without topic 13): topics 12 and 13
        (S3, [14, 10, 11, 99], 1),  # the new topic only
        (S3, [14, 10, 11, 98], 1),  # same values, another uid: computed
    ]
    for Sc, u, n_new in cases:
        computed.clear()
        got = model.topic_table(stats(Sc, u))
        assert sum(computed) == n_new
        want = real(np.ascontiguousarray(prior[None, :] + Sc), prior=prior)
        assert got.flags.c_contiguous and np.array_equal(got, want)
    # another vocabulary size: computed afresh
    computed.clear()
    model.obs = ObsModel("mult", {"lam": prior[:30]})
    got = model.topic_table(stats(S[:, :30], uids))
    assert sum(computed) == K and np.array_equal(got, real(np.ascontiguousarray(prior[None, :30] + S[:, :30]), prior=prior[:30]))
    # the cache does not travel (a cluster's workers get the model without it)
    import pickle

    assert model._table_cache is not None and pickle.loads(pickle.dumps(model))._table_cache is None
    model.clear_caches()  # what the engine does when a fit ends
    assert model._table_cache is None
