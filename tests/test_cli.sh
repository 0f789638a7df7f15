#!/bin/sh
# The trident CLI's surface a new user meets first: --version / version, the
# help texts, and option values that name things (a comma list of workloads, a
# reference expression) refused with the valid choices before anything runs.
#
# usage: test_cli.sh TRIDENT_BINARY CASE      (CASE from the list below; CTest runs each)
#        test_cli.sh - --list
# Exit 0 pass, 1 fail.
set -u
CASES="version version_no_plugins help bench_only bench_ddp_values kernel_params kernel_names kernel_help kernel_scalar_shape kernel_bad_ref kernel_check_glsl train_plural math_bench_rows"
[ "$2" = --list ] && { echo "$CASES" | tr ' ' '\n'; exit 0; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
KERNEL=$(cd "$(dirname "$0")/../examples/custom_ops" && pwd)/bias_gelu_cpu.c # a C kernel with a backward
CASE=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

fail() { echo "FAIL $CASE: $*"; exit 1; }
# has FILE REGEX: FILE has a line matching REGEX (extended)
has() { grep -Eq -- "$2" "$1" || { cat "$1"; fail "no line matching '$2' in $1"; }; }
# ok ARGS...: exit 0; stdout in out.txt, stderr in err.txt
ok() { "$BIN" "$@" >out.txt 2>err.txt || { cat out.txt err.txt; fail "trident $* exited $?"; }; }
# refused SUBSTRING ARGS...: exit status 2, one stderr line containing SUBSTRING, nothing on stdout
refused() {
    want=$1
    shift
    "$BIN" "$@" >out.txt 2>err.txt
    rc=$?
    [ $rc -eq 2 ] || { cat out.txt err.txt; fail "trident $* exited $rc, expected 2"; }
    [ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt; fail "trident $*: expected one stderr line"; }
    [ ! -s out.txt ] || { cat out.txt; fail "trident $*: ran anyway (printed on stdout)"; }
    grep -Fq -- "$want" err.txt || { cat err.txt; fail "trident $*: no '$want' in the message"; }
}

case $CASE in
version)
    ok --version
    has out.txt '^trident [0-9]+\.[0-9]+\.[0-9]+ \(commit [^ ]+\)$'
    has out.txt '^library: .*libtrident\.so'
    has out.txt '^  cpu +loaded \(built in\), 1 device$'
    has out.txt '^  cuda +(loaded|unavailable: .+)'
    has out.txt '^  vulkan +(loaded|unavailable: .+)'
    has out.txt '^plugins in '
    cp out.txt dashdash.txt
    ok version
    cmp -s out.txt dashdash.txt || { diff dashdash.txt out.txt; fail "trident version differs from --version"; } ;;
version_no_plugins)
    mkdir empty
    # the plugins missing, not disabled (the sanitized runs set TRIDENT_NO_CUDA and TRIDENT_NO_VULKAN)
    env -u TRIDENT_NO_CUDA -u TRIDENT_NO_VULKAN TRIDENT_PLUGIN_DIR=$T/empty "$BIN" version >out.txt 2>err.txt ||
      fail "exit $?"
    has out.txt '^  cuda +unavailable: plugin not loaded: .*libtrident-cuda\.so'
    has out.txt '^  vulkan +unavailable: plugin not loaded: .*libtrident-vulkan\.so'
    has out.txt '^plugins in .*/empty: none$' ;;
math_bench_rows)
    # the three rows of issue 21 on the CPU, each share of the copy a number (paired with a copy timed beside it)
    ok math --bench 'x*2+1' --shape x=65536 --device cpu --iters 3
    has out.txt '^cpu +1 kernels +[0-9.]+ us +[0-9.]+ us +[0-9.]+ +[0-9.]+% +[0-9.]+x +[0-9.]+ us +[0-9.]+$'
    has out.txt '^cpu +backward +[0-9.]+ us +[0-9.]+ us +[0-9.]+ +[0-9.]+% +[0-9.]+x +[0-9.]+$'
    has out.txt "^cpu +launch +[0-9.]+ us +one add +[0-9.]+ us: [0-9.]+x of an add's launch$" ;;
help)
    ok --help
    has out.txt 'gradcheck'
    has out.txt '^  version, --version' ;;
bench_only)
    refused "no workload 'matmull'; valid: W1-mlp, W2-cnn" bench --only matmull
    refused "W4-matmul" bench --only add,matmull --quick
    refused "no workload '' (empty)" bench --only matmul,,add
    refused "ends with ','" bench --only matmul,
    refused "empty list" bench --only ""
    # every spelling of a name passes the check (--compare then fails on its own)
    "$BIN" bench --only W4-matmul,matmul,W2,gpt,w4,dispatch --compare none.json none.json >out.txt 2>err.txt
    ! grep -q -- "--only" err.txt || { cat err.txt; fail "valid --only names refused"; } ;;
