#!/usr/bin/env bash
# Lint: rustfmt, clippy with warnings as errors, rustdoc with warnings as errors (broken or
# private links in the core's documentation), ruff. Run after scripts/setup.sh (needs .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
cargo fmt --all --check
cargo clippy --workspace --all-targets --profile ci -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --profile ci --quiet
ruff check python tests benches examples
echo "lint: ok"
