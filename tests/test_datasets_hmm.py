"""bnpcore.datasets.make_sticky_hmm: shapes, seeding, and that the states follow the stated chain."""

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
