"""ELBO traces of a fixed set of fits equal the recorded ones (to 1e-9 relative).

The fixture was recorded before the engine was generalised to three model families; a refactor
that changes any number here changed the behaviour of the DP or finite mixtures."""

import json
import pathlib

import numpy as np
import pytest
from _fits import case_id, cases, run

FIXTURE = json.loads(pathlib.Path(__file__).with_name("elbo_traces.json").read_text())


def test_fixture_covers_every_case():
    assert sorted(FIXTURE) == sorted(case_id(c) for c in cases())


@pytest.mark.parametrize("case", cases(), ids=case_id)
def test_trace_unchanged(case):
    want = FIXTURE[case_id(case)]
    got = run(case)
    assert got["n_components"] == want["n_components"]
    assert got["n_accepted"] == want["n_accepted"]
    assert len(got["elbo"]) == len(want["elbo"])
    np.testing.assert_allclose(got["elbo"], want["elbo"], rtol=1e-9, atol=0)
