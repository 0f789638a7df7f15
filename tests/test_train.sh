#!/bin/sh
# trident train end to end: bad input gives one line and a non-zero exit; W1
# trains and checkpoints; a run stopped (--max-steps) or killed (kill -9) and
# resumed continues with bit-identical losses; W3 learns a text file; --capture
# is refused on the CPU and, on a GPU, replays the step with the eager losses.
#
# usage: test_train.sh TRIDENT_BINARY CASE      (CASE from the list below; CTest runs each)
#        test_train.sh TRIDENT_BINARY --list          (--list-errors: the bad-input cases only)
# Exit 0 pass, 1 fail, 77 skipped (no Fashion-MNIST, no text file).
set -u
CASE=$2
case $CASE in --list*) ;; *) BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") ;; esac
ERROR_CASES="bad_flag bad_value missing_dataset gpt_needs_text corrupt_checkpoint truncated_checkpoint \
missing_checkpoint other_model other_gpt_size other_param_dtype hostile_flags"
CASES="$ERROR_CASES hostile_checkpoint leak_missing_testset leak_short_text w1_small resume_stop resume_kill w3_text \
w6_resume twin_names capture_cpu capture_vulkan capture_cuda profile_w3 amp_cpu amp_cuda \
lr_schedule lr_schedule_resume lr_schedule_errors"
# amp_vulkan runs by name only: on lavapipe its three small W3 runs take minutes
[ "$CASE" = --list ] && { echo "$CASES" | tr ' ' '\n'; exit 0; }
[ "$CASE" = --list-errors ] && { echo "$ERROR_CASES" | tr ' ' '\n'; exit 0; }
DATA=${TRIDENT_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
TEXT=/usr/share/common-licenses/GPL-3
TWIN=${TRIDENT_TWIN_DIR:-$(cd "$(dirname "$0")/../bench" && pwd)} # bench/torch_workloads.py, the twin with flags
FIXTURES=$(cd "$(dirname "$0")/fixtures" && pwd) # lr_schedule.csv (gen_lr_schedule.py)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

# Spinning OpenMP threads crawl when the cores are shared (ctest -j, other
# jobs): let idle threads sleep unless the caller chose otherwise.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

fail() { echo "FAIL $CASE: $*"; exit 1; }
# skip WHY: exit 77 with one line naming what the case misses (ctest shows it with -V or --output-log)
skip() {
    echo "SKIP $CASE: $*"
    exit 77
}
need_data() {
    [ -f "$DATA/train-images-idx3-ubyte.gz" ] ||
        skip "no Fashion-MNIST in $DATA (train-images-idx3-ubyte.gz; set TRIDENT_FASHION_MNIST=DIR)"
}
need_text() { [ -f "$TEXT" ] || skip "no $TEXT to train on (Debian's base-files)"; }

# expect_error SUBSTRING ARGS...: exit status != 0 and exactly one stderr line
# "trident train: ...SUBSTRING..." (with $TD_TEST_MESSAGES set, appended to that
# file with a NUL: tests/test_errors replays these cases and checks each line)
expect_error() {
    want=$1
    shift
    "$BIN" train "$@" >out.txt 2>err.txt
    rc=$?
    [ -z "${TD_TEST_MESSAGES:-}" ] || { cat err.txt; printf '\0'; } >>"$TD_TEST_MESSAGES"
    [ $rc -ne 0 ] || fail "exit status 0 for: $*"
    [ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt; fail "expected one line on stderr for: $*"; }
    grep -q "^trident train: .*$want" err.txt || { cat err.txt; fail "stderr lacks '$want'"; }
    echo "ok: $(cat err.txt)"
}

# set_meta SRC KEY VALUE DST: DST is SRC with __metadata__[KEY] = VALUE
set_meta() {
    /usr/bin/python3 - "$@" <<'EOF' || fail "cannot rewrite $1"
import json, struct, sys
src, key, val, dst = sys.argv[1:5]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
assert key in h["__metadata__"], key
h["__metadata__"][key] = val
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
open(dst, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
EOF
}

# A tiny W3 on the text file (a few seconds on the CPU)
gpt_tiny="--model gpt --device cpu --d-model 8 --layers 1 --heads 2 --context 8 --batch 4 --steps 2 --epochs 1"

# A W1 run on a small subset: 2048 images, 32 steps of 64 per epoch.
w1() { "$BIN" train --model mlp --device cpu --data "$DATA" --limit 2048 --batch 64 --deterministic "$@"; }

# same_losses A B: every line (epoch,step,loss) of B is the line of A with the same step
same_losses() {
    [ "$(wc -l <"$2")" -gt 1 ] || fail "$2 holds no steps"
    awk -F, 'NR == FNR { if (FNR > 1) a[$2] = $0; next }
             FNR > 1 { n++; if (!($2 in a)) { print "step " $2 " missing in the uninterrupted run"; bad = 1 }
                       else if (a[$2] != $0) { print "step " $2 ": " a[$2] " vs resumed " $0; bad = 1 } }
             END { if (bad) exit 1; print n " resumed steps match bit for bit" }' "$1" "$2" || fail "losses differ"
}

# close_losses A B: every step's loss of B within 1e-5 (relative) of A's
close_losses() {
    [ "$(wc -l <"$2")" -gt 1 ] || fail "$2 holds no steps"
    awk -F, 'NR == FNR { if (FNR > 1) a[$2] = $3; next }
             FNR > 1 { n++; d = a[$2] - $3; if (d < 0) d = -d
                       if (!($2 in a) || d > 1e-5 * (a[$2] < 0 ? -a[$2] : a[$2])) { print "step " $2 ": " a[$2] " vs " $3; bad = 1 } }
             END { if (bad) exit 1; print n " steps within 1e-5" }' "$1" "$2" || fail "losses differ"
}

# same_run DEVICE ARGS...: W1 on DEVICE eagerly and with --capture (8 steps of
# 64, a checkpoint after step 5 between replays): the losses are equal bit for bit
# (COMPARE=close_losses: within 1e-5, for Adam, whose captured form is capturable).
same_run() {
    dev=$1
    shift
    c="--model mlp --device $dev --data $DATA --limit 512 --batch 64 --epochs 1 --checkpoint-every 5 $*"
    rm -f e.csv c.csv e.safetensors c.safetensors # step logs append (for resumes)
    "$BIN" train $c --checkpoint e.safetensors --log-steps e.csv >out.txt 2>&1 || { cat out.txt; fail "eager run failed"; }
    "$BIN" train $c --capture --checkpoint c.safetensors --log-steps c.csv >out.txt 2>&1 ||
        { cat out.txt; fail "--capture run failed"; }
    [ "$(wc -l <c.csv)" -eq 9 ] || { cat c.csv; fail "expected 8 steps"; }
    ${COMPARE:-same_losses} e.csv c.csv
}
# need_device DEV: skip unless `trident devices` lists DEV
need_device() {
    "$BIN" devices >devices.txt 2>&1
    grep -q "^$1 " devices.txt ||
        skip "no $1 device (trident devices: $(grep "^${1%%:*}" devices.txt | head -n 1 | tr -s ' '))"
}

# gpt_sched ARGS...: the tiny W3 for 2 epochs of 150 steps at lr 3e-3 (the lr_schedule cases)
gpt_sched() {
    "$BIN" train --model gpt --device cpu --text "$TEXT" --d-model 8 --layers 1 --heads 2 --context 8 --batch 4 \
        --steps 150 --epochs 2 --lr 3e-3 "$@"
}

case $CASE in
lr_schedule)
    # the lr of every step (4th column of the step log) is torch's (tests/fixtures/gen_lr_schedule.py)
    need_text
    fx=$FIXTURES/lr_schedule.csv
    col=2
    for kind in cosine linear step; do
        rm -f s.csv
        gpt_sched --lr-schedule $kind --warmup-steps 100 --min-lr 3e-4 --lr-step-size 50 --lr-gamma 0.5 \
            --checkpoint s.safetensors --log-steps s.csv >out.txt 2>&1 || { cat out.txt; fail "the $kind run failed"; }
        [ "$(wc -l <s.csv)" -eq 301 ] || fail "$kind: expected 300 steps"
        awk -F, -v c=$col -v k=$kind 'NR == FNR { if (FNR > 1) want[$1] = $c; next }
            FNR > 1 { n++; d = want[$2] - $4; if (d < 0) d = -d
                      if (!($2 in want) || d > 1e-12 * want[$2]) { print k " step " $2 ": lr " $4 ", torch " want[$2]; bad = 1 } }
            END { if (bad || n != 300) exit 1; print k ": 300 lrs equal torch SequentialLR(LinearLR, main) within 1e-12" }' \
            "$fx" s.csv || fail "$kind: the lrs differ from torch's"
        col=$((col + 1))
    done
    # the gpt default: cosine with 5% warmup (15 of 300 steps) down to lr/10; mlp/cnn: constant
    rm -f s.csv
    gpt_sched --checkpoint s.safetensors --log-steps s.csv >out.txt 2>&1 || { cat out.txt; fail "the default run failed"; }
    grep -q "lr schedule: cosine warmup=15 total=300 lr=0.003 min_lr=0.0003 " out.txt ||
        { cat out.txt; fail "the gpt default schedule is not warmup + cosine"; }
    ;;
lr_schedule_resume)
    # stopped inside the warmup's end and resumed, with clipping and weight decay: bit for bit
    need_text
    k="--lr-schedule cosine --warmup-steps 100 --min-lr 3e-4 --grad-clip 0.5 --weight-decay 0.05"
    gpt_sched $k --checkpoint a.safetensors --log-steps a.csv >/dev/null 2>&1 || fail "the uninterrupted run failed"
    gpt_sched $k --checkpoint b.safetensors --log-steps b.csv --max-steps 97 >/dev/null 2>&1 || fail "the stopped run failed"
    # the resumed run takes the checkpoint's schedule, whatever the flags say now
    gpt_sched --lr-schedule step --checkpoint b.safetensors --log-steps b.csv --resume --grad-clip 0.5 \
        --weight-decay 0.05 >out.txt 2>&1 || { cat out.txt; fail "resume failed"; }
    grep -q "lr schedule: cosine warmup=100 total=300" out.txt || { cat out.txt; fail "the checkpoint's schedule not taken"; }
    [ "$(wc -l <b.csv)" -eq 301 ] || fail "expected 300 steps in all"
    same_losses a.csv b.csv
    # clipping and weight decay change the run (so the flags reach the step)
    gpt_sched --lr-schedule cosine --warmup-steps 100 --min-lr 3e-4 --checkpoint c.safetensors --log-steps c.csv \
        >/dev/null 2>&1 || fail "the unclipped run failed"
    ! cmp -s a.csv c.csv || fail "--grad-clip 0.5 --weight-decay 0.05 changed nothing"
    ;;
