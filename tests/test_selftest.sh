#!/bin/sh
# The Vulkan self-test's denylist with a planted failing variant (lavapipe in CI):
# TRIDENT_VULKAN_PLANT=softmax_f32 makes that kernel write NaN on purpose.
#   1. the plant works: the softmax conformance case fails;
#   2. trident devices --selftest softmax finds it, passes with the generic twin,
#      and records "deny softmax_f32" for this driver;
#   3. with the record, the planted run passes and says once which kernel it replaced;
#   4. --selftest again without the plant denies nothing (the record is rewritten).
# usage: test_selftest.sh TRIDENT_BINARY TEST_CONFORMANCE_BINARY    exit 0 pass, 1 fail, 77 skipped
set -u
BIN=$1 CONF=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export XDG_CACHE_HOME=$T TD_BACKENDS=vulkan:0 TD_CONFORMANCE_TINY=1 TRIDENT_VULKAN_DEVICE=llvmpipe
unset TRIDENT_VULKAN_DISABLE TRIDENT_VULKAN_PIPELINE_CACHE
fail() { echo "FAIL: $*"; exit 1; }
"$BIN" devices > "$T/devices.txt" 2>&1
grep -q "^vulkan:0 " "$T/devices.txt" || { echo "SKIP: no lavapipe device"; cat "$T/devices.txt"; exit 77; }
grep -q "subgroup_arith=1" "$T/devices.txt" || { echo "SKIP: no subgroup arithmetic (softmax_f32 never runs)"; exit 77; }

TRIDENT_VULKAN_PLANT=softmax_f32 "$CONF" softmax > "$T/planted.txt" 2>&1 &&
  { cat "$T/planted.txt"; fail "the planted variant did not make softmax fail"; }
echo "1. planted softmax_f32 fails conformance: ok"

TRIDENT_VULKAN_PLANT=softmax_f32 "$BIN" devices --selftest softmax > "$T/st.txt" 2>&1 ||
  { cat "$T/st.txt"; fail "the self-test reported a failure that no generic variant fixes"; }
cat "$T/st.txt"
grep -q "passes with the generic variant of softmax_f32" "$T/st.txt" || fail "the self-test did not find softmax_f32"
REC=$(ls "$T"/trident/vulkan-selftest-*.txt 2>/dev/null | head -1)
[ -n "$REC" ] || fail "no record beside the pipeline cache"
grep -qx "deny softmax_f32" "$REC" || { cat "$REC"; fail "the record does not deny softmax_f32"; }
echo "2. the self-test denies softmax_f32 in $(basename "$REC"): ok"

TRIDENT_VULKAN_PLANT=softmax_f32 "$CONF" softmax > "$T/after.txt" 2>&1 || { cat "$T/after.txt"; fail "still failing"; }
n=$(grep -c "kernel softmax_f32 failed this driver's self-test" "$T/after.txt")
[ "$n" -ge 1 ] || { cat "$T/after.txt"; fail "no warning that softmax_f32 was replaced"; }
echo "3. with the record the planted run passes, warning: ok"

"$BIN" devices --selftest softmax > "$T/st2.txt" 2>&1 || { cat "$T/st2.txt"; fail "clean self-test failed"; }
grep -q "^deny" "$REC" && { cat "$REC"; fail "a clean self-test still denies"; }
echo "4. a clean self-test clears the record: ok"
