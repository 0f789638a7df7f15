#!/usr/bin/env bash
# The full soak (issues 15 and 27): build/bench/soak for 10,000 W1 steps on the CPU and 2,000 on vulkan:0 (skipped
# when there is no Vulkan device), each printing its memory table and whether RSS, the device's allocated and
# reserved bytes, the live tensor count and the open file descriptors stayed flat after warm-up.
# With `gpu` first: 10,000 W2 and 2,000 W3 steps on cuda:0 and on vulkan:0, and the driver's view of the
# process's device memory (nvidia-smi, sampled every 2 s) checked flat after the first tenth of the run too.
# Exits 1 when any run grew or failed.
# Usage: bench/soak.sh [gpu] [build-dir] [cpu-or-W2-steps] [vulkan-or-W3-steps]. CTest runs a short version.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=cpu
[ "${1:-}" = gpu ] && { mode=gpu; shift; }
build=${1:-build}
a=${2:-10000}
b=${3:-2000}
[ -x "$build/bench/soak" ] || { cmake -S . -B "$build" -G Ninja >/dev/null && ninja -C "$build" soak >/dev/null; } || exit 2
if [ $mode = cpu ]; then
  runs=("mlp cpu $a" "mlp vulkan:0 $b")
else
  runs=("cnn cuda:0 $a" "gpt cuda:0 $b" "cnn vulkan:0 $a" "gpt vulkan:0 $b")
fi
# The driver's memory for pid (MiB, nvidia-smi's used_memory of compute apps); empty without nvidia-smi.
driver_mib() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
  awk -F', *' -v p="$1" '$1 == p { s += $2 } END { if (s != "") print s }'; }
status=0
for run in "${runs[@]}"; do
  set -- $run
  echo "== $1 on $2, $3 steps ($(date -u +%H:%M:%S) UTC)"
  "$build/bench/soak" --model "$1" --device "$2" --steps "$3" &
  pid=$!
  samples=()
  while kill -0 $pid 2>/dev/null; do
    m=$(driver_mib $pid)
    [ -n "$m" ] && samples+=("$m")
    sleep 2
  done
  wait $pid
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
  n=${#samples[@]}
  if [ $n -ge 10 ]; then
    base=${samples[$((n / 10))]} top=$base
    for v in "${samples[@]:$((n / 10))}"; do [ "$v" -gt "$top" ] && top=$v; done
    verdict=flat
    [ $((top * 100)) -le $((base * 101)) ] || { verdict=GREW; status=1; }
    echo "soak $1 $2 driver memory: ${base} -> max ${top} MiB over $n samples after the first tenth: $verdict"
  fi
done
exit $status
