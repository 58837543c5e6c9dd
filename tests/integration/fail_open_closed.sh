#!/usr/bin/env bash
# Without a scheduler a workload runs unscheduled after one warning
# (fail-open); with NVSHARE_FAIL_CLOSED=1 it waits until one appears.
source "$(dirname "$0")/lib.sh"
export NVSHARE_RECONNECT_INTERVAL=50ms

"$WORKLOAD_BIN" GPU-sim-0 "$(( $(now_ns) + 1000000000 ))" >"$WORK/open.out" 2>"$WORK/open.err" ||
    fail "fail-open workload failed"
held=$(field held_ms "$WORK/open.out")
check "$held >= 900" "fail-open workload ran only $held ms of 1000"
[ "$(grep -c 'no scheduler' "$WORK/open.err")" = 1 ] || fail "expected exactly one warning"
pass "fail-open: runs unscheduled with one warning"

until=$(( $(now_ns) + 3000000000 ))
NVSHARE_FAIL_CLOSED=1 "$WORKLOAD_BIN" GPU-sim-0 "$until" >"$WORK/closed.out" 2>"$WORK/closed.err" & w=$!
wait_for grep -q 'no scheduler' "$WORK/closed.err" || fail "no warning"
started=$(now_ns)
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
wait "$w" || fail "fail-closed workload failed"
first=$(field first_unit_ns "$WORK/closed.out")
check "$first >= $started" "fail-closed workload ran before the scheduler existed"
pass "fail-closed: waits for the scheduler"
