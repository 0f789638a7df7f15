#!/bin/sh
# pip install ./python as the README says, into a throwaway venv (with the system's site-packages: Debian's torch
# and numpy), from a copy of python/ (pip builds in the source tree), then run the README example test there
# without PYTHONPATH: the installed package is the one imported.
# Usage: pip_install.sh PYTHON SOURCE_DIR BUILD_DIR
set -eu
py=$1 src=$2 build=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv --system-site-packages --without-pip "$tmp/venv"
cp -r "$src/python" "$tmp/python"
rm -rf "$tmp/python/build" "$tmp/python"/*.egg-info
PKG_CONFIG_PATH=$build "$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps "$tmp/python"
cd "$tmp"
"$tmp/venv/bin/python" -c 'import trident, sys; assert trident.__file__.startswith(sys.prefix), trident.__file__'
TRIDENT_README="$src/README.md" "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests/test_readme.py"
