#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds a consumer four
# ways: find_package(Trident) from the install prefix and from the build tree,
# and pkg-config from each. Every program (and the installed CLI) runs with no
# LD_LIBRARY_PATH: the rpaths alone must find libtrident and its dependencies.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libtrident.so' | head -n 1)")
step() { echo "== $1"; }

step "installed CLI"
"$prefix/bin/trident" --version | grep -q "^  cpu  *loaded"
step "find_package from the install prefix"
cmake -S "$src" -B "$tmp/cmake-install" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cmake-install" >/dev/null
"$tmp/cmake-install/consumer"
step "find_package from the build tree"
cmake -S "$src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$build" >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
"$tmp/cmake-build/consumer"
if ! command -v pkg-config >/dev/null; then
  echo "skipped: the pkg-config routes (no pkg-config on this machine); the CMake routes passed"
  exit 77
fi
step "pkg-config from the install prefix"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs trident)
cc "$src/main.c" $flags -o "$tmp/pc-install-consumer"
"$tmp/pc-install-consumer"
step "pkg-config from the build tree"
flags=$(PKG_CONFIG_PATH="$build" pkg-config --cflags --libs trident)
cc "$src/main.c" $flags -o "$tmp/pc-build-consumer"
"$tmp/pc-build-consumer"
