#!/bin/sh
# Where trident train keeps checkpoints (issue 27): nowhere unless asked, as a
# PyTorch script would; --checkpoint FILE or --save-dir DIR keep one, the final
# line names it, and --resume / --checkpoint-every without one are refused.
#
# usage: test_train_save.sh TRIDENT_BINARY CASE      (CASE from the list below; CTest runs each)
#        test_train_save.sh - --list
# Exit 0 pass, 1 fail, 77 skipped (no text file).
set -u
CASES="no_default_file save_dir checkpoint_file needs_destination"
[ "$2" = --list ] && { echo "$CASES" | tr ' ' '\n'; exit 0; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
CASE=$2
TEXT=/usr/share/common-licenses/GPL-3
[ -f "$TEXT" ] || { echo "SKIP $CASE: no $TEXT to train on"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

fail() { echo "FAIL $CASE: $*"; exit 1; }
# tiny ARGS...: a 2-step W3 on the CPU; stdout in out.txt, stderr in err.txt
tiny() {
    "$BIN" train --model gpt --device cpu --text "$TEXT" --d-model 8 --layers 1 --heads 2 --context 8 --batch 4 \
        --steps 2 --epochs 1 "$@" >out.txt 2>err.txt || { cat out.txt err.txt; fail "trident train $* exited $?"; }
}
last() { tail -n 1 out.txt; }

case $CASE in
no_default_file)
    tiny
    [ -z "$(ls -A | grep -v '^out.txt$\|^err.txt$')" ] || { ls -A; fail "files left in the current directory unasked"; }
    last | grep -q '^no checkpoint kept (--checkpoint FILE or --save-dir DIR keeps one)$' || { cat out.txt; fail "final line"; }
    tiny --max-steps 1
    [ -z "$(ls -A | grep -v '^out.txt$\|^err.txt$')" ] || { ls; fail "--max-steps wrote a file unasked"; }
    last | grep -q 'no checkpoint kept' || { cat out.txt; fail "--max-steps final line"; } ;;
save_dir)
    tiny --save-dir runs/a # made with its parents
    [ -f runs/a/trident-gpt.safetensors ] || { ls -R; fail "no runs/a/trident-gpt.safetensors"; }
    tiny --save-dir run
    [ -f run/trident-gpt.safetensors ] || { ls -R; fail "no run/trident-gpt.safetensors"; }
    last | grep -q '^checkpoint: run/trident-gpt.safetensors$' || { cat out.txt; fail "final line"; }
    tiny --save-dir run --epochs 2 --resume
    grep -q "resumed from run/trident-gpt.safetensors" out.txt || { cat out.txt; fail "--resume with --save-dir"; } ;;
checkpoint_file)
    tiny --checkpoint my.safetensors
    [ -f my.safetensors ] || fail "no my.safetensors"
    last | grep -q '^checkpoint: my.safetensors$' || { cat out.txt; fail "final line"; } ;;
needs_destination)
    for a in --resume "--checkpoint-every 1" "--checkpoint a.st --save-dir d"; do
        # shellcheck disable=SC2086
        "$BIN" train --model gpt --device cpu --text "$TEXT" $a >out.txt 2>err.txt && fail "$a ran"
        [ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt; fail "$a: expected one stderr line"; }
        grep -Eq '^trident train: .*(needs a checkpoint: --checkpoint FILE or --save-dir DIR|give one)' err.txt ||
            { cat err.txt; fail "$a: message"; }
    done ;;
*) fail "unknown case" ;;
esac
echo "ok $CASE"
