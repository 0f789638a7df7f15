#!/bin/sh
# Multi-host launch tested on one host, and a lost rank (docs/distributed.md):
# two `trident launch --nnodes 2 --node-rank R --nproc 1` invocations over
# loopback form one group of 2 (the tcp backend: the project's rendezvous,
# then CPU collectives over its sockets, no mpirun).
#   two_nodes            losses equal one process at the same global batch; --zero 1 likewise
#   rdzv_world_size      node 1 says --nnodes 3, node 0 --nnodes 2: one clear line on both, within the timeout
#   rdzv_duplicate_rank  two launches claim node rank 1: rank 0 names the duplicate
#   rdzv_unreachable     no node 0: node 1 gives up after TRIDENT_DIST_TIMEOUT=2 s naming the address
#   lost_rank            kill -9 of rank 1 mid-run: rank 0 exits within the timeout naming rank 1, and its
#                        last checkpoint resumes on 1 process
#   hung_rank            rank 1 stopped (SIGSTOP) mid-run: rank 0 exits after TRIDENT_DIST_TIMEOUT=3 s naming it
#   two_nodes_nccl       (2 CUDA devices) the same two nodes over NCCL's socket transport (no P2P, no shared
#                        memory), one GPU each: losses within 1e-4 of one process's (skipped without 2 GPUs)
#   lost_rank_nccl       (2 CUDA devices) kill -9 of rank 1: rank 0's watchdog names it and the run ends
#                        within 15 s; the last checkpoint resumes on 1 GPU
#   two_nodes_vulkan     both nodes on vulkan:0 (lavapipe): DDP's buckets staged through host buffers on the
#                        worker thread; losses within 1e-5 of one process's (skipped without a Vulkan device)
#   lost_rank_vulkan     kill -9 of rank 1 of two vulkan:0 nodes: the worker's failure ends rank 0 within the
#                        timeout with one line naming rank 1
#
# usage: test_dist_multinode.sh TRIDENT_BINARY CASE   (test_dist_multinode.sh - --list prints the cases)
# Exit 0 pass, 1 fail, 77 skipped (no Fashion-MNIST).
set -u
CASE=$2
CASES="two_nodes rdzv_world_size rdzv_duplicate_rank rdzv_unreachable lost_rank hung_rank two_nodes_nccl lost_rank_nccl \
two_nodes_vulkan lost_rank_vulkan"
[ "$CASE" = --list ] && { echo "$CASES" | tr ' ' '\n'; exit 0; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
DATA=${TRIDENT_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d)
KIDS=""
trap 'for p in $KIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$T"' EXIT
cd "$T" || exit 1
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
PY=/usr/bin/python3 # Debian's; the GPU machine may have only a venv's
[ -x $PY ] || PY=python3
# a free port for the rendezvous (the kernel's pick)
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

fail() { echo "FAIL $CASE: $*"; exit 1; }
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || { echo "SKIP $CASE: no Fashion-MNIST in $DATA"; exit 77; }

compare() {
    $PY - "$@" <<'PY' || fail "losses differ"
import csv, sys
a = [r for r in csv.DictReader(open(sys.argv[1]))]
b = [r for r in csv.DictReader(open(sys.argv[2]))]
tol = float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, f"{len(a)} and {len(b)} steps"
assert [x["step"] for x in a] == [y["step"] for y in b], "different steps"
worst = max(abs(float(x["loss"]) - float(y["loss"])) for x, y in zip(a, b))
print(f"ok: {len(a)} steps, largest loss difference {worst:.3g} (tolerance {tol:g})")
assert worst <= tol, f"largest difference {worst:.3g} > {tol:g}"
PY
}

# node R NNODES OUT ARGS...: one host's launch, in the background (its pid in $!); $NCCL: over NCCL on GPU R
node() {
    r=$1 nn=$2 out=$3
    shift 3
    if [ -n "${NCCL:-}" ]; then
        CUDA_VISIBLE_DEVICES=$r NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "$BIN" launch --nnodes "$nn" --node-rank "$r" \
            --nproc 1 --backend nccl --master-addr 127.0.0.1 --master-port "$PORT" -- "$@" >"$out" 2>&1 &
    else
        "$BIN" launch --nnodes "$nn" --node-rank "$r" --nproc 1 --master-addr 127.0.0.1 --master-port "$PORT" -- "$@" \
            >"$out" 2>&1 &
    fi
    KIDS="$KIDS $!"
}

need_two_gpus() {
    [ "$("$BIN" devices 2>/dev/null | grep -c 'cuda:[0-9]')" -ge 2 ] || { echo "SKIP $CASE: fewer than 2 CUDA devices"; exit 77; }
    NCCL=1
}

# seconds since $start
elapsed() { echo $(($(date +%s) - start)); }

# the pid of the rank that launch pid $1 started, once there (10 s)
rank_pid() {
    for _ in $(seq 100); do
        if command -v pgrep >/dev/null; then
            p=$(pgrep -P "$1" | head -1)
        else # no procps: the process whose parent (field 4 of /proc/PID/stat) is $1
            p=$(for f in /proc/[0-9]*/stat; do read -r a _ _ pp _ <"$f" && [ "$pp" = "$1" ] && echo "$a"; done 2>/dev/null | head -1)
        fi
        [ -n "$p" ] && { echo "$p"; return; }
        sleep 0.1
    done
}

# pair TENTHS ARGS...: ranks 1 and 0 of ARGS in the background ($n1, $n0), checkpointing to n1.st and ck.st; returns
# once rank 0 has written ck.st (within TENTHS tenths of a second) with $victim, rank 1's trainer
pair() {
    tenths=$1
    shift
    node 1 2 n1.txt "$@" --checkpoint n1.st
    n1=$!
    node 0 2 n0.txt "$@" --checkpoint ck.st
    n0=$!
    for _ in $(seq "$tenths"); do [ -f ck.st ] && break; sleep 0.1; done
    [ -f ck.st ] || { cat n0.txt n1.txt; fail "no checkpoint"; }
    victim=$(rank_pid $n1)
}

W1="train --model mlp --device cpu --limit 960 --epochs 2 --data $DATA"

case $CASE in
two_nodes)
    "$BIN" $W1 --max-steps 30 --batch 32 --log-steps one.csv --checkpoint one.st >one.txt 2>&1 || { cat one.txt; fail "1 process"; }
    for z in 0 1; do
        node 1 2 n1.txt "$BIN" $W1 --max-steps 30 --batch 16 --zero $z --checkpoint n1.st
        n1=$!
        node 0 2 n0.txt "$BIN" $W1 --max-steps 30 --batch 16 --zero $z --log-steps two$z.csv --checkpoint two.st
        wait $! || { cat n0.txt n1.txt; fail "node 0 (--zero $z)"; }
        wait $n1 || { cat n0.txt n1.txt; fail "node 1 (--zero $z)"; }
        grep -q "data-parallel: 2 processes (tcp), batch 16 per process, global batch 32" n0.txt || { cat n0.txt; fail "no data-parallel line"; }
        compare one.csv two$z.csv 1e-5
    done ;;
