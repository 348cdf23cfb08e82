#!/usr/bin/env bash
# Create .venv (if missing), install the Python dependencies and build the Rust extension
# (optimised) into it. Idempotent; safe to run on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
python -m pip install -q "maturin>=1.5,<2" numpy scipy tqdm "scikit-learn>=1.4" pandas matplotlib pytest hypothesis psutil threadpoolctl mlxtend "dask[array,dataframe,distributed]" ruff
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo (Rust) is required: https://rustup.rs" >&2
  exit 1
fi
maturin develop --release -q
