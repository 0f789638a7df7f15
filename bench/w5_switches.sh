#!/usr/bin/env bash
# W5 (GPT-2 small) bf16 with each of its fusions' baseline switches, one process each on one device, so one call
# on the GPU machine times what each fusion saves (issue 22):
#   default                      everything on
#   TRIDENT_AUTOCAST_SHADOW=0    the weights cast every step (no bf16 shadows written by AdamW: src/core/shadow.c)
#   TRIDENT_GRAD_TWIN=0          the MLP node casts its f32 dy (no bf16 twin from ln1's backward)
#   TRIDENT_GRAD_TAKE=0          the residual stream's gradient summed by add passes (not taken into ln1's backward)
#   TRIDENT_CUDA_LN_BWD=k        each k of LN_BWD (the layer-norm backward's variants, cu_ops_norm.cu; CUDA only)
#   bench/w5_switches.sh [build=build] [device=cuda:0] [reps=5]
# Prints one line a setting: ms/step and peak MiB of the W5 bf16 row (trident bench's table), and the change
# against the default row. WORKLOAD=W3-gpt-mini times W3 instead.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} dev=${2:-cuda:0} reps=${3:-5} workload=${WORKLOAD:-W5-gpt2-small}
settings=("" TRIDENT_AUTOCAST_SHADOW=0 TRIDENT_GRAD_TWIN=0 TRIDENT_GRAD_TAKE=0)
for k in ${LN_BWD:-}; do settings+=("TRIDENT_CUDA_LN_BWD=$k"); done
base=
for s in "${settings[@]}"; do
  row=$(env $s "$build/bin/trident" bench --backends "$dev" --only "$workload" --amp bf16 --reps "$reps" 2>&1 |
    awk -v w="$workload" -v d="$dev" '$1 == w && $2 == "bfloat16-amp" && $3 == d {print $5, $10}' | head -1)
  read -r ms peak <<<"$row"
  [ -z "$base" ] && base=$ms
  printf '%-28s %8s ms/step  peak %6s MiB  %s\n' "${s:-default}" "${ms:-?}" "${peak:-?}" \
    "$(python3 -c "import sys; b, m = sys.argv[1:]; print(f'{(float(m) / float(b) - 1) * 100:+.1f}%')" "$base" "$ms" 2>/dev/null)"
done
