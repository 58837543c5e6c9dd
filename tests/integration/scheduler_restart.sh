#!/usr/bin/env bash
# A scheduler restart mid-run loses no workload: clients keep running while
# it is gone (fail-open), re-register when it is back, and take turns again.
source "$(dirname "$0")/lib.sh"
export NVSHARE_RECONNECT_INTERVAL=100ms
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_TQ=100ms

until=$(( $(now_ns) + 5000000000 ))
"$WORKLOAD_BIN" GPU-sim-0 "$until" >"$WORK/a.out" 2>"$WORK/a.err" & a=$!
"$WORKLOAD_BIN" GPU-sim-0 "$until" >"$WORK/b.out" 2>"$WORK/b.err" & b=$!
wait_for log_has_at_least "registered:" 2 || fail "clients did not register"
wait_for log_has_at_least "lease 3 to" 1 || fail "no time slicing before the restart"

kill -9 "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null || true; SCHED_PID=
: >"$WORK/sched.log"
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_TQ=100ms
wait_for log_has_at_least "registered:" 2 || fail "clients did not re-register"
wait_for log_has_at_least "lease 3 to" 1 || fail "no time slicing after the restart"

wait "$a" "$b" || fail "a workload failed"
for w in a b; do
    grep -q "units=" "$WORK/$w.out" || fail "workload $w did not finish"
    grep -q "reconnected" "$WORK/$w.err" || fail "workload $w did not reconnect"
done
pass "workloads survive a scheduler restart and re-register"
