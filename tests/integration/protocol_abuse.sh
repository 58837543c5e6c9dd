#!/usr/bin/env bash
# Malformed and out-of-order messages close only the offending connection.
source "$(dirname "$0")/lib.sh" "$1" /dev/null
ABUSE_BIN=$2
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384
"$ABUSE_BIN" "$NVSHARE_SOCK_DIR" || fail "protocol abuse"
kill -0 "$SCHED_PID" || fail "the scheduler died"
pass "misbehaving clients are disconnected; the daemon carries on"