rdzv_world_size)
    export TRIDENT_DIST_TIMEOUT=10
    start=$(date +%s)
    node 1 3 n1.txt "$BIN" $W1 --max-steps 2
    n1=$!
    node 0 2 n0.txt "$BIN" $W1 --max-steps 2
    wait $! && fail "node 0 exit status 0"
    wait $n1 && fail "node 1 exit status 0"
    [ "$(elapsed)" -le 10 ] || fail "took $(elapsed) s"
    for f in n0.txt n1.txt; do
        grep -q "^trident train\(: rank 1\)\?: rendezvous at 127.0.0.1:$PORT: rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2$" $f ||
            { cat $f; fail "message in $f"; }
    done
    echo "ok: $(grep rendezvous n0.txt)" ;;
rdzv_duplicate_rank)
    export TRIDENT_DIST_TIMEOUT=10
    start=$(date +%s)
    node 1 3 a.txt "$BIN" $W1 --max-steps 2
    a=$!
    sleep 1 # the first rank 1 joins first
    node 1 3 b.txt "$BIN" $W1 --max-steps 2
    b=$!
    node 0 3 n0.txt "$BIN" $W1 --max-steps 2
    wait $! && fail "node 0 exit status 0"
    wait $a; wait $b
    [ "$(elapsed)" -le 10 ] || fail "took $(elapsed) s"
    grep -q "^trident train: rendezvous at 127.0.0.1:$PORT: two processes joined as rank 1 (duplicate RANK)$" n0.txt ||
        { cat n0.txt; fail "message"; }
    echo "ok: $(grep rendezvous n0.txt)" ;;
