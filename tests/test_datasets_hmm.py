"""bnpcore.datasets.make_sticky_hmm: shapes, seeding, and that the states follow the stated chain."""

import importlib.util

import numpy as np
import pytest
from bnpcore.datasets import make_sticky_hmm


def test_toy_matches_the_thesis_description():
    X, lengths, z, params = make_sticky_hmm(random_state=0, return_params=True)
    assert X.shape == (32_000, 2) and lengths.tolist() == [1000] * 32 and z.shape == (32_000,)
    starts = z[np.concatenate([[0], np.cumsum(lengths)[:-1]])]
    assert np.array_equal(starts, np.arange(32) % 8)
    # only self-transitions and k -> k+1 (mod 8) inside sequences
    zz = z.reshape(32, 1000)
    moves = zz[:, 1:] != zz[:, :-1]
    assert np.all((zz[:, 1:][moves] - zz[:, :-1][moves]) % 8 == 1)
    assert 0 < moves.sum() < 32 * 999 * 0.01
    resid = X - params["means"][z]
    assert abs(resid.std() - 1.0) < 0.02


def test_ar_variant_and_seeding():
    X, lengths, z, params = make_sticky_hmm("ar", n_seqs=6, seq_len=300, random_state=1, return_params=True)
    assert X.shape == (1800, 3) and lengths.tolist() == [300] * 6 and z.max() < 13
    assert np.all(np.abs(np.linalg.eigvals(params["A"])).max(axis=1) <= 0.95 + 1e-9)
    # residuals of the true regression have the stated noise level
    prev = np.roll(X, 1, axis=0)
    inner = np.ones(len(X), dtype=bool)
    inner[::300] = False
    res = X[inner] - np.einsum("nij,nj->ni", params["A"][z[inner]], prev[inner])
    assert abs(res.std() - params["noise_std"]) < 0.03
    X2, _, z2 = make_sticky_hmm("ar", n_seqs=6, seq_len=300, random_state=1)
    assert np.array_equal(X, X2) and np.array_equal(z, z2)
    with pytest.raises(ValueError, match="variant"):
        make_sticky_hmm("hmm")


# ----------------------------------------------------------------------------- .ts sequence sets
_TS = """# a comment
@problemName Toy
@univariate false
@dimensions 2
@equalLength false
@classLabel true a b
@data
1.0,2.0,3.0:4.0,5.0,6.0:a
0.5,?:1.5,2.5:b
"""


def test_read_ts(tmp_path):
    from bnpcore.datasets import read_ts

    p = tmp_path / "toy.ts"
    p.write_text(_TS)
    series, labels = read_ts(p)
    assert labels == ["a", "b"]
    assert np.array_equal(series[0], [[1, 4], [2, 5], [3, 6]])
    assert series[1].shape == (2, 2) and np.isnan(series[1][1, 0])
    bad = tmp_path / "bad.ts"
    bad.write_text(_TS.replace("0.5,?:1.5,2.5:b", "0.5:1.5,2.5:b"))
    with pytest.raises(ValueError, match="different lengths"):
        read_ts(bad)
    bad.write_text(_TS.replace("@dimensions 2", "@dimensions 3"))
    with pytest.raises(ValueError, match="dimensions"):
        read_ts(bad)


_HAS_SKTIME = importlib.util.find_spec("sktime") is not None


@pytest.mark.skipif(not _HAS_SKTIME, reason="sktime (which ships the BasicMotions and JapaneseVowels files) is not installed")
def test_sktime_sequence_sets():
    from bnpcore.datasets import load_basic_motions, load_japanese_vowels

    X, lengths, labels = load_basic_motions()
    assert X.shape == (8000, 6) and lengths.tolist() == [100] * 80 and len(set(labels)) == 4
    X, lengths, labels = load_japanese_vowels("train")
    assert X.shape[1] == 12 and lengths.size == 270 and lengths.sum() == X.shape[0] and 7 <= lengths.min() <= lengths.max() <= 29
    with pytest.raises(ValueError, match="split"):
        load_japanese_vowels("validation")


@pytest.mark.skipif(_HAS_SKTIME, reason="checks the message when sktime is absent")
def test_sktime_sets_need_sktime():
    from bnpcore.datasets import load_basic_motions

    with pytest.raises(ImportError, match="sktime"):
        load_basic_motions()
