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
