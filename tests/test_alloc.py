"""The allocation protocol (``bnpcore.alloc.AllocModel``) on the two mixture allocations: every
method takes the summaries, agrees with the numpy reference, and the hyperparameters round-trip."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from bnpcore import _reference as ref
from bnpcore.alloc import ALLOC_KINDS, AllocModel, DPAlloc, FiniteAlloc, alloc_from_dict, make_alloc
from bnpcore.stats import SuffStats


def _stats(N):
    K = len(N)
    return SuffStats(np.asarray(N, dtype=float), np.zeros((K, 2)), np.zeros(K), 0.0, np.arange(K))


@pytest.mark.parametrize("cls", [DPAlloc, FiniteAlloc])
def test_mixture_allocations_follow_the_protocol(cls):
    alloc = cls(1.7)
    assert isinstance(alloc, AllocModel)
    N = np.array([40.0, 12.5, 3.0, 0.25])
    s = _stats(N)
    kind = alloc.name
    np.testing.assert_allclose(alloc.weights(s), ref.weights(kind, N, 1.7), rtol=1e-12)
    np.testing.assert_allclose(alloc.elbo(s), ref.elbo_alloc(kind, N, 1.7), rtol=1e-10)
    np.testing.assert_allclose(alloc.merge_delta(s), ref.merge_delta(kind, N, 1.7), rtol=1e-9, atol=1e-9)
    # summaries and bare counts give the same numbers (mixtures depend on N only)
    np.testing.assert_array_equal(alloc.e_log_pi(s), alloc.e_log_pi(N))
    assert alloc.core_for(s) is alloc.core


def test_global_step_gives_the_variational_parameters():
    N = np.array([40.0, 12.5, 3.0, 0.25])
    eta1, eta0 = ref.dp_eta(N, 1.7)
    g = DPAlloc(1.7).global_step(_stats(N))
    np.testing.assert_allclose(g["eta1"], eta1, rtol=1e-14)
    np.testing.assert_allclose(g["eta0"], eta0, rtol=1e-14)
    np.testing.assert_allclose(FiniteAlloc(1.7).global_step(_stats(N))["theta"], ref.finite_theta(N, 1.7), rtol=1e-14)


@pytest.mark.parametrize("name", sorted(ALLOC_KINDS))
def test_parameters_round_trip(name):
    alloc = make_alloc(name, gamma=2.5)
    again = alloc_from_dict(json.loads(json.dumps(alloc.to_dict())))
    assert type(again) is type(alloc) and again.gamma == 2.5
    back = pickle.loads(pickle.dumps(alloc))
    N = np.array([3.0, 2.0, 1.0])
    np.testing.assert_array_equal(back.e_log_pi(N), alloc.e_log_pi(N))
    with pytest.raises(ValueError, match="unknown allocation"):
        alloc_from_dict({"name": "pitman_yor", "gamma": 1.0})
