#!/bin/sh
# Data-parallel trident train, the features of issue 28 end to end on the CPU
# (docs/distributed.md):
#   zero_2, zero_3     --zero 1 on 2 and 3 processes (mpirun) gives one process's losses at the same global batch
#   zero_resume        a 2-process ZeRO checkpoint has the unsharded layout and resumes on 1 and on 3 processes
#   bf16_grads         --ddp-grad-dtype bf16 follows one process within bf16's rounding
#   bench_ddp          trident bench --ddp --quick on 1 and 2 CPU processes (mpi, and tcp as Vulkan's runs use), W3 and
#                      W5 under bf16 autocast, DDP and ZeRO-1, fp32 and bf16 buckets: every row measured, ZeRO's
#                      optimizer state about half of DDP's, and the PyTorch twin's rows where torch is installed
#   bench_ddp_vulkan   the same on vulkan:0 (both ranks on it, the tcp backend's host staging): DDP and ZeRO-1 rows
#
# usage: test_dist_zero.sh TRIDENT_BINARY CASE   (test_dist_zero.sh - --list prints the cases)
# Exit 0 pass, 1 fail, 77 skipped (no mpirun, no Fashion-MNIST).
set -u
CASE=$2
CASES="zero_2 zero_3 zero_resume bf16_grads bench_ddp bench_ddp_vulkan"
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
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || [ "${CASE#bench_ddp}" != "$CASE" ] || skip "no Fashion-MNIST in $DATA"

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
bench_ddp)
    twin=""
    /usr/bin/python3 -c "import torch" 2>/dev/null && twin="--torch --python /usr/bin/python3"
    for be in mpi tcp; do
        "$BIN" bench --ddp --device cpu --backend $be --quick --nproc 1,2 --only W3,W5 --amp bf16 --zero 0,1 \
            --ddp-grad-dtype fp32,bf16 $twin >b.txt 2>e.txt || { cat b.txt e.txt; fail "bench --ddp ($be)"; }
        twin_used=$twin
        twin="" # the twin once (under mpi's run)
        /usr/bin/python3 - b.txt "$twin_used" <<'PY' || { cat b.txt; fail "bench --ddp table ($be)"; }
import re, sys
text, twin = open(sys.argv[1]).read(), sys.argv[2] != ""
tables = re.findall(r"^(W[35]) .*?, (DDP|ZeRO-1), (fp32|bf16) gradient buckets.*\n.*\n((?:[12] .*\n?)+)", text, re.M)
assert len(tables) == 8, f"{len(tables)} tables, expected 8"
opt = {}
for wl, mode, grad, body in tables:
    rows = [r.split("|") for r in body.strip().split("\n")]
    assert [r[0].split()[0] for r in rows] == ["1", "2"], body
    for procs, (mine, theirs) in zip((1, 2), rows):
        c = mine.split()
        ms, tps, eff = float(c[1]), float(c[2]), float(c[3])
        assert ms > 0 and tps > 0 and eff > 0, mine
        if procs == 2:
            assert c[-1].endswith("%"), mine  # the collectives' share
            opt[wl, mode, grad] = float(c[-2])
        t = theirs.split()
        if twin and (procs == 1 or grad == "fp32"):  # gloo has no bf16 hook
            assert t[1] != "n/a" and float(t[1]) > 0, theirs
for (wl, mode, grad), o in opt.items():
    if mode == "ZeRO-1":
        assert 0 < o <= 0.6 * opt[wl, "DDP", grad], f"{wl} {grad}: ZeRO-1 keeps {o} MiB, DDP {opt[wl, 'DDP', grad]}"
print(f"ok: 8 tables, ZeRO-1's optimizer state {opt['W5', 'ZeRO-1', 'fp32']} MiB against DDP's {opt['W5', 'DDP', 'fp32']}"
      + (", with the PyTorch twin" if twin else ""))
PY
    done ;;
bench_ddp_vulkan)
    "$BIN" devices 2>/dev/null | grep -q "vulkan:0" || skip "no Vulkan device"
    "$BIN" bench --ddp --device vulkan:0 --backend tcp --quick --nproc 1,2 --only W3 --zero 0,1 --steps 2 --warmup 1 \
        >b.txt 2>e.txt || { cat b.txt e.txt; fail "bench --ddp on vulkan:0"; }
    # comm: 1 - (step without the collectives) / step, timed apart: noise can make it slightly negative
    [ "$(grep -cE '^2 +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +-?[0-9.]+%' b.txt)" -eq 2 ] ||
        { cat b.txt; fail "no DDP and ZeRO-1 rows of 2 processes"; }
    echo "ok: $(grep -c '^2 ' b.txt) rows of 2 processes on vulkan:0" ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
exit 0