lr_schedule_errors)
    expect_error "--lr-schedule: 'poly' is not constant, cosine, linear or step" --lr-schedule poly
    expect_error "--warmup-steps expects an integer in \[0, 2^48\], got '-3'" --warmup-steps -3
    expect_error "--grad-clip expects a positive number" --grad-clip 0
    expect_error "--weight-decay expects a number >= 0" --weight-decay=-1
    expect_error "--capture replays the step with the lr it recorded" --capture --lr-schedule cosine
    need_text
    expect_error "--min-lr 0.01 is above the learning rate 0.003" --model gpt --device cpu --text "$TEXT" --lr 3e-3 \
        --min-lr 0.01 --steps 2 --epochs 1 --d-model 8 --layers 1 --heads 2 --context 8 --batch 4
    expect_error "--warmup-steps 5 leaves none of the run's 2 steps" --model gpt --device cpu --text "$TEXT" \
        --warmup-steps 5 --steps 2 --epochs 1 --d-model 8 --layers 1 --heads 2 --context 8 --batch 4
    ;;
bad_flag) expect_error "unknown option '--bogus'" --bogus ;;
bad_value)
    expect_error "--epochs expects a positive integer, got 'abc'" --epochs abc
    expect_error "--lr expects a positive number" --lr=-1
    expect_error "--model: 'resnet' is not mlp, cnn, gpt or lstm" --model resnet
    expect_error "--device 'tpu': unknown device 'tpu'" --device tpu
    expect_error "--batch needs a value" --batch
    ;;
