#!/usr/bin/env bash
# Build bnpcore and fit a DP mixture to the 8x8 image patches bundled with scikit-learn.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
python examples/demo_patches.py "$@"
