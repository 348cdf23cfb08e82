"""``verbose``: the values it accepts and the progress bar it draws."""

import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore.exceptions import ParameterError


def _X():
    return np.random.default_rng(0).standard_normal((60, 2))


@pytest.mark.parametrize("cls", [bnpcore.DPMixture, bnpcore.HDPHMM])
@pytest.mark.parametrize("bad", ["False", "yes", 0.5, [1], None, -1])
def test_verbose_refuses_values_that_are_neither_bool_nor_level(cls, bad):
    with pytest.raises(ParameterError, match="`verbose` must be"):
        cls(verbose=bad, max_laps=1).fit(_X())


@pytest.mark.parametrize("good", [False, True, 0, 1, 2, np.bool_(True), np.int64(1)])
def test_verbose_accepts_bools_and_integer_levels(good, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        bnpcore.DPMixture(verbose=good, max_laps=2, random_state=0).fit(_X())
    err = capsys.readouterr().err
    assert ("DPMixture" in err) == bool(good)


def _bars(err):
    """The states a progress bar drew (tqdm separates them by carriage returns)."""
    return [s.strip() for s in err.replace("\n", "\r").split("\r") if s.strip()]


@pytest.mark.parametrize(
    "fit",
    [
        lambda v: bnpcore.DPMixture(n_components=3, moves=(), max_laps=3, tol=0.0, verbose=v, random_state=0).fit(_X()),
        lambda v: bnpcore.DPMixture(verbose=v, random_state=0).partial_fit(_X()),
        lambda v: bnpcore.DPMixture(verbose=v, random_state=0).fit(iter([_X()[:30], _X()[30:]])),
        lambda v: bnpcore.HDPTopicModel(algorithm="truncation_free", max_laps=2, verbose=v, random_state=0).fit(
            np.random.default_rng(0).poisson(1.0, (20, 12))
        ),
    ],
    ids=["laps", "partial_fit", "stream", "truncation_free"],
)
def test_progress_bar_draws_a_lap_with_its_count(fit, capsys):
    # the postfix (ELBO, K) of a lap is drawn with the lap counted, not first on its own with the
    # previous count: in a log (non-TTY) that doubled every line, bypassing tqdm's rate limit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        fit(True)
    bars = _bars(capsys.readouterr().err)
    assert bars and any("K=" in s for s in bars)
    for s in bars:
        assert not (("| 0/" in s or ": 0batch" in s) and "K=" in s), s