missing_dataset) expect_error "dataset directory '$T/none' not found" --data "$T/none" ;;
gpt_needs_text)
    expect_error "needs --text FILE" --model gpt
    expect_error "--model lstm needs --text FILE" --model lstm
    expect_error "cannot open text file" --model gpt --text "$T/none.txt"
    ;;
corrupt_checkpoint)
    need_data
    printf 'this is not a safetensors file at all' >bad.safetensors
    expect_error "cannot resume: .*bad.safetensors" --model mlp --data "$DATA" --limit 256 --resume --checkpoint bad.safetensors
    ;;
truncated_checkpoint)
    need_data
    w1 --epochs 1 --checkpoint good.safetensors >/dev/null 2>&1 || fail "the W1 run failed"
    head -c 100000 good.safetensors >cut.safetensors
    expect_error "cannot resume: .*cut.safetensors" --model mlp --data "$DATA" --limit 256 --resume --checkpoint cut.safetensors
    ;;
missing_checkpoint)
    need_data
    expect_error "cannot resume: .*absent.safetensors" --model mlp --data "$DATA" --limit 256 --resume --checkpoint absent.safetensors
    ;;
other_model)
    need_data
    w1 --epochs 1 --checkpoint mlp.safetensors >/dev/null 2>&1 || fail "the W1 run failed"
    expect_error "model 'cnn' expected, checkpoint holds 'mlp'" --model cnn --data "$DATA" --limit 256 --resume --checkpoint mlp.safetensors
    ;;
