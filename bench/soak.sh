#!/usr/bin/env bash
# The full soak (issue 15): build/bench/soak for 10,000 W1 steps on the CPU and 2,000 on vulkan:0 (skipped when
# there is no Vulkan device), each printing its memory table and whether RSS, the device's allocated and
# reserved bytes and the live tensor count stayed flat after warm-up. Exits 1 when any run grew or failed.
# Usage: bench/soak.sh [build-dir] [cpu-steps] [vulkan-steps]. CTest runs a short version (soak_cpu, soak_vulkan).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cpu_steps=${2:-10000}
vk_steps=${3:-2000}
[ -x "$build/bench/soak" ] || { cmake -S . -B "$build" -G Ninja >/dev/null && ninja -C "$build" soak >/dev/null; } || exit 2
status=0
for run in "cpu $cpu_steps" "vulkan:0 $vk_steps"; do
  set -- $run
  echo "== $1, $2 steps ($(date -u +%H:%M:%S) UTC)"
  "$build/bench/soak" --device "$1" --steps "$2"
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
done
exit $status
