#!/usr/bin/env bash
# Trident's CPU kernels (build/bench/cpu_kernels, w2_profile) beside PyTorch CPU (torch_w2_ops.py) for the
# same shapes, in one run, with the same thread count for both. Usage:
#   bench/cpuperf/run_cpuperf.sh [threads] [build-dir]
# Prints "name trident_ms torch_ms ratio" rows (ratio = Trident time / PyTorch time; < 1 is faster);
# w2_step is wall time, w2_step_cpu the process's CPU time (the steadier figure on a loaded machine).
# Trident's CPU backend runs OpenBLAS on one thread whatever OPENBLAS_NUM_THREADS says (cpu_backend.c);
# the variable is set for PyTorch's sake.
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=${1:-$(nproc)}
build=${2:-build}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "date $(date -u +%Y-%m-%dT%H:%MZ)  cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  threads $threads"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/cpu_kernels" | tee -a "$tmp"
/usr/bin/python3 bench/cpuperf/torch_w2_ops.py "$threads" | tee -a "$tmp"
"$build/bench/w2_profile" 10 | awk '$2 == "step" {print "TRIDENT w2_step", $3} $2 == "step_cpu" {print "TRIDENT w2_step_cpu", $3}' |
    tee -a "$tmp"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '$1 == "TRIDENT" { t[$2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
     $1 == "TORCH" && NF == 3 { p[$2] = $3 }
     END { for (i = 0; i < n; i++) { k = order[i]; if (k in p) printf "%-24s %9.3f %9.3f %6.2fx\n", k, t[k], p[k], t[k] / p[k] } }' "$tmp"