other_gpt_size)
    need_text
    g="--model gpt --text $TEXT --layers 1 --heads 2 --context 16 --batch 4"
    "$BIN" train $g --d-model 16 --steps 2 --epochs 1 --checkpoint g.safetensors >/dev/null 2>&1 || fail "gpt run failed"
    expect_error "has shape \[256,16\], expected \[256,32\]" $g --d-model 32 --resume --checkpoint g.safetensors
    ;;
other_param_dtype)
    # --param-dtype: half parameters need autocast of their dtype; a checkpoint resumes in the dtype it was written in
    need_text
    expect_error "--param-dtype bf16 with --amp fp16: bf16 parameters need --amp bf16" --param-dtype bf16 --amp fp16
    expect_error "--param-dtype fp16: fp16 gradients underflow when the GradScaler unscales them" --param-dtype fp16
    g="--model gpt --text $TEXT --layers 1 --heads 2 --d-model 16 --context 16 --batch 4"
    "$BIN" train $g --param-dtype bf16 --steps 2 --epochs 1 --checkpoint h.safetensors >/dev/null 2>&1 || fail "bf16 run failed"
    expect_error "model.tok.weight has dtype bfloat16, expected float32 (resume with the --param-dtype the run was started with)" \
        $g --resume --checkpoint h.safetensors
    ;;
hostile_flags)
    need_text
    expect_error "--epochs '9223372036854775807' is too large (at most 2^48)" --epochs 9223372036854775807
    # 2 * batch * context ids of 8 bytes would wrap
    expect_error "--batch 281474976710656 with --context 281474976710656: the size of a batch .* overflows 64 bits" \
        --model gpt --text "$TEXT" --batch 281474976710656 --context 281474976710656
    # a 2^46-byte batch (2^40 x 4 ids and targets of 8 bytes): out of memory with the size, not an allocator abort
    expect_error "step 1: out of host memory: a 1099511627776x4 batch needs 70368744177664 bytes" \
        $gpt_tiny --text "$TEXT" --batch 1099511627776 --context 4 --checkpoint x.safetensors
    ;;
