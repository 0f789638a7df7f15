#!/bin/sh
# Data-parallel trident train, the features of issue 28 end to end on the CPU
# (docs/distributed.md):
#   zero_2, zero_3     --zero 1 on 2 and 3 processes (mpirun) gives one process's losses at the same global batch
#   zero_resume        a 2-process ZeRO checkpoint has the unsharded layout and resumes on 1 and on 3 processes
#   bf16_grads         --ddp-grad-dtype bf16 follows one process within bf16's rounding
#
# usage: test_dist_zero.sh TRIDENT_BINARY CASE   (test_dist_zero.sh - --list prints the cases)
# Exit 0 pass, 1 fail, 77 skipped (no mpirun, no Fashion-MNIST).
set -u
CASE=$2
CASES="zero_2 zero_3 zero_resume bf16_grads"
[ "$CASE" = --list ] && { echo "$CASES" | tr ' ' '\n'; exit 0; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
DATA=${TRIDENT_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="mpirun --oversubscribe"

fail() { echo "FAIL $CASE: $*"; exit 1; }
skip() { echo "SKIP $CASE: $*"; exit 77; }
command -v mpirun >/dev/null 2>&1 || skip "mpirun not found (apt-get install openmpi-bin)"
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || skip "no Fashion-MNIST in $DATA"

# compare A.csv B.csv TOL [FROM]: the same steps (from step FROM of A on), every loss within TOL
compare() {
    /usr/bin/python3 - "$@" <<'PY' || fail "losses differ"
import csv, sys
frm = int(sys.argv[4]) if len(sys.argv) > 4 else 0
a = [r for r in csv.DictReader(open(sys.argv[1])) if int(r["step"]) > frm]
b = [r for r in csv.DictReader(open(sys.argv[2])) if int(r["step"]) > frm]
tol = float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, f"{len(a)} and {len(b)} steps"
assert [x["step"] for x in a] == [y["step"] for y in b], "different steps"
worst = max(abs(float(x["loss"]) - float(y["loss"])) for x, y in zip(a, b))
print(f"ok: {len(a)} steps, largest loss difference {worst:.3g} (tolerance {tol:g})")
assert worst <= tol, f"largest difference {worst:.3g} > {tol:g}"
PY
}

# same_layout A.st B.st: the same tensor names, dtypes and shapes
same_layout() {
    /usr/bin/python3 - "$@" <<'PY' || fail "checkpoint layouts differ"
import json, struct, sys
def layout(p):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return {k: (v["dtype"], v["shape"]) for k, v in h.items() if k != "__metadata__"}
a, b = layout(sys.argv[1]), layout(sys.argv[2])
assert a == b, f"{sorted(set(a.items()) ^ set(b.items()))[:4]}"
print(f"ok: {len(a)} tensors, the same names, dtypes and shapes")
PY
}

W1="train --model mlp --device cpu --limit 960 --epochs 2 --data $DATA"

# zero N: --zero 1 on N processes at 48 / N against one process at 48, 30 steps
zero() {
    n=$1
    "$BIN" $W1 --max-steps 30 --batch 48 --log-steps one.csv --checkpoint one.st >one.txt 2>&1 || { cat one.txt; fail "1 process"; }
    $MPIRUN -np "$n" "$BIN" $W1 --max-steps 30 --batch $((48 / n)) --zero 1 --log-steps z.csv --checkpoint z.st >z.txt 2>&1 ||
        { cat z.txt; fail "$n processes"; }
    compare one.csv z.csv 1e-5
    same_layout one.st z.st
}

case $CASE in
zero_2) zero 2 ;;
zero_3) zero 3 ;;
zero_resume)
    "$BIN" $W1 --max-steps 40 --batch 48 --log-steps full.csv --checkpoint full.st >o.txt 2>&1 || { cat o.txt; fail "uninterrupted"; }
    $MPIRUN -np 2 "$BIN" $W1 --max-steps 20 --batch 24 --zero 1 --checkpoint ck.st >o.txt 2>&1 || { cat o.txt; fail "first half"; }
    same_layout full.st ck.st
    cp ck.st ck2.st
    "$BIN" $W1 --max-steps 40 --batch 48 --resume --checkpoint ck.st --log-steps b1.csv >o.txt 2>&1 || { cat o.txt; fail "resume on 1"; }
    $MPIRUN -np 3 "$BIN" $W1 --max-steps 40 --batch 16 --zero 1 --resume --checkpoint ck2.st --log-steps b3.csv >o.txt 2>&1 ||
        { cat o.txt; fail "resume on 3"; }
    compare full.csv b1.csv 1e-5 20
    compare full.csv b3.csv 1e-5 20 ;;
bf16_grads)
    # gradients reduced in bf16: SGD (whose step scales with the gradient) follows one process within bf16's rounding
    set -- $W1 --max-steps 50 --optimizer sgd --lr 0.05
    "$BIN" "$@" --batch 32 --log-steps one.csv >one.txt 2>&1 || { cat one.txt; fail "1 process"; }
    "$BIN" launch --nproc 2 --backend mpi -- "$BIN" "$@" --batch 16 --ddp-grad-dtype bf16 --log-steps two.csv >two.txt 2>&1 ||
        { cat two.txt; fail "2 processes"; }
    $MPIRUN -np 2 "$BIN" "$@" --batch 16 --zero 1 --ddp-grad-dtype bf16 --log-steps z.csv >z.txt 2>&1 ||
        { cat z.txt; fail "2 processes, zero"; }
    compare one.csv two.csv 5e-3
    compare one.csv z.csv 5e-3
    "$BIN" $W1 --ddp-grad-dtype fp16 >e.txt 2>&1 && fail "--ddp-grad-dtype fp16 accepted"
    grep -q "^trident train: --ddp-grad-dtype 'fp16' is not fp32 or bf16$" e.txt || { cat e.txt; fail "message"; } ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
exit 0
