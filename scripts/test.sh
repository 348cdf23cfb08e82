#!/usr/bin/env bash
# Run every test: the pure-Rust core (cargo test, no Python) and the Python suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
cargo test -p bnpcore --profile ci
# -m "": every test, including those marked slow (a plain local `pytest` skips them, see pyproject.toml);
# the "ci" hypothesis profile is derandomized, so a failure reproduces on the next run
BNPCORE_HYPOTHESIS_PROFILE=ci python -m pytest -q -p no:cacheprovider -m "" "$@"
