#!/bin/sh
# The trident CLI's surface a new user meets first: --version / version, the
# help texts, and option values that name things (a comma list of workloads, a
# reference expression) refused with the valid choices before anything runs.
#
# usage: test_cli.sh TRIDENT_BINARY CASE      (CASE from the list below; CTest runs each)
#        test_cli.sh - --list
# Exit 0 pass, 1 fail.
set -u
CASES="version version_no_plugins help"
[ "$2" = --list ] && { echo "$CASES" | tr ' ' '\n'; exit 0; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
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
    TRIDENT_PLUGIN_DIR=$T/empty "$BIN" version >out.txt 2>err.txt || fail "exit $?"
    has out.txt '^  cuda +unavailable: plugin not loaded: .*libtrident-cuda\.so'
    has out.txt '^  vulkan +unavailable: plugin not loaded: .*libtrident-vulkan\.so'
    has out.txt '^plugins in .*/empty: none$' ;;
help)
    ok --help
    has out.txt 'gradcheck'
    has out.txt '^  version, --version' ;;
*) fail "unknown case" ;;
esac
echo "ok $CASE"
