#!/usr/bin/env bash
# Fused attention forward and forward+backward (T 1024, head dim 64, causal, batch 8, 12 heads), Trident beside
# PyTorch's scaled_dot_product_attention, in bf16 and fp32, on each device given:
#   bench/attention_vs_torch.sh [build=build] [devices="cuda:0 vulkan:0"] [python=python3]
# Prints the JSON lines of bench/bench_attention.c (fused, and composed from ops) and bench/torch_attention.py,
# then a table of Trident's fwd+bwd time over torch's (the issue's goal: <= 1.25, i.e. >= 0.8x torch's speed).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} devices=${2:-"cuda:0 vulkan:0"} py=${3:-python3}
log=$(mktemp)
for dt in bf16 f32; do
  "$py" bench/torch_attention.py --device cuda --dtype "$dt" --iters 10 | tee -a "$log"
  for dev in $devices; do
    if [[ $dev == cuda* ]]; then # our kernels and cuDNN's fused attention, one row each
      TRIDENT_CUDA_ATTN=own "$build/bench/bench_attention" --device "$dev" --dtype "$dt" --iters 10 | tee -a "$log"
      TRIDENT_CUDA_ATTN=cudnn "$build/bench/bench_attention" --device "$dev" --dtype "$dt" --iters 10 | tee -a "$log"
    fi
    "$build/bench/bench_attention" --device "$dev" --dtype "$dt" --iters 10 | tee -a "$log"
    "$build/bench/bench_attention" --device "$dev" --dtype "$dt" --composed 1 --iters 5 | tee -a "$log"
  done
done
"$py" - "$log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
torch = {r["dtype"]: r for r in rows if r["impl"].startswith("torch")}
print(f"{'impl':18} {'device':9} {'dtype':5} {'fwd ms':>8} {'fwd+bwd ms':>10} {'/ torch':>8}")
for r in rows:
    t = torch.get(r["dtype"])
    ratio = f"{r['fwd_bwd_ms'] / t['fwd_bwd_ms']:.2f}" if t else "n/a"
    print(f"{r['impl'][:18]:18} {r['device']:9} {r['dtype']:5} {r['fwd_ms']:8.3f} {r['fwd_bwd_ms']:10.3f} {ratio:>8}")
PY
rm -f "$log"
