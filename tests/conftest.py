"""pytest configuration: shared helpers on ``sys.path``, the ``make_data`` fixture, the
hypothesis profiles and the ``slow`` marker (see README, "Tests and benchmarks")."""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))  # `from _helpers import ...` from every test folder

from _helpers import synthetic_data

# "ci": derandomized with explicit example counts, so a failure reproduces on the next run;
# "dev" (default locally): hypothesis's usual random exploration. scripts/test.sh selects "ci".
settings.register_profile(
    "ci", derandomize=True, max_examples=100, deadline=None, database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("BNPCORE_HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def make_data():
    return synthetic_data