rdzv_unreachable)
    export TRIDENT_DIST_TIMEOUT=2
    start=$(date +%s)
    node 1 2 n1.txt "$BIN" $W1 --max-steps 2
    wait $! && fail "exit status 0"
    [ "$(elapsed)" -le 6 ] || fail "took $(elapsed) s"
    grep -q "^trident train: rendezvous at 127.0.0.1:$PORT: rank 1 could not reach rank 0 within 2 s (Connection refused); is MASTER_ADDR right and rank 0 running?$" n1.txt ||
        { cat n1.txt; fail "message"; }
    echo "ok: $(grep rendezvous n1.txt)" ;;
lost_rank)
    # rank 1 killed (SIGKILL) once rank 0 has checkpointed: rank 0 ends within the timeout, naming it
    export TRIDENT_DIST_TIMEOUT=5
    set -- "$BIN" $W1 --max-steps 2000 --batch 8 --checkpoint-every 5
    pair 300 "$@"
    start=$(date +%s)
    kill -9 "$victim"
    wait $n0 && fail "node 0 exit status 0"
    took=$(elapsed)
    [ "$took" -le 5 ] || fail "took $took s"
    grep -q "^trident train: step [0-9]*: .*tcp: rank 1 exited or lost its connection during [a-z_]* (" n0.txt ||
        { cat n0.txt; fail "no message naming rank 1"; }
    wait $n1
    echo "ok: stopped after $took s: $(grep 'rank 1' n0.txt | head -1)"
    "$BIN" $W1 --max-steps 200 --batch 16 --checkpoint ck.st --resume >r.txt 2>&1 || { cat r.txt; fail "resume on 1"; }
    grep -q "^resumed from ck.st: epoch 1, batch [1-9][0-9]*, step [1-9][0-9]*$" r.txt || { cat r.txt; fail "did not resume"; }
    echo "ok: $(grep resumed r.txt)" ;;
two_nodes_vulkan)
    "$BIN" devices 2>/dev/null | grep -q "vulkan:0" || { echo "SKIP $CASE: no Vulkan device"; exit 77; }
    V1="train --model mlp --device vulkan:0 --limit 960 --epochs 2 --data $DATA --max-steps 10"
    "$BIN" $V1 --batch 32 --log-steps one.csv >one.txt 2>&1 || { cat one.txt; fail "1 process"; }
    node 1 2 n1.txt "$BIN" $V1 --batch 16
    n1=$!
    node 0 2 n0.txt "$BIN" $V1 --batch 16 --log-steps two.csv
    wait $! || { cat n0.txt n1.txt; fail "node 0"; }
    wait $n1 || { cat n0.txt n1.txt; fail "node 1"; }
    grep -q "data-parallel: 2 processes (tcp)" n0.txt || { cat n0.txt; fail "no data-parallel line"; }
    compare one.csv two.csv 1e-5 ;;
