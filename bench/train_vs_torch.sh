#!/usr/bin/env bash
# Training on CPU, Trident beside PyTorch in one run: W1 and W2 of WORKLOADS.md,
# `trident train` for EPOCHS epochs each, then the PyTorch twin for TWIN_EPOCHS.
# Epoch time is the steady state: the best of epochs 2..N (training steps only).
#   bench/train_vs_torch.sh [epochs=5] [twin_epochs=2] [build=build] [out=train-cpu-logs]
# Writes the logs to $out and prints one summary line per workload. TRIDENT_TWIN names another copy of the twin
# (default bench/torch_workloads.py, which is ../shared/anchors/torch_workloads.py plus flags).
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-5} twin_epochs=${2:-2} build=${3:-build} out=${4:-train-cpu-logs}
data=${TRIDENT_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
mkdir -p "$out"
echo "date $(date -u +%Y-%m-%dT%H:%MZ)  cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  threads $(nproc)"
for m in mlp cnn; do
  echo "load before trident $m: $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -f "$out/$m.csv"
  "$build/bin/trident" train --model "$m" --device cpu --epochs "$epochs" --data "$data" --log "$out/$m.csv" \
    --checkpoint "$out/trident-$m.safetensors" >"$out/$m.out" 2>"$out/$m.err"
  cat "$out/$m.out"
done
echo "load before torch: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "${TRIDENT_TWIN:-bench/torch_workloads.py}" "$data" cpu --epochs "$twin_epochs" >"$out/torch.jsonl" 2>"$out/torch.err"
cat "$out/torch.jsonl"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
for m in mlp cnn; do
  w=$([ $m = mlp ] && echo W1-mlp || echo W2-cnn)
  best=$(awk -F, 'NR > 2 && (b == "" || $6 < b) { b = $6 } END { print b }' "$out/$m.csv")
  acc=$(awk -F, 'END { print $5 }' "$out/$m.csv")
  python3 - "$out/torch.jsonl" "$w" "$best" "$acc" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"workload"' in l]
t = next(r for r in rows if r["workload"] == sys.argv[2])
best, acc = float(sys.argv[3]), float(sys.argv[4])
print(f"{sys.argv[2]}: trident best epoch {best:.2f} s, test acc {acc:.4f}; pytorch best epoch {t['best_epoch_s']:.2f} s "
      f"(epochs {t['epoch_s']}), test acc {t['test_acc']:.4f} after {t['epochs']}; ratio {best / t['best_epoch_s']:.2f}x")
EOF
done
