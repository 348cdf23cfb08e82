"""SuffStats in parts: every container operation checked against summaries recomputed from the
responsibilities they summarise (so a wrong axis or merge rule cannot pass), including the
K x K transition tables of HDP-HMMs and the scalar per-batch fields of HDP topic models."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from bnpcore.stats import FIELDS, Field, Part, SuffStats, register_field
from hypothesis import given
from hypothesis import strategies as st

K, F, T = 5, 3, 40


def _entropy(r):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(r > 0, r * np.log(r), 0.0), axis=0)


def _summarize(r, xi, X, uids, n_seqs=2.0):
    """HMM-style summaries of node marginals ``r`` (T, K) and pair marginals ``xi`` (T-1, K, K)."""
    k = r.shape[1]
    extra = {
        "M0": r[0],
        "M": xi.sum(axis=0),
        "Hstart": _entropy(r[:1]),
        "Htable": _entropy(xi.reshape(len(xi), k * k)).reshape(k, k),
        "n_seqs": n_seqs,
    }
    return SuffStats(r.sum(axis=0), r.T @ X, _entropy(r), float(np.sum(X**2)), uids, extra)


def _random(seed=0, k=K):
    rng = np.random.default_rng(seed)
    r = rng.dirichlet(np.ones(k), size=T)
    xi = rng.dirichlet(np.ones(k * k), size=T - 1).reshape(T - 1, k, k)
    X = rng.normal(size=(T, F))
    return r, xi, X


def test_parts_hold_the_registered_fields():
    r, xi, X = _random()
    s = _summarize(r, xi, X, np.arange(K))
    assert set(s.obs) == {"N", "S", "h"}
    assert set(s.alloc) == {"M0", "M", "n_seqs"}
    assert set(s.entropy) == {"H", "Hstart", "Htable"}
    assert s["M"].shape == (K, K) and s.K == K
    assert set(s.extra) == {"M0", "M", "n_seqs", "Hstart", "Htable"}


def test_add_and_sub_are_summaries_of_disjoint_data():
    r, xi, X = _random(1)
    whole = _summarize(r, xi, X, np.arange(K), n_seqs=2.0)
    a = _summarize(r[:20], xi[:19], X[:20], np.arange(K), n_seqs=1.0)
    b = _summarize(r[20:], xi[19:], X[20:], np.arange(K), n_seqs=1.0)
    # pairs 0..18 in a, 19..38 (including the one linking the halves) in b
    total = a + b
    for name in ("N", "S", "M", "n_seqs"):
        np.testing.assert_allclose(total[name], whole[name], rtol=1e-12, atol=1e-12)
    assert total.h == pytest.approx(whole.h, rel=1e-12)
    back = total - b
    for name in total.field_names():
        np.testing.assert_allclose(back[name], a[name], rtol=1e-12, atol=1e-12)


def test_interpolate_and_scale_act_on_every_field():
    r, xi, X = _random(2)
    g = _summarize(r, xi, X, np.arange(K))
    b = _summarize(r[::-1], xi[::-1], X[::-1] * 2, np.arange(K), n_seqs=5.0)
    rho, s = 0.3, 7.0
    out = g.interpolate(b, rho, s)
    for name in g.field_names():
        np.testing.assert_array_equal(out[name], (1 - rho) * g[name] + (rho * s) * b[name])
    half = 0.5 * g
    for name in g.field_names():
        np.testing.assert_array_equal(half[name], 0.5 * np.asarray(g[name]))


def test_take_permutes_both_axes_of_tables():
    r, xi, X = _random(3)
    s = _summarize(r, xi, X, np.arange(10, 10 + K))
    order = np.array([3, 0, 4, 1, 2])
    t = s.take(order)
    ref = _summarize(r[:, order], xi[:, order][:, :, order], X, s.uids[order])
    np.testing.assert_array_equal(t.uids, s.uids[order])
    for name in ref.field_names():
        np.testing.assert_allclose(t[name], ref[name], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(t.positions([10, 13]), [1, 0])


def test_drop_removes_rows_and_columns():
    r, xi, X = _random(4)
    s = _summarize(r, xi, X, np.arange(K))
    d = s.drop([1, 3])
    keep = [0, 2, 4]
    np.testing.assert_array_equal(d["M"], s["M"][np.ix_(keep, keep)])
    np.testing.assert_array_equal(d["Htable"], s["Htable"][np.ix_(keep, keep)])
    np.testing.assert_array_equal(d.N, s.N[keep])
    assert d["n_seqs"] == s["n_seqs"] and d.h == s.h
    np.testing.assert_array_equal(d.uids, keep)


@pytest.mark.parametrize(("a", "b"), [(0, 1), (1, 4), (2, 3), (4, 1), (3, 0)])
def test_merge_equals_the_summaries_of_merged_responsibilities(a, b):
    r, xi, X = _random(5)
    s = _summarize(r, xi, X, np.arange(K))
    # merged responsibilities: column b added into column a, then removed (A maps K -> K-1)
    A = np.delete(np.eye(K), b, axis=1)
    A[b, a - (a > b)] = 1.0
    r2 = r @ A
    xi2 = np.einsum("tij,ik,jl->tkl", xi, A, A)
    ref = _summarize(r2, xi2, X, np.delete(np.arange(K), b))
    m = s.merge(a, b, ref.H[a - (a > b)], Hstart=ref["Hstart"][a - (a > b)], Htable=ref["Htable"])
    np.testing.assert_array_equal(m.uids, ref.uids)
    for name in ref.field_names():
        np.testing.assert_allclose(m[name], ref[name], rtol=1e-12, atol=1e-12, err_msg=name)


def test_merge_needs_the_value_of_nonlinear_fields():
    r, xi, X = _random(6)
    s = _summarize(r, xi, X, np.arange(K))
    with pytest.raises(ValueError, match="Hstart"):
        s.merge(0, 1, 0.0, Htable=np.zeros((K - 1, K - 1)))
    with pytest.raises(ValueError, match="no summary fields"):
        s.merge(0, 1, 0.0, Hstart=0.0, Htable=np.zeros((K - 1, K - 1)), bogus=1.0)


def test_append_pads_tables_and_takes_given_rows():
    r, xi, X = _random(7)
    s = _summarize(r, xi, X, np.arange(K))
    N2, S2, H2 = np.array([1.0, 2.0]), np.ones((2, F)), np.array([0.1, 0.2])
    out = s.append(N2, S2, H2, [7, 8])
    np.testing.assert_array_equal(out.uids, [0, 1, 2, 3, 4, 7, 8])
    np.testing.assert_array_equal(out.N, np.concatenate([s.N, N2]))
    np.testing.assert_array_equal(out["M"][:K, :K], s["M"])
    assert out["M"].shape == (K + 2, K + 2) and not out["M"][K:].any() and not out["M"][:, K:].any()
    np.testing.assert_array_equal(out["M0"], np.concatenate([s["M0"], [0.0, 0.0]]))
    table = np.arange((K + 2) ** 2, dtype=float).reshape(K + 2, K + 2)
    given = s.append(N2, S2, H2, [7, 8], M=table)
    np.testing.assert_array_equal(given["M"], table)
    # appending then dropping the new components restores the summaries
    back = out.drop([K, K + 1])
    for name in s.field_names():
        np.testing.assert_array_equal(back[name], s[name])


@pytest.mark.parametrize("drop", [[0], [2], [4], [1, 3]])
def test_append_with_drop_is_drop_then_append(drop):
    # the one-copy form of a birth's "drop the target, append the fresh clusters"
    r, xi, X = _random(8)
    s = _summarize(r, xi, X, np.arange(10, 10 + K))
    N2, S2, H2 = np.array([1.0, 2.0, 3.0]), np.arange(3.0 * F).reshape(3, F), np.array([0.1, 0.2, 0.3])
    k = K - len(drop) + 3
    table = np.arange(k * k, dtype=float).reshape(k, k)
    for kw in ({}, {"M": table}):
        want = s.drop(drop).append(N2, S2, H2, [7, 8, 9], **kw)
        got = s.append(N2, S2, H2, [7, 8, 9], drop=drop, **kw)
        np.testing.assert_array_equal(got.uids, want.uids)
        assert got.field_names() == want.field_names()
        for name in want.field_names():
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize(("positions", "drop"), [([1, 3], [0]), ([0, 4], [2]), ([2], [4]), ([0, 1, 2], [3])])
def test_replace_columns_with_drop_is_replace_then_drop(positions, drop):
    # the one-copy form of a delete's candidate: absorbing columns replaced, the target removed
    from bnpcore.moves._base import replace_columns

    r, xi, X = _random(9)
    s = _summarize(r, xi, X, np.arange(K))
    m = len(positions)
    N2, S2, H2 = np.arange(1.0, m + 1), -np.arange(m * F, dtype=float).reshape(m, F), np.full(m, 0.5)
    want = replace_columns(s, positions, N2, S2, H2).drop(drop)
    got = replace_columns(s, positions, N2, S2, H2, drop=drop)
    np.testing.assert_array_equal(got.uids, want.uids)
    for name in want.field_names():
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert not np.shares_memory(got.N, s.N) and not np.shares_memory(got.S, s.S)


def test_shallow_copy_shares_arrays_not_fields():
    r, xi, X = _random(10)
    s = _summarize(r, xi, X, np.arange(K))
    c = s.shallow_copy()
    assert c.S is s.S and c["M"] is s["M"]
    c.N = np.zeros(K)
    c["n_seqs"] = 9.0
    assert s.N.sum() > 0 and s["n_seqs"] == 2.0


@given(st.integers(2, 9), st.integers(1, 4), st.data())
def test_component_operations_against_their_definitions(k, f, data):
    # random sizes, positions and values: merge, drop + append and replace + drop against the
    # obvious constructions (scatter-add then delete; take; concatenate; copy and assign)
    from bnpcore.moves._base import replace_columns

    seed = data.draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    r = rng.dirichlet(np.ones(k), size=T)
    xi = rng.dirichlet(np.ones(k * k), size=T - 1).reshape(T - 1, k, k)
    X = rng.normal(size=(T, f))
    s = _summarize(r, xi, X, np.arange(100, 100 + k))
    a, b = data.draw(st.lists(st.integers(0, k - 1), min_size=2, max_size=2, unique=True))
    keep = np.delete(np.arange(k), b)
    at = a - (b < a)
    H, Hs, Ht = rng.normal(), rng.normal(), rng.normal(size=(k - 1, k - 1))
    m = s.merge(a, b, H, Hstart=Hs, Htable=Ht)
    np.testing.assert_array_equal(m.uids, s.uids[keep])
    for name in ("N", "S", "M0"):
        v = np.array(s[name], dtype=float)
        v[a] += v[b]
        np.testing.assert_array_equal(m[name], v[keep], err_msg=name)
    M = np.array(s["M"], dtype=float)
    M[a] += M[b]
    M[:, a] += M[:, b]
    np.testing.assert_array_equal(m["M"], M[np.ix_(keep, keep)])
    assert m.H[at] == H and m["Hstart"][at] == Hs and np.array_equal(m["Htable"], Ht)
    np.testing.assert_array_equal(np.delete(m.H, at), np.delete(s.H[keep], at))
    assert m.h == s.h and m["n_seqs"] == s["n_seqs"]

    drop = sorted(data.draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=k - 1, unique=True)))
    kept = np.setdiff1d(np.arange(k), drop)
    n_new = data.draw(st.integers(1, 3))
    N2, S2, H2 = rng.random(n_new), rng.normal(size=(n_new, f)), rng.random(n_new)
    got = s.append(N2, S2, H2, np.arange(n_new), drop=drop)
    np.testing.assert_array_equal(got.uids, np.r_[s.uids[kept], np.arange(n_new)])
    np.testing.assert_array_equal(got.N, np.r_[s.N[kept], N2])
    np.testing.assert_array_equal(got.S, np.r_[s.S[kept], S2])
    np.testing.assert_array_equal(got["M0"], np.r_[s["M0"][kept], np.zeros(n_new)])
    grown = np.zeros((kept.size + n_new,) * 2)
    grown[: kept.size, : kept.size] = s["M"][np.ix_(kept, kept)]
    np.testing.assert_array_equal(got["M"], grown)

    pos = data.draw(st.lists(st.sampled_from(kept.tolist()), min_size=1, max_size=kept.size, unique=True))
    N3, S3, H3 = rng.random(len(pos)), rng.normal(size=(len(pos), f)), rng.random(len(pos))
    got = replace_columns(s, pos, N3, S3, H3, drop=drop)
    want_N, want_S, want_H = s.N.copy(), s.S.copy(), s.H.copy()
    want_N[pos], want_S[pos], want_H[pos] = N3, S3, H3
    np.testing.assert_array_equal(got.uids, s.uids[kept])
    np.testing.assert_array_equal(got.N, want_N[kept])
    np.testing.assert_array_equal(got.S, want_S[kept])
    np.testing.assert_array_equal(got.H, want_H[kept])
    np.testing.assert_array_equal(got["M"], s["M"][np.ix_(kept, kept)])


def test_topic_model_fields_follow_their_rules():
    rng = np.random.default_rng(8)
    s = SuffStats(
        rng.random(K), rng.random((K, 6)), rng.random(K), 1.5, np.arange(K),
        {"D": 3.0, "P": rng.random(K), "P_rem": 0.2, "Q0": 0.1, "Q": rng.random(K), "Q_rem": 0.4},
    )
    assert set(s.alloc) == {"D", "P", "P_rem", "Q0", "Q", "Q_rem"}
    t = s.take([4, 3, 2, 1, 0])
    np.testing.assert_array_equal(t["P"], s["P"][::-1])
    assert t["D"] == 3.0 and t["P_rem"] == 0.2
    with pytest.raises(ValueError, match="'P'"):
        s.merge(0, 1, 0.0)
    m = s.merge(0, 1, 0.5, P=9.0, P_rem=0.3, Q0=0.0, Q=8.0, Q_rem=0.5)
    assert m["P"][0] == 9.0 and m["Q"][0] == 8.0 and m["P_rem"] == 0.3 and m["D"] == 3.0
    np.testing.assert_array_equal(m["P"][1:], s["P"][2:])
    assert (s + s)["D"] == 6.0


def test_uids_and_fields_must_match():
    r, xi, X = _random(9)
    s = _summarize(r, xi, X, np.arange(K))
    with pytest.raises(ValueError, match="uids"):
        _ = s + s.take(np.arange(K)[::-1])
    plain = SuffStats(s.N, s.S, s.H, s.h, s.uids)
    with pytest.raises(ValueError, match="different fields"):
        _ = s + plain


def test_registry():
    with pytest.raises(ValueError, match="unknown summary field"):
        SuffStats(np.zeros(1), np.zeros((1, 1)), np.zeros(1), 0.0, [0], {"not_registered": 1.0})
    with pytest.raises(ValueError, match="already registered"):
        register_field("M", Field("alloc", 1))
    register_field("M", FIELDS["M"])  # the same declaration again is fine
    with pytest.raises(ValueError, match="axes"):
        Field("alloc", 3)
    # a field known only to this summary (not registered), with its own declaration
    own = Part({"W": np.arange(4.0).reshape(2, 2)}, fields={"W": Field("alloc", 2)})
    obs = Part({"N": np.ones(2), "S": np.ones((2, 1)), "h": 0.0})
    s = SuffStats.from_parts([0, 1], obs, alloc=own)
    np.testing.assert_array_equal(s.take([1, 0])["W"], [[3.0, 2.0], [1.0, 0.0]])
    np.testing.assert_array_equal(s.merge(0, 1)["W"], [[6.0]])
    with pytest.raises(ValueError, match="belongs to"):
        SuffStats.from_parts([0, 1], obs, entropy=own)
    with pytest.raises(ValueError, match="counts"):
        SuffStats.from_parts([0, 1], own)


def test_copy_is_deep_and_pickle_round_trips():
    r, xi, X = _random(10)
    s = _summarize(r, xi, X, np.arange(K))
    c = s.copy()
    c["M"][0, 0] += 1.0
    c.N[0] += 1.0
    assert c["M"][0, 0] != s["M"][0, 0] and c.N[0] != s.N[0]
    p = pickle.loads(pickle.dumps(s))
    for name in s.field_names():
        np.testing.assert_array_equal(p[name], s[name])
    np.testing.assert_array_equal(p.uids, s.uids)
