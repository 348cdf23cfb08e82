#!/usr/bin/env bash
# Run every test: the pure-Rust core (cargo test, no Python) and the Python suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
cargo test -p bnpcore --profile ci
python -m pytest -q -p no:cacheprovider "$@"
