#!/usr/bin/env bash
# Build bnpcore, fit a DP mixture to the 8x8 image patches bundled with scikit-learn, then an HDP
# topic model (toy bars) and a sticky HDP-HMM (toy sequences), each from one component.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
python examples/demo_patches.py "$@"
python examples/demo_families.py
