#!/usr/bin/env bash
# A client using a GPU the scheduler does not manage is told once, runs that
# GPU unscheduled and the other scheduled, and stays connected (issue 12,
# item 6): its LOAD reports and memory reports used to name the unmanaged
# GPU, which closed the connection, every second, forever.
source "$(dirname "$0")/lib.sh"
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384

# Memory (MEM_UPDATE) and load (LOAD) land on the unmanaged GPU, listed first.
SIM_MEMORY_MB=64 SIM_BUSY_PERMILLE=900 NVSHARE_DEBUG=1 "$WORKLOAD_BIN" \
    GPU-other,GPU-sim-0 "$(( $(now_ns) + 4000000000 ))" 1000 "$WORK/trace" \
    >"$WORK/w.out" 2>"$WORK/w.err" || fail "the workload failed: $(cat "$WORK/w.err")"

registered=$(log_count "client [0-9]* registered")
sched_warned=$(log_count "uses GPU GPU-other, which this scheduler does not manage")
client_warned=$(grep -c "does not manage GPU GPU-other" "$WORK/w.err" || true)
lost=$(grep -c "lost the scheduler" "$WORK/w.err" || true)
other=$(grep -c "^GPU-other " "$WORK/trace" || true)
managed=$(grep -c "^GPU-sim-0 " "$WORK/trace" || true)
echo "  4 s: $registered registration(s), warnings: scheduler $sched_warned," \
     "client $client_warned; units: unmanaged $other, managed $managed"
[ "$registered" -eq 1 ] || fail "the client registered $registered times"
[ "$lost" -eq 0 ] || fail "the client lost the scheduler $lost times"
[ "$sched_warned" -eq 1 ] || fail "the scheduler warned $sched_warned times"
[ "$client_warned" -eq 1 ] || fail "the client warned $client_warned times"
[ "$(log_count 'disconnecting')" -eq 0 ] || fail "the scheduler disconnected the client"
[ "$other" -gt 0 ] && [ "$managed" -gt 0 ] || fail "a GPU did not run"
[ "$(field grants "$WORK/w.out")" -ge 1 ] || fail "the managed GPU was never granted"
pass "an unmanaged GPU is told once and runs unscheduled without reconnecting"