hostile_checkpoint)
    # a checkpoint's step, epoch or batch at INT64_MAX is refused when read, before any arithmetic on it
    need_text
    "$BIN" train $gpt_tiny --text "$TEXT" --checkpoint ok.safetensors >/dev/null 2>&1 || fail "the W3 run failed"
    big=9223372036854775807
    set_meta ok.safetensors step $big step.safetensors
    expect_error "metadata 'step' = $big is out of range \\[0, 2^53\\]" $gpt_tiny --text "$TEXT" --resume --checkpoint step.safetensors
    set_meta ok.safetensors epoch $big epoch.safetensors
    expect_error "metadata 'epoch' = $big is out of range \\[0, 2^53\\]" $gpt_tiny --text "$TEXT" --resume --checkpoint epoch.safetensors
    set_meta ok.safetensors model.batch $big batch.safetensors
    expect_error "metadata model.batch = '$big' is not an integer in" $gpt_tiny --text "$TEXT" --resume --checkpoint batch.safetensors
    # in range, but step * batch (the data position) would wrap
    set_meta ok.safetensors step 281474976710656 pos.safetensors
    expect_error "step 281474976710656 with --batch 281474976710656 overflows the data position" \
        $gpt_tiny --text "$TEXT" --batch 281474976710656 --resume --checkpoint pos.safetensors
    ;;
leak_missing_testset)
    # what loaded before the failure is freed (LeakSanitizer checks this in the sanitized build)
    need_data
    mkdir part && cp "$DATA"/train-* part/ || fail "cannot copy the training files"
    expect_error "t10k" --model mlp --device cpu --data part --limit 256
    ;;
leak_short_text)
    printf 'too short for a context of 32' >short.txt
    expect_error "--context 32 needs at least 330" --model gpt --device cpu --text short.txt --context 32
    ;;
w1_small)
    need_data
    w1 --epochs 2 --checkpoint w1.safetensors --log metrics.csv --log-steps steps.jsonl >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "the W1 run failed"; }
    cat out.txt
    [ -s w1.safetensors ] || fail "no checkpoint written"
    [ "$(grep -c '"loss"' steps.jsonl)" -eq 64 ] || fail "expected 64 step lines in steps.jsonl"
    # the loss falls and the test accuracy beats chance by far (10 classes)
    awk -F, 'NR == 3 { exit !($3 < 1.0 && $5 > 0.6) }' metrics.csv || { cat metrics.csv; fail "W1 did not learn"; }
    # the checkpoint resumes as finished (2 of 2 epochs): nothing to do
    w1 --epochs 2 --checkpoint w1.safetensors --resume >out2.txt 2>&1 || fail "resume of a finished run failed"
    grep -q "resumed from w1.safetensors: epoch 3, batch 0, step 64" out2.txt || { cat out2.txt; fail "bad resume line"; }
    ;;
resume_stop)
    need_data
    w1 --epochs 2 --checkpoint a.safetensors --log-steps a.csv --log am.csv >/dev/null 2>&1 ||
        fail "the uninterrupted run failed"
    # stop at step 45 (batch 13 of epoch 2) with a checkpoint, then resume
    w1 --epochs 2 --checkpoint b.safetensors --log-steps b.csv --max-steps 45 >out.txt 2>&1 || fail "the stopped run failed"
    grep -q "stopped after step 45" out.txt || { cat out.txt; fail "no stop message"; }
    w1 --epochs 2 --checkpoint b.safetensors --log-steps c.csv --log cm.csv --resume >out.txt 2>&1 ||
        { cat out.txt; fail "resume failed"; }
    grep -q "resumed from b.safetensors: epoch 2, batch 13, step 45" out.txt || { cat out.txt; fail "bad resume line"; }
    [ "$(sed -n 2p c.csv | cut -d, -f2)" = 46 ] || fail "the resumed run did not start at step 46"
    same_losses a.csv b.csv
    same_losses a.csv c.csv
    # epoch 2's metrics (train loss over all its steps, test loss and accuracy) are the same too
    [ "$(sed -n 3p am.csv | cut -d, -f1-5)" = "$(sed -n 2p cm.csv | cut -d, -f1-5)" ] ||
        { cat am.csv cm.csv; fail "epoch 2 metrics differ"; }
    ;;
