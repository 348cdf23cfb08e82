"""converged_ / n_iter_ and seeds across checkpoints, interrupted fits and SeedSequence seeds."""

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore import DPMixture, HDPTopicModel
from bnpcore.datasets import make_bars, make_gaussian_mixture
from bnpcore.exceptions import ConvergenceWarning


@pytest.fixture(scope="module")
def X():
    return make_gaussian_mixture(n_samples=600, n_features=2, n_components=3, random_state=0)[0]


def test_checkpoints_record_how_the_run_stands(X, tmp_path):
    """A checkpoint written during the run says "not converged, this many laps"; the last one
    says how the run ended, so a run killed after converging is known to be finished."""
    path = tmp_path / "c.npz"
    seen = []

    def look(est, info):
        if path.exists():
            back = bnpcore.load(path)
            seen.append((info["lap"], back.converged_, back.n_iter_))

    m = DPMixture(random_state=0, checkpoint_path=str(path), callback=look).fit(X)
    assert m.converged_ and m.n_iter_ >= 3
    # the checkpoint read at lap t is the one written after lap t - 1
    assert seen and all(conv is False and n == lap - 1 for lap, conv, n in seen)
    final = bnpcore.load(path)
    assert final.converged_ is True and final.n_iter_ == m.n_iter_
    np.testing.assert_array_equal(final.history_["elbo"], m.history_["elbo"])


def test_an_interrupted_fit_reports_the_laps_it_completed(X):
    m = DPMixture(random_state=0, max_laps=30).fit(X)
    assert m.converged_
    laps = len(m.history_["lap"])

    def boom(est, info):
        raise KeyboardInterrupt

    m.set_params(warm_start=True, callback=boom)
    with pytest.raises(KeyboardInterrupt):
        m.fit(X)
    assert m.converged_ is False and m.n_iter_ == 1 and len(m.history_["lap"]) == laps + 1


@pytest.mark.parametrize("cls", [DPMixture, HDPTopicModel])
def test_a_seed_sequence_seeds_every_fit_alike_and_is_not_changed(X, cls):
    data = X if cls is DPMixture else make_bars(n_docs=150, random_state=0)[0]
    ss = np.random.SeedSequence(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = cls(random_state=ss, max_laps=4).fit(data)
        b = cls(random_state=ss, max_laps=4).fit(data)
        c = cls(random_state=7, max_laps=4).fit(data)
    assert ss.n_children_spawned == 0
    np.testing.assert_array_equal(a.history_["elbo"], b.history_["elbo"])
    np.testing.assert_array_equal(a.history_["elbo"], c.history_["elbo"])  # as the int it was made from
