#!/usr/bin/env bash
# fake_job's report for swap tests: with FAKE_JOB_WRITE and FAKE_JOB_IDLE_MS
# its written allocation is intact and at its address at the end
# (lost_bytes=0, address_kept=1), and it pauses after its first batch even
# past the end of its 100 ms window.
# usage: fake_job_report.sh FAKE_JOB
set -euo pipefail
JOB=$1
now=$(date +%s%N)
out=$(FAKE_JOB_MEM_MB=64 FAKE_JOB_WRITE=1 FAKE_JOB_IDLE_MS=300 \
    "$JOB" "$now" $((now + 100000000)))
echo "$out"
grep -qx 'lost_bytes=0' <<<"$out" || { echo "FAIL: content not intact"; exit 1; }
grep -qx 'address_kept=1' <<<"$out" || { echo "FAIL: address not kept"; exit 1; }
end=$(date +%s%N)
[ $((end - now)) -ge 300000000 ] || { echo "FAIL: no pause"; exit 1; }
echo PASS