resume_kill)
    need_data
    # 200 steps of 32 per epoch; a checkpoint every 20 steps
    k="--limit 6400 --batch 32 --epochs 2 --checkpoint-every 20"
    w1 $k --checkpoint a.safetensors --log-steps a.csv >/dev/null 2>&1 || fail "the uninterrupted run failed"
    "$BIN" train --model mlp --device cpu --data "$DATA" --deterministic $k --checkpoint b.safetensors \
        --log-steps b.csv >/dev/null 2>&1 &
    pid=$! # trident itself, not a subshell
    # kill -9 in epoch 2, after its first checkpoint (step 220)
    while [ "$(cat b.csv 2>/dev/null | wc -l)" -lt 232 ]; do
        kill -0 $pid 2>/dev/null || fail "the run ended before it could be killed"
        sleep 0.02
    done
    kill -9 $pid
    wait $pid 2>/dev/null
    steps_done=$(($(wc -l <b.csv) - 1))
    [ "$steps_done" -lt 400 ] || fail "the run finished before the kill"
    w1 $k --checkpoint b.safetensors --log-steps c.csv --resume >out.txt 2>&1 || { cat out.txt; fail "resume failed"; }
    cat out.txt | head -1
    first=$(sed -n 2p c.csv | cut -d, -f2)
    echo "killed after step $steps_done; resumed at step $first"
    [ "$first" -gt 200 ] && [ "$first" -le $((steps_done + 1)) ] || fail "resumed at step $first"
    [ "$(tail -1 c.csv | cut -d, -f2)" = 400 ] || fail "the resumed run did not finish"
    same_losses a.csv c.csv
    ;;
w3_text)
    need_text
    "$BIN" train --model gpt --device cpu --text "$TEXT" --d-model 64 --layers 2 --heads 4 --context 32 --batch 16 \
        --lr 3e-3 --steps 100 --epochs 3 --checkpoint g.safetensors --log-steps g.csv >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "the W3 run failed"; }
    cat out.txt
    # the mean of the last 20 step losses (ln 256 = 5.55 at the start)
    tail -20 g.csv | awk -F, '{ s += $3 } END { printf "mean loss of steps 281-300: %.4f\n", s / NR; exit !(NR == 20 && s / NR < 2.5) }' ||
        fail "loss not below 2.5 after 300 steps"
    ;;
w6_resume)
    # W6 (the LSTM LM, hidden 512) trains on text; stopped after 2 steps and resumed, it repeats the losses
    need_text
    w6="--model lstm --device cpu --text $TEXT --context 16 --batch 4 --steps 4 --epochs 1"
    "$BIN" train $w6 --checkpoint a.safetensors --log-steps a.csv >out.txt 2>&1 || { cat out.txt; fail "the W6 run failed"; }
    "$BIN" train $w6 --checkpoint b.safetensors --log-steps b.csv --max-steps 2 >/dev/null 2>&1 || fail "the stopped run failed"
    "$BIN" train $w6 --checkpoint b.safetensors --log-steps c.csv --resume >out.txt 2>&1 || { cat out.txt; fail "resume failed"; }
    same_losses a.csv b.csv
    same_losses a.csv c.csv
    ;;
