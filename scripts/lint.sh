#!/usr/bin/env bash
# Lint: rustfmt, clippy with warnings as errors, ruff. Run after scripts/setup.sh (needs .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
cargo fmt --all --check
cargo clippy --workspace --all-targets --profile ci -- -D warnings
ruff check python tests benches examples
echo "lint: ok"
