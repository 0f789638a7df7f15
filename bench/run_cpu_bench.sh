#!/usr/bin/env bash
# Runs bench_cpu (Trident vs OpenBLAS and memcpy) and torch_cpu_ops.py (PyTorch CPU) in one go and prints one
# table. Usage: bench/run_cpu_bench.sh [build-dir] [--quick]. Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
[ -x "$build/bench/bench_cpu" ] || { cmake -S . -B "$build" -G Ninja >/dev/null && ninja -C "$build" bench_cpu >/dev/null; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$build/bench/bench_cpu" "$@" | tee /dev/stderr | grep '^RESULT' >"$tmp"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 bench/torch_cpu_ops.py "$@" | grep '^RESULT' >>"$tmp"
else
  echo "(python3-torch not installed: no PyTorch column)" >&2
fi
echo
echo "date: $(date -u +%Y-%m-%d)  cpu: $(grep -m1 '^RESULT cpu_model' "$tmp" | cut -d' ' -f3-)  threads: trident $(awk '$2=="threads"{print $3}' "$tmp"), torch $(awk '$2=="torch_threads"{print $3}' "$tmp")  torch $(awk '$2=="torch_version"{print $3}' "$tmp")"
awk '
  $1 == "RESULT" && NF == 5 { v[$2 "," $3] = $4; u[$2] = $5; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
  END {
    copy = v["copy,memcpy"]
    printf "| %-12s | %-9s | %10s | %14s | %10s | %s |\n", "op", "unit", "Trident", "OpenBLAS/copy", "PyTorch", "Trident vs ref"
    printf "|--------------|-----------|------------|----------------|------------|----------------|\n"
    for (i = 0; i < n; i++) {
      op = order[i]; if (op == "copy") continue
      ref = (op ~ /^sgemm/) ? v[op ",openblas"] : copy
      ratio = (ref > 0 && v[op ",trident"] > 0) ? sprintf(op ~ /^sgemm/ ? "%.3fx" : "%.1f%% of copy", op ~ /^sgemm/ ? v[op ",trident"] / ref : 100 * v[op ",trident"] / ref) : "-"
      printf "| %-12s | %-9s | %10s | %14s | %10s | %14s |\n", op, u[op], v[op ",trident"], ref, (op ",torch" in v) ? v[op ",torch"] : "-", ratio
    }
    printf "| %-12s | %-9s | %10s | %14s | %10s | %14s |\n", "copy", "GB/s", "-", copy, "-", "-"
  }' "$tmp"