amp_cpu | amp_vulkan | amp_cuda)
    # --amp bf16 follows the fp32 loss curve (mean of the last 20 steps within
    # 2%); fp16 with the GradScaler does not diverge (within 5%). A small W3.
    dev=${CASE#amp_}
    [ "$dev" = cpu ] || need_device "$dev:0"
    need_text
    g="--model gpt --device $dev --text $TEXT --d-model 64 --layers 2 --heads 4 --context 32 --batch 16 --lr 3e-3"
    g="$g --steps ${AMP_STEPS:-60} --epochs 1"
    for a in fp32 bf16 fp16; do
        flag=$([ $a = fp32 ] || echo "--amp $a")
        "$BIN" train $g $flag --checkpoint $a.safetensors --log-steps $a.csv >out.txt 2>err.txt ||
            { cat out.txt err.txt; fail "the $a run failed"; }
    done
    for a in bf16 fp16; do
        tol=$([ $a = bf16 ] && echo 0.02 || echo 0.05)
        tail -20 fp32.csv >ref.csv
        tail -20 $a.csv | awk -F, -v tol=$tol -v a=$a 'NR == FNR { r += $3; next } { s += $3 }
            END { r /= 20; s /= 20; d = (s - r) / r; if (d < 0) d = -d
                  printf "%s: mean loss of the last 20 steps %.4f, fp32 %.4f (%.2f%%)\n", a, s, r, 100 * d
                  exit !(s == s && d <= tol) }' ref.csv - || fail "$a drifts from the fp32 curve"
    done
    ;;
twin_names)
    # the checkpoints' model tensors have the PyTorch twin's state_dict names and shapes
    need_data
    need_text
    [ -f "$TWIN/torch_workloads.py" ] && /usr/bin/python3 -c "import torch" 2>/dev/null ||
        skip "no python3-torch (import torch) or no twin $TWIN/torch_workloads.py"
    for m in mlp cnn; do
        "$BIN" train --model $m --data "$DATA" --limit 256 --max-steps 1 --checkpoint $m.safetensors >/dev/null 2>&1 ||
            fail "$m run failed"
    done
    "$BIN" train --model gpt --text "$TEXT" --d-model 32 --heads 2 --layers 2 --context 16 --batch 2 --max-steps 1 \
        --checkpoint gpt.safetensors >/dev/null 2>&1 || fail "gpt run failed"
    /usr/bin/python3 - "$TWIN" <<'EOF' || fail "names or shapes differ from the twin"
import json, struct, sys
sys.path.insert(0, sys.argv[1])
import torch_workloads as tw
def model_tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return {k[6:]: v["shape"] for k, v in h.items() if k.startswith("model.")}
bad = 0
for name, m in [("mlp", tw.mlp()), ("cnn", tw.cnn()), ("gpt", tw.GPT(256, 32, 2, 2, 16))]:
    want = {k: list(v.shape) for k, v in m.state_dict().items()}
    got = model_tensors(name + ".safetensors")
    print(name, len(want), "tensors:", "same names and shapes" if got == want else f"differ: {got} vs {want}")
    bad |= got != want
sys.exit(bad)
EOF
    ;;
capture_cpu)
    expect_error "--capture: the cpu backend does not capture" --model mlp --device cpu --capture
    ;;
profile_w3)
    # --profile: steps 3-7 of a small W3 in a Chrome trace, and the summary with W3's modules on stderr
    need_text
    "$BIN" train --model gpt --text "$TEXT" --device cpu --d-model 32 --layers 1 --heads 2 --context 16 --batch 4 \
        --steps 9 --epochs 1 --profile p.json >out.txt 2>err.txt || { cat err.txt; fail "--profile run failed"; }
    grep -q "^profile: 5 steps" err.txt || { cat err.txt; fail "no summary of 5 steps"; }
    # (the MLP's fc and out run inside one td_mlp_gelu node, whose ops count to their block)
    for m in blocks.0 blocks.0.qkv blocks.0.proj head optimizer loss; do
        grep -q "^  $m " err.txt || { cat err.txt; fail "module $m missing from the summary"; }
    done
    python3 - p.json <<'EOF' || fail "p.json is not the trace of 5 steps"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
ops = [e for e in ev if e["ph"] == "X"]
steps = [e for e in ev if e["ph"] == "i"]
bw = [e for e in ops if e["cat"] == "backward" and e["args"].get("node")]
print(len(ops), "ops,", len(steps), "step marks,", len(bw), "backward ops with a node")
sys.exit(not (len(steps) == 5 and len(ops) > 100 and bw))
EOF
    expect_error "--profile times eager steps" --model mlp --device cpu --capture --profile p.json
    ;;
capture_vulkan)
    # SGD: stateless besides the parameters, so every replay is the eager step exactly; then Adam
    need_data
    need_device vulkan:0
    same_run vulkan:0 --optimizer sgd --lr 0.05
    COMPARE=close_losses same_run vulkan:0 # Adam, capturable
    ;;
capture_cuda)
    # SGD, then Adam created with capturable = true: its step count lives on the device
    need_data
    need_device cuda:0
    same_run cuda:0 --optimizer sgd --lr 0.05
    COMPARE=close_losses same_run cuda:0
    ;;
*) fail "unknown case (see --list)" ;;
esac
echo "PASS $CASE"
