#!/usr/bin/env bash
# A holder that stops submitting gives the GPU back by itself once its work
# has completed (NVSHARE_IDLE_RELEASE), long before its time quantum ends.
source "$(dirname "$0")/lib.sh"
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_TQ=60s

# The idler works for 300 ms, then stays connected and idle for 5 s.
start=$(now_ns)
SIM_LINGER_MS=5000 NVSHARE_IDLE_RELEASE=250ms "$WORKLOAD_BIN" GPU-sim-0 $(( start + 300000000 )) \
    >"$WORK/idler.out" 2>/dev/null &
idler=$!
wait_for log_has_at_least "lease 1 to client 1" 1 || fail "the idler never got the GPU"
"$WORKLOAD_BIN" GPU-sim-0 $(( start + 3000000000 )) >"$WORK/waiter.out" 2>/dev/null & waiter=$!
wait "$waiter" || fail "the waiter failed"
first=$(field first_unit_ns "$WORK/waiter.out")
wait_ms=$(awk -v f="$first" -v s="$start" 'BEGIN { printf "%.0f", (f - s) / 1e6 - 300 }')
echo "  the waiter started ${wait_ms} ms after the idler's last submission (TQ 60 s, idle release 250 ms)"
check "$wait_ms < 1500" "the idle holder kept the GPU for $wait_ms ms"
wait "$idler" || true
pass "an idle holder releases the GPU early"
