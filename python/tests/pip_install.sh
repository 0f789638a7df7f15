#!/bin/sh
# pip install ./python as the README says (no flags, no prebuilt library: the wheel builds the C library with
# CMake through scikit-build-core, out of tree) into a throwaway venv with the system's site-packages (Debian's
# torch and numpy), then run the README example test there without PYTHONPATH: the installed package is the one
# imported. The checkout must stay clean. Exit 77 (skipped) when PyPI, where pip gets scikit-build-core, is out
# of reach. Usage: pip_install.sh PYTHON SOURCE_DIR [TRIDENT_CMAKE_ARGS]
# (the build's backend choices, so the test builds what the surrounding build does; CCACHE_* and a ccache launcher
# in the environment's CMAKE_ARGS speed it up)
set -eu
py=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv --system-site-packages --without-pip "$tmp/venv"
# (Python's own bytecode cache of build_backend.py, python/__pycache__, is not counted: git ignores it)
state() { git -C "$src" status --porcelain --ignored python 2>/dev/null | grep -v __pycache__ || true; }
before=$(state)
if ! TRIDENT_CMAKE_ARGS="${3:-}" "$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-deps "$src/python" >"$tmp/log" 2>&1; then
  cat "$tmp/log"
  if grep -qE "No matching distribution found for scikit-build-core|Failed to establish a new connection" "$tmp/log"
  then
    echo "pip_install.sh: PyPI is out of reach (scikit-build-core): skipped"
    exit 77
  fi
  exit 1
fi
after=$(state)
if [ "$before" != "$after" ]; then
  echo "pip_install.sh: pip install left files in the checkout:"
  echo "$after"
  exit 1
fi
cd "$tmp"
"$tmp/venv/bin/python" -c 'import trident, sys; assert trident.__file__.startswith(sys.prefix), trident.__file__
print(trident.__version__, trident.devices())'
TRIDENT_README="$src/README.md" "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests/test_readme.py"
