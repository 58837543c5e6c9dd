#!/usr/bin/env bash
# Random client traffic for 8 s (fixed seed) leaves the daemon alive,
# nvsharectl status answering and a well-behaved client served.
source "$(dirname "$0")/lib.sh" "$1" /dev/null
FUZZ_BIN=$2
CTL_BIN=$3
SEED=${NVSHARE_FUZZ_SEED:-20261123}
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384,GPU-sim-1:16384 NVSHARE_TQ=20ms \
    NVSHARE_SCHEDULING_MODE=auto NVSHARE_DEBUG=0
"$FUZZ_BIN" "$NVSHARE_SOCK_DIR" "$SEED" 8 || fail "fuzzing (seed $SEED)"
kill -0 "$SCHED_PID" || fail "the scheduler died (seed $SEED)"
"$CTL_BIN" status >"$WORK/status" || fail "nvsharectl status did not answer (seed $SEED)"
grep -q "GPU-sim-1" "$WORK/status" || fail "status is missing a GPU: $(cat "$WORK/status")"
pass "the scheduler survives random client traffic (seed $SEED)"