lost_rank_vulkan)
    "$BIN" devices 2>/dev/null | grep -q "vulkan:0" || { echo "SKIP $CASE: no Vulkan device"; exit 77; }
    # the kill closes the socket at once; the timeout only has to outlast a slow lavapipe step on a loaded host
    export TRIDENT_DIST_TIMEOUT=60
    set -- "$BIN" train --model mlp --device vulkan:0 --limit 960 --epochs 50 --data "$DATA" --max-steps 5000 \
        --batch 8 --checkpoint-every 5
    pair 600 "$@"
    start=$(date +%s)
    kill -9 "$victim"
    wait $n0 && fail "node 0 exit status 0"
    took=$(elapsed)
    [ "$took" -le 10 ] || fail "took $took s"
    grep -q "^trident train: step [0-9]*: .*tcp: rank 1 exited or lost its connection during [a-z_]* (" n0.txt ||
        { cat n0.txt; fail "no message naming rank 1"; }
    [ "$(grep -c '^trident train:' n0.txt)" -eq 1 ] || { cat n0.txt; fail "not one error line"; }
    wait $n1
    echo "ok: stopped after $took s: $(grep 'rank 1' n0.txt | head -1)" ;;
hung_rank)
    export TRIDENT_DIST_TIMEOUT=3
    set -- "$BIN" $W1 --max-steps 2000 --batch 8 --checkpoint-every 5
    pair 300 "$@"
    start=$(date +%s)
    kill -STOP "$victim"
    wait $n0 && fail "node 0 exit status 0"
    took=$(elapsed)
    kill -9 "$victim"
    [ "$took" -ge 2 ] && [ "$took" -le 8 ] || { cat n0.txt; fail "took $took s"; }
    grep -q "tcp: rank 1 did not take part in [a-z_]* within 3 s (hung, or busy for longer than TRIDENT_DIST_TIMEOUT)$" n0.txt ||
        { cat n0.txt; fail "no message naming rank 1"; }
    echo "ok: stopped after $took s: $(grep 'rank 1' n0.txt | head -1)" ;;
two_nodes_nccl)
    need_two_gpus
    set -- $W1 --device cuda --max-steps 30
    CUDA_VISIBLE_DEVICES=0 "$BIN" "$@" --batch 32 --log-steps one.csv --checkpoint one.st >one.txt 2>&1 || { cat one.txt; fail "1 process"; }
    node 1 2 n1.txt "$BIN" "$@" --batch 16 --checkpoint n1.st
    n1=$!
    node 0 2 n0.txt "$BIN" "$@" --batch 16 --log-steps two.csv --checkpoint two.st
    wait $! || { cat n0.txt n1.txt; fail "node 0"; }
    wait $n1 || { cat n0.txt n1.txt; fail "node 1"; }
    grep -q "data-parallel: 2 processes (nccl)" n0.txt || { cat n0.txt; fail "no data-parallel line"; }
    compare one.csv two.csv 1e-4 ;;
lost_rank_nccl)
    need_two_gpus
    export TRIDENT_DIST_TIMEOUT=10
    # 16000 images, 50 epochs: the run still goes when the kill comes (W1 steps take a millisecond on a GPU)
    set -- "$BIN" $W1 --device cuda --limit 16000 --epochs 50 --max-steps 5000 --batch 8 --checkpoint-every 5
    pair 600 "$@"
    start=$(date +%s)
    kill -9 "$victim"
    wait $n0 && fail "node 0 exit status 0"
    took=$(elapsed)
    [ "$took" -le 15 ] || fail "took $took s"
    grep -q "rank 1 exited or lost its connection without leaving the group" n0.txt || { cat n0.txt; fail "no message naming rank 1"; }
    wait $n1
    echo "ok: stopped after $took s: $(grep 'rank 1' n0.txt | head -1)"
    CUDA_VISIBLE_DEVICES=0 "$BIN" $W1 --device cuda --limit 16000 --epochs 50 --max-steps 5000 --batch 16 \
        --checkpoint ck.st --resume >r.txt 2>&1 ||
        { cat r.txt; fail "resume on 1"; }
    grep -q "^resumed from ck.st" r.txt || { cat r.txt; fail "did not resume"; }
    echo "ok: $(grep resumed r.txt)" ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
exit 0
