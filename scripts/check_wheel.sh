#!/usr/bin/env bash
# Build the release abi3 wheel and check it the way a user gets it: in a fresh virtual
# environment with no Rust toolchain on PATH, install the wheel (binary packages only, so
# nothing can be compiled), smoke-test it (import, fit, save/load, predict, the `bnpcore`
# command), then run the pytest suite from a temporary directory against the installed wheel
# (the checkout's python/ is never on sys.path).
#
# Not part of CI: the release build (fat LTO) takes several minutes. Run it before a release:
#
#   bash scripts/check_wheel.sh                   # whole suite
#   bash scripts/check_wheel.sh tests/estimators  # arguments go to pytest (paths under tests/)
#
# Environment: PYTHON (interpreter for both virtual environments, default python3),
# KEEP_WHEEL=DIR (copy the wheel there), PROFILE=ci (a quick build with the ci profile, to
# check this script itself; the default is the release profile).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bnpcore-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n== %s\n' "$*"; }

step "build the wheel (profile ${PROFILE:-release})"
"$PY" -m venv "$WORK/build"
"$WORK/build/bin/python" -m pip install -q "maturin>=1.5,<2"
if [ "${PROFILE:-release}" = release ]; then
  "$WORK/build/bin/maturin" build --release -o "$WORK/dist"
else
  "$WORK/build/bin/maturin" build --profile "$PROFILE" -o "$WORK/dist"
fi
WHEEL=$(ls "$WORK"/dist/bnpcore-*.whl)
echo "$WHEEL"
case "$(basename "$WHEEL")" in
  *-abi3-*) ;;
  *) echo "check_wheel: not an abi3 wheel: $WHEEL" >&2; exit 1 ;;
esac
if [ -n "${KEEP_WHEEL:-}" ]; then mkdir -p "$KEEP_WHEEL" && cp "$WHEEL" "$KEEP_WHEEL"/; fi

step "fresh virtual environment without Rust"
"$PY" -m venv "$WORK/venv"
# PATH without cargo/rustup, and no Rust environment variables
CLEAN_PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -e cargo -e rustup | paste -sd: -)
run() { env -u CARGO_HOME -u RUSTUP_HOME -u RUSTUP_TOOLCHAIN -u VIRTUAL_ENV -u PYTHONPATH PATH="$WORK/venv/bin:$CLEAN_PATH" "$@"; }
if run sh -c 'command -v cargo || command -v rustc'; then
  echo "check_wheel: a Rust toolchain is still on PATH" >&2
  exit 1
fi
run python -m pip install -q --upgrade pip
run python -m pip install -q --only-binary=:all: "$WHEEL[test]"

step "smoke test"
mkdir "$WORK/run"
cd "$WORK/run"
run python - <<'EOF'
import os, sys, sysconfig
import numpy as np
import bnpcore
site = sysconfig.get_paths()["purelib"]
assert bnpcore.__file__.startswith(site), f"bnpcore imported from {bnpcore.__file__}, not the installed wheel"
rng = np.random.default_rng(0)
X = np.concatenate([rng.normal(-5, 1, (200, 2)), rng.normal(5, 1, (200, 2))])
model = bnpcore.DPMixture(n_components=5, algorithm="memoized", n_batches=4, random_state=0).fit(X)
assert model.n_components_ == 2, model.n_components_
model.save("model.npz")
again = bnpcore.load("model.npz")
assert np.array_equal(again.predict(X), model.predict(X))
np.save("data.npy", X)
print(f"bnpcore {bnpcore.__version__} from {os.path.dirname(bnpcore.__file__)}: fit, save, load, predict ok")
EOF
run bnpcore fit data.npy --out cli.npz
run bnpcore info cli.npz
run bnpcore predict cli.npz data.npy --out labels.npy
run python -m bnpcore --version

step "test suite against the installed wheel"
cp -r "$ROOT/tests" "$WORK/run/tests"
cp "$ROOT/pyproject.toml" "$WORK/run/pyproject.toml"  # pytest settings ([tool.pytest.ini_options]) only
run python -m pytest -q -p no:cacheprovider "${@:-tests}"
echo "check_wheel: ok ($(basename "$WHEEL"))"
