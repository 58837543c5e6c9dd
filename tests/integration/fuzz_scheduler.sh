#!/usr/bin/env bash
# Random client traffic for 8 s (fixed seed) leaves the daemon alive,
# nvsharectl status answering and a well-behaved client served, and takes
# a bounded log: lines about clients are charged to their uid (log.h), so
# 8 s of fuzzing from one uid write tens of lines (160,581 before).
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
lines=$(wc -l <"$WORK/sched.log")
bytes=$(wc -c <"$WORK/sched.log")
echo "log: $lines lines, $bytes bytes"
[ "$lines" -le 1000 ] || fail "8 s of fuzzing wrote $lines log lines (at most 1000)"
pass "the scheduler survives random client traffic (seed $SEED), $lines log lines"
