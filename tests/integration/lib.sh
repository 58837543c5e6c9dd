# lib.sh - helpers for the scheduler's end-to-end tests (sourced).
#
# Every test runs its own scheduler in a fresh socket directory and awaits
# events (a socket file, a log line) by polling with a deadline rather than
# sleeping for a guessed time.
set -euo pipefail

SCHED_BIN=$1
WORKLOAD_BIN=$2
WORK=$(mktemp -d /tmp/nvshare-test.XXXXXX)
export NVSHARE_SOCK_DIR=$WORK/sock
SCHED_PID=
trap 'stop_scheduler; rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; [ -f "$WORK/sched.log" ] && tail -n 30 "$WORK/sched.log" >&2; exit 1; }
pass() { echo "PASS: $*"; }
now_ns() { date +%s%N; }

# wait_for CMD... : polls CMD every 20 ms for up to 10 s.
wait_for() {
    local deadline=$(( $(date +%s) + 10 ))
    until "$@"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.02
    done
}

# Tests of time slicing run in serial mode unless they say otherwise (the
# daemon's default, auto, would co-run clients it measured as light).
start_scheduler() { # env assignments for the scheduler as arguments
    env NVSHARE_DEBUG=1 NVSHARE_SCHEDULING_MODE=serial "$@" "$SCHED_BIN" \
        >>"$WORK/sched.log" 2>&1 &
    SCHED_PID=$!
    wait_for test -S "$NVSHARE_SOCK_DIR/scheduler.sock" || fail "scheduler did not start"
}

stop_scheduler() {
    if [ -n "$SCHED_PID" ]; then
        kill "$SCHED_PID" 2>/dev/null || true
        wait "$SCHED_PID" 2>/dev/null || true
        SCHED_PID=
    fi
}

log_count() { grep -c -- "$1" "$WORK/sched.log" || true; }
log_has_at_least() { [ "$(log_count "$1")" -ge "$2" ]; }

# field NAME FILE: the value of NAME=... in a workload's report line.
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2" | tail -n 1; }

# check EXPR MESSAGE: evaluates a floating-point condition with awk.
check() { awk "BEGIN { exit !($1) }" || fail "$2"; }
