#!/usr/bin/env bash
# make demo says what it shows, and shows what it says: scripts/demo.sh on
# this build, its guide's claims checked against what it printed: every
# pod in the status, a queue that waits on the lock (or on job-3's limit),
# the POD table with job-3's declared 20 %, job-3 below the unlimited jobs
# in the result; on the fake GPU also a 2048 MiB allocation refused over a
# 1Gi quota (with libnvshare's line) while 512 MiB is granted, and a
# high-priority job's first kernel within 1 s while a low one holds the GPU
# with a 30 s quantum.
#   demo_guide.sh DEMO_SCRIPT BUILD_DIR
set -u
DEMO=$1 BUILD=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
NVSHARE_DEMO_DIR=$work/demo timeout 150 "$DEMO" "$BUILD" >"$work/out" 2>&1 ||
    { cat "$work/out"; echo "FAIL: the demo failed"; exit 1; }
out=$work/out
has() { grep -q -- "$1" "$out" || fail "${2:-the demo does not print '$1'}"; }
for i in 1 2 3; do has "demo/job-$i" "no demo/job-$i in the status"; done
has "waiting .*(lock)\|waiting .*(throttled)" "no job waits in the status the guide explains"
has "^POD .*CORE LIMIT" "no POD table, which the guide explains"
has "demo/job-3 .* 20% declared" "the POD table does not show job-3's declared 20 %"
share() { awk -v j="$1" '$1 == j { sub(/%/, "", $NF); print $NF }' "$out"; }
s1=$(share job-1) s2=$(share job-2) s3=$(share job-3)
echo "  shares of solo: job-1 $s1 %, job-2 $s2 %, job-3 (20 %) $s3 %"
awk -v a="$s1" -v b="$s2" -v c="$s3" 'BEGIN { exit !(c < a && c < b) }' ||
    fail "job-3, limited to 20 %, did not get less than the unlimited jobs"
if grep -q "fake GPU" "$out"; then
    has "a 512 MiB allocation of demo/small: granted"
    has "a 2048 MiB allocation of demo/small: refused (CUDA_ERROR_OUT_OF_MEMORY)"
    has "GPU memory quota exceeded on gpu 0 (pod demo/small): limit 1.00 GiB"
    first=$(sed -n "s/.*demo\/service's first kernel completed \([0-9.]*\) ms.*/\1/p" "$out")
    echo "  the high-priority job's first kernel: ${first:-?} ms"
    [ -n "$first" ] && awk -v f="$first" 'BEGIN { exit !(f < 1000) }' ||
        fail "the high-priority job's first kernel took ${first:-?} ms, not under 1 s"
fi
[ $failed = 0 ] || { echo "--- the demo printed:"; cat "$out"; exit 1; }
echo "PASS: the demo shows what its guide says"