bench_ddp_values)
    refused "--backend 'gloo' is not nccl, mpi or tcp" bench --ddp --backend gloo
    refused "--zero '2': a list of at most 2 of 0, 1" bench --ddp --zero 2
    refused "--zero '0,'" bench --ddp --zero 0,
    refused "--nproc '1,0': a list of at most 8 counts in [1, 64]" bench --ddp --nproc 1,0
    refused "--only 'W4': a list of at most 2 of W3, W5" bench --ddp --only W4
    refused "--ddp-grad-dtype 'fp16'" bench --ddp --ddp-grad-dtype fp16
    refused "--amp 'fp16': one of fp32, bf16" bench --ddp --amp fp16
    refused "unknown device 'cudda'" bench --ddp --device cudda ;;
kernel_params)
    refused "--params 'abc': expected a comma list of at most 8 numbers" kernel run "$KERNEL" --shape 4x8,8 --params abc
    refused "--params '1,,2'" kernel run "$KERNEL" --shape 4x8,8 --params 1,,2
    refused "--params '1,2,3,4,5,6,7,8,9'" kernel run "$KERNEL" --shape 4x8,8 --params 1,2,3,4,5,6,7,8,9 ;;
kernel_names)
    refused "--names 'x': expected 2 different names" kernel run "$KERNEL" --shape 4x8,8 --names x --ref "x+b"
    refused "--names 'x,x'" kernel run "$KERNEL" --shape 4x8,8 --names x,x --ref "x+x"
    refused "--names 'x,1b'" kernel run "$KERNEL" --shape 4x8,8 --names x,1b --ref "x"
    ok kernel run "$KERNEL" --shape 4x8,8 --names inp,bias --ref "gelu(inp + bias)"
    has out.txt 'ok: tolerance' ;;
kernel_help)
    ok kernel --help
    for o in --device --shape --out-shape --rows --f64 --ref --names --entry --params --seed --svg --backward \
        --grads --help; do
        has out.txt "^  (-h, )?$o( |$)"
    done
    has out.txt 'gelu_erf, relu, exp, log'     # what --ref accepts
    has out.txt '<stem>_backward'              # the naming convention
    has out.txt 'temporaries are scoped'
    ok kernel -h ;;
kernel_scalar_shape)
    ok kernel run "$KERNEL" --shape scalar,scalar --ref "gelu(x + b)"
    has out.txt '^output \[1 element\]'
    has out.txt '\(ok: tolerance'
    ok kernel gradcheck "$KERNEL" --f64 --shape scalar,scalar
    has out.txt '^gradcheck ok on cpu' ;;
kernel_bad_ref)
    # refused before the kernel compiles or runs: nothing on stdout (no seed line)
    refused "--ref 'gelu(x +': expected a name, number or '('" kernel run "$KERNEL" --shape 4x8,8 --ref "gelu(x +"
    refused "unknown function 'gelux'" kernel bench "$KERNEL" --shape 4x8,8 --ref "gelux(x)"
    refused "unknown input name 'y'" kernel run "$KERNEL" --shape 4x8,8 --ref "x + y"
    refused "unexpected text" kernel run "$KERNEL" --shape 4x8,8 --ref "x + b)"
    refused "--ref" kernel run /nonexistent.c --shape 4 --ref "("
    refused "--shape '4x'" kernel run "$KERNEL" --shape 4x ;;
kernel_check_glsl)
    "$BIN" version | grep -Eq '^  vulkan +loaded' || { echo "skipped: no Vulkan device"; exit 77; }
    printf '#version 450\n#include <trident.glsl>\nlayout(local_size_x = TD_BLOCK) in;\n%s\nvoid main() {\n%s\n}\n' \
        'layout(std430, binding = 0) writeonly buffer Y { float y[]; };' '    y[td_global_id()] = zz;' >bad.comp
    sed 's/zz/1.0/; s/TD_BLOCK/64/' bad.comp >fixed64.comp
    sed 's/zz/1.0/' bad.comp >good.comp
    ok kernel check good.comp
    has out.txt '^good.comp: compiled for vulkan:0$'
    # the first error on one line, FILE:LINE, printed once; the whole log with --log
    "$BIN" kernel check bad.comp >out.txt 2>err.txt && fail "bad.comp compiled"
    [ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt; fail "expected one stderr line"; }
    has err.txt "^trident kernel: bad.comp:6: 'zz' : undeclared identifier$"
    "$BIN" kernel check bad.comp --log >out.txt 2>err.txt && fail "bad.comp compiled"
    has err.txt '^ERROR: 0:6: .zz'
    # a literal local size other than the op's block: refused, naming both
    "$BIN" kernel check fixed64.comp >out.txt 2>err.txt && fail "a local size of 64 passed the check"
    has err.txt 'fixed64.comp: .*local size to \{64,1,1\} but is launched with a block of 256' ;;
train_plural)
    ok train --model gpt --device cpu --text /usr/share/common-licenses/GPL-3 --d-model 8 --layers 1 --heads 2 \
        --context 8 --batch 4 --steps 1 --epochs 1 --checkpoint c.safetensors
    has out.txt ' 1 step per epoch, 1 epoch$'
    ! grep -Eq '(^|[^0-9])1 (epochs|steps) ' out.txt || { cat out.txt; fail "a count of 1 with a plural noun"; } ;;
*) fail "unknown case" ;;
esac
echo "ok $CASE"
