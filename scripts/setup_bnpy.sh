#!/usr/bin/env bash
# Create a Python environment with BNPy 0.1.7 for benches/bench_bnpy.py.
#
# Usage: scripts/setup_bnpy.sh [VENV]        (default: .bnpy-venv in the repository, gitignored)
#
# BNPy 0.1.7 (PyPI, 2020) needs NumPy < 1.24 (it uses np.float, np.bool8), so it gets its own
# virtual environment on Python 3.11 (the newest Python with NumPy 1.23 wheels; set PYTHON to
# choose the interpreter). Its sdist ships Cython-generated .c files made for an old Python:
# they are deleted so that Cython < 3 regenerates them. Its C++ extensions are built only when
# Eigen (EIGENPATH) and, for the topic-model ones, Boost.Math (BOOSTMATHPATH) headers are
# found; libeigen3-dev and libboost-dev are installed through apt-get when they are missing and
# apt-get can be used. Both are needed for L-sparse mixtures: BNPy's LibSparseResp loads
# libsparsemix *and* libsparsetopics in one try block, and without either one it marks the
# whole library unavailable (nnzPerRowLP > 0 then fails with "Cannot find library
# libsparsemix.so"). BNPy loads these libraries through ctypes as `<name>.so`, while
# setuptools names them `<name>.cpython-311-x86_64-linux-gnu.so`, so a symlink with the name
# BNPy looks for is added next to each. One of them needs -Wno-narrowing with a current g++.
# Nothing in BNPy's code is changed.
#
# Idempotent: an existing environment in which `import bnpy` works and BNPy's L-sparse library
# loads is left as it is (pass --force to reinstall BNPy into it).
set -euo pipefail

FORCE=0
ARGS=()
for a in "$@"; do
    case "$a" in
        --force) FORCE=1 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) ARGS+=("$a") ;;
    esac
done
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(realpath -m "${ARGS[0]:-$REPO/.bnpy-venv}")"  # absolute: the checks run from /
PYTHON="${PYTHON:-python3.11}"
BNPY_VERSION=0.1.7
EIGEN_DIR="${EIGENPATH:-/usr/include/eigen3}"
BOOST_DIR="${BOOSTMATHPATH:-/usr/include}"
# Versions known to work together with BNPy 0.1.7 on Python 3.11. matplotlib is required, not
# optional: the memoized algorithm with moves and the move planners import bnpy.viz, which
# imports matplotlib.
PINS=(
    "numpy==1.23.5" "scipy==1.10.1" "pandas==1.5.3" "scikit-learn==1.2.2" "Cython==0.29.37"
    "joblib==1.6.0" "memory_profiler==0.61.0" "munkres==1.0.12" "numexpr==2.14.1" "psutil==7.2.2"
    "six==1.17.0" "matplotlib==3.10.9" "threadpoolctl==3.8.0" "setuptools<70" "wheel"
)

log() { printf '[setup_bnpy] %s\n' "$*"; }

bnpy_imports() {
    # import from a neutral directory so that nothing in the current one shadows the package
    [ -x "$VENV/bin/python" ] && (cd / && "$VENV/bin/python" -c "import bnpy" >/dev/null 2>&1)
}
sparse_lib_loads() {
    (cd / && "$VENV/bin/python" -c "
import sys, bnpy
from bnpy.util.lib.sparseResp import LibSparseResp
sys.exit(0 if LibSparseResp.hasEigenLibReady else 1)" >/dev/null 2>&1)
}

if [ "$FORCE" = 0 ] && bnpy_imports && sparse_lib_loads; then
    log "BNPy already works in $VENV (use --force to reinstall)"
    exit 0
fi

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "error: $PYTHON not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
    exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV with $("$PYTHON" -V 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

log "installing BNPy's dependencies (pinned)"
"${PIP[@]}" install -q "${PINS[@]}"

apt_install() {  # apt_install PACKAGE: as root, or through passwordless sudo; never prompts
    local sudo=()
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || return 1
        sudo=(sudo -n)
    fi
    command -v apt-get >/dev/null 2>&1 || return 1
    log "installing $1 with apt-get"
    "${sudo[@]}" apt-get install -y -q "$1" >/dev/null 2>&1 \
        || { "${sudo[@]}" apt-get update -q >/dev/null 2>&1 && "${sudo[@]}" apt-get install -y -q "$1" >/dev/null; }
}
[ -f "$EIGEN_DIR/Eigen/Dense" ] || apt_install libeigen3-dev || true
[ -f "$BOOST_DIR/boost/math/special_functions/digamma.hpp" ] || apt_install libboost-dev || true
if [ -f "$EIGEN_DIR/Eigen/Dense" ]; then
    export EIGENPATH="$EIGEN_DIR"
else
    log "WARNING: Eigen not found at $EIGEN_DIR (set EIGENPATH): BNPy's C++ extensions will not be built"
    unset EIGENPATH || true
fi
if [ -f "$BOOST_DIR/boost/math/special_functions/digamma.hpp" ]; then
    export BOOSTMATHPATH="$BOOST_DIR"
    # fastexp.h (libsparsetopicsmanydocs) narrows constants inside braces, an error for current
    # g++ unless this warning is switched off
    export CFLAGS="${CFLAGS:-} -Wno-narrowing"
else
    log "WARNING: Boost.Math not found under $BOOST_DIR (set BOOSTMATHPATH): without libsparsetopics"
    log "         BNPy's L-sparse runs (nnzPerRowLP > 0) fail"
    unset BOOSTMATHPATH || true
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log "downloading the bnpy $BNPY_VERSION sdist"
"${PIP[@]}" download -q --no-deps --no-binary :all: -d "$WORK" "bnpy==$BNPY_VERSION"
tar -xzf "$WORK"/bnpy-"$BNPY_VERSION".tar.gz -C "$WORK"
SRC="$WORK/bnpy-$BNPY_VERSION"
# stale generated files: C sources of the Cython modules (regenerated from the .pyx) and build/
find "$SRC/bnpy" -name '*.pyx' | while read -r pyx; do rm -f "${pyx%.pyx}.c"; done
rm -rf "$SRC/build"

log "building and installing bnpy $BNPY_VERSION (Cython and C++ extensions; takes a few minutes)"
(cd "$SRC" && "${PIP[@]}" install -q --no-build-isolation --no-deps .)

SITE="$(cd / && "$VENV/bin/python" -c 'import os, sysconfig; print(sysconfig.get_paths()["purelib"])')/bnpy"
for built in $(find "$SITE" -name 'lib*.cpython-*.so'); do
    link="${built%%.cpython-*}.so"
    if [ ! -e "$link" ]; then
        ln -s "$(basename "$built")" "$link"
        log "linked ${link#"$SITE"/} -> $(basename "$built")"
    fi
done

if ! bnpy_imports; then
    (cd / && "$VENV/bin/python" -c "import bnpy") || true
    echo "error: BNPy does not import in $VENV (see above)" >&2
    exit 1
fi
if sparse_lib_loads; then
    log "done: $VENV/bin/python imports bnpy $BNPY_VERSION with its L-sparse library"
else
    log "done, but WITHOUT BNPy's L-sparse library (Eigen or Boost missing): nnzPerRowLP > 0 will fail"
fi
log "run: python benches/bench_bnpy.py --bnpy-python $VENV/bin/python"
