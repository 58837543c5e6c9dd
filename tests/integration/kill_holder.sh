#!/usr/bin/env bash
# kill -9 of the holder hands the lock to the next waiter within 100 ms.
source "$(dirname "$0")/lib.sh"
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_TQ=60s

until=$(( $(now_ns) + 30000000000 ))
"$WORKLOAD_BIN" GPU-sim-0 "$until" >"$WORK/holder.out" & holder=$!
wait_for log_has_at_least "lease 1 to client 1" 1 || fail "first client not granted"
"$WORKLOAD_BIN" GPU-sim-0 "$(( $(now_ns) + 2000000000 ))" >"$WORK/waiter.out" & waiter=$!
wait_for log_has_at_least "client 2 requests the lock" 1 || fail "second client did not ask"

killed_at=$(now_ns)
kill -9 "$holder"
wait "$waiter" || fail "the waiter failed"
first=$(field first_unit_ns "$WORK/waiter.out")
[ -n "$first" ] && [ "$first" != 0 ] || fail "the waiter never ran"
handover_ms=$(awk "BEGIN { printf \"%.1f\", ($first - $killed_at) / 1e6 }")
echo "  lock handed over ${handover_ms} ms after kill -9 of the holder"
check "$handover_ms < 100" "handover took $handover_ms ms"
pass "the lock of a killed holder passes on"
