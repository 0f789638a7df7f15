#!/usr/bin/env bash
# Runs every command of examples/custom_ops/README.md's sh blocks (the walk-through), from the source tree with
# the build tree given: `build/` in a command becomes BUILD_DIR. Fails on the first command that fails.
#   tests/test_custom_ops_readme.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"
n=0
while IFS= read -r cmd; do
  cmd=${cmd//build\//$build/}
  cmd=${cmd//--svg /--svg $tmp/}
  echo "\$ $cmd"
  if [[ $cmd == *vulkan:0* ]] && ! "$build/bin/trident" devices | grep -q '^vulkan:0'; then
    echo "  (no vulkan:0: skipped)"; continue
  fi
  bash -c "$cmd"
  n=$((n + 1))
done < <(awk '/^```sh$/ {on=1; next} /^```$/ {on=0} on' examples/custom_ops/README.md)
echo "ran $n commands"
[ "$n" -ge 3 ]
