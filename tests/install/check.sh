#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a
# consumer three times: with find_package(Trident) and with pkg-config against
# the install, and with pkg-config against the build tree itself.
set -euo pipefail
build=$1 src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/cmake/consumer"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs trident)
cc "$src/main.c" $flags -o "$tmp/pc-consumer"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc-consumer"
# the build tree's own trident.pc: no install, no LD_LIBRARY_PATH (it adds an rpath)
flags=$(PKG_CONFIG_PATH="$build" pkg-config --cflags --libs trident)
cc "$src/main.c" $flags -o "$tmp/pc-build-consumer"
"$tmp/pc-build-consumer"
