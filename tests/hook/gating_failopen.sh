#!/usr/bin/env bash
# Without a scheduler the application runs (fail-open) and says so once;
# every launch, legacy and per-thread stream alike, went through the gate.
# usage: gating_failopen.sh LIBNVSHARE FAKE_LIB_DIR GATING_TEST
set -euo pipefail
LIB=$1 FAKE=$2 TEST=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
NVSHARE_SOCK_DIR=$dir LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB NVSHARE_STATS=1 \
    "$TEST" run 20 1000 >"$dir/out" 2>"$dir/err" || { cat "$dir/out" "$dir/err"; echo "FAIL: run"; exit 1; }
cat "$dir/out"
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$dir/out"; }
warnings=$(grep -c "warning:" "$dir/err" || true)
[ "$(field gated)" = 20 ] || { echo "FAIL: legacy launches not gated"; exit 1; }
[ "$(field gated_ptsz)" = 20 ] || { echo "FAIL: per-thread launches not gated"; exit 1; }
awk "BEGIN { exit !($(field total_ms) >= 20) }" || { echo "FAIL: kernels did not take their time"; exit 1; }
[ "$warnings" -eq 1 ] || { cat "$dir/err"; echo "FAIL: $warnings warnings, want 1"; exit 1; }
echo "PASS: ran unscheduled with one warning: $(grep "warning:" "$dir/err")"
