#!/usr/bin/env bash
# Vulkan attention, one call: forward and forward+backward times of the tensor-core kernels
# (shaders/attention_coopmat*.comp), the scalar shader (attention.comp) and the attention composed from ops
# (matmul, softmax, matmul), causal, at W3's shape [64,6,256,64] and at [8,12,1024,64], in f16 and bf16:
#   bench/attention_vk.sh [build=build] [device=vulkan:0] [iters=20]
# Prints bench/bench_attention.c's JSON lines, then a table with each fused path's fwd+bwd over composed's.
# SHAPES="b h t d;..." replaces the two shapes; BF16_PATHS="native scaled" runs bf16's tensor-core row once per
# TRIDENT_VK_ATTN_BF16 setting (the native bf16 kernels or the scaled f16 ones; impl trident-coopmat-bf16<path>).
# TRIDENT_VK_ATTN=coopmat is an error where the device cannot take the tensor-core path (the row then says so).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} dev=${2:-vulkan:0} iters=${3:-20}
log=$(mktemp)
IFS=';' read -ra shapes <<<"${SHAPES:-64 6 256 64;8 12 1024 64}"
for shape in "${shapes[@]}"; do
  read -r b h t d <<<"$shape"
  for dt in f16 bf16; do
    args=(--device "$dev" --dtype "$dt" --batch "$b" --heads "$h" --seq "$t" --head-dim "$d" --causal 1)
    for path in coopmat scalar; do
      bps=("")
      [ "$dt/$path" = bf16/coopmat ] && [ -n "${BF16_PATHS:-}" ] && read -ra bps <<<"$BF16_PATHS"
      for bp in "${bps[@]}"; do
        TRIDENT_VK_ATTN_BF16=$bp TRIDENT_VK_ATTN=$path "$build/bench/bench_attention" "${args[@]}" --iters "$iters" |
          tee -a "$log"
      done
    done
    "$build/bench/bench_attention" "${args[@]}" --composed 1 --iters "$iters" | tee -a "$log"
  done
done
python3 - "$log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
key = lambda r: (tuple(r["shape"]), r["dtype"])
comp = {key(r): r for r in rows if "composed" in r["impl"]}
print(f"{'impl':24} {'dtype':5} {'shape':18} {'fwd ms':>8} {'fwd+bwd ms':>10} {'/ composed':>10}")
for r in rows:
    c = comp.get(key(r))
    ratio = f"{r['fwd_bwd_ms'] / c['fwd_bwd_ms']:.2f}" if c else "n/a"
    print(f"{r['impl']:24} {r['dtype']:5} {str(r['shape']):18} {r['fwd_ms']:8.3f} {r['fwd_bwd_ms']:10.3f} {ratio:>10}")
PY
rm -f "$log"
