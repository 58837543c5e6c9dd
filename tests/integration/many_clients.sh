#!/usr/bin/env bash
# No lock-out (issue 12 item 3): a flood of idle connections and more
# clients than the old fixed 512 leave a real client scheduled; one uid's
# connections beyond NVSHARE_MAX_CONNECTIONS_PER_UID are refused with the
# reason, logged once, and a refused workload says so once, backs off and
# runs unscheduled.
#
#   many_clients.sh SCHEDULER WORKLOAD MANY_CLIENTS NVSHARECTL
source "$(dirname "$0")/lib.sh" "$1" "$2"
MANY_BIN=$3
CTL_BIN=$4
HOLDERS=()
trap 'kill "${HOLDERS[@]}" 2>/dev/null; wait "${HOLDERS[@]}" 2>/dev/null || true; stop_scheduler; rm -rf "$WORK"' EXIT

status_has() { "$CTL_BIN" status >"$WORK/status.out" && grep -q -- "$1" "$WORK/status.out"; }
# many NAME PROGRAM ARGS...: starts many_clients in the background, keeps it
# open. PROGRAM must be a program, not a shell function: a function would run
# in a subshell, $! would be that subshell and killing it would leave the
# program running.
many() {
    local name=$1
    shift
    "$@" >"$WORK/$name.out" 2>&1 &
    HOLDERS+=($!)
    wait_for grep -q '=' "$WORK/$name.out" || fail "$name: no report"
}
# A real client (the client runtime) for 1 s: it must be granted the GPU.
scheduled_workload() {
    "$WORKLOAD_BIN" GPU-sim-0 "$(( $(now_ns) + 1000000000 ))" >"$WORK/$1.out" \
        2>"$WORK/$1.err" || fail "$1: workload failed"
    grep -q 'registered with the scheduler' "$WORK/$1.err" || fail "$1: not registered"
    check "$(field grants "$WORK/$1.out") >= 1" "$1: never granted the GPU"
}

start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_MAX_CONNECTIONS_PER_UID=5
# The uid with the cap must reach the socket.
chmod 755 "$WORK"

# ---- an idle flood does not lock a real client out --------------------------
many idle "$MANY_BIN" "$NVSHARE_SOCK_DIR" 600 GPU-sim-0 idle
grep -q 'connected=600 ' "$WORK/idle.out" || fail "idle flood: $(cat "$WORK/idle.out")"
scheduled_workload beside_idle
wait_for status_has "unregistered 0" || fail "the idle connections were not closed"
closed_lines=$(log_count 'not registered for')
check "$closed_lines >= 1 && $closed_lines <= 10" \
    "closing 600 idle connections took $closed_lines log lines, not a few"
pass "600 idle connections: a real client is still scheduled; they are closed"

# ---- more clients than the old fixed limit ---------------------------------
many registered "$MANY_BIN" "$NVSHARE_SOCK_DIR" 600 GPU-sim-0
grep -q 'registered=600 refused=0' "$WORK/registered.out" ||
    fail "600 clients: $(cat "$WORK/registered.out")"
status_has "clients 600 " || fail "status does not count 600 clients"
scheduled_workload beside_600
pass "600 registered clients (root is exempt from the per-uid cap), and one more is scheduled"

# ---- the per-uid cap ---------------------------------------------------------
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
many capped "${AS_NOBODY[@]}" "$MANY_BIN" "$NVSHARE_SOCK_DIR" 8 GPU-sim-0
grep -q 'registered=5 refused=3 failed=0' "$WORK/capped.out" ||
    fail "uid 65534 with a cap of 5: $(cat "$WORK/capped.out")"
status_has "refused 3$" || fail "status does not count 3 refused connections"
[ "$(log_count 'refusing connections of uid 65534')" = 1 ] ||
    fail "expected one log line for the burst of refusals"
pass "uid 65534: 5 connections, 3 refused with the reason, one log line"

# ---- a refused workload: one warning, back-off, unscheduled -----------------
before=$("$CTL_BIN" status --json | sed -n 's/.*"refused_connections": \([0-9]*\).*/\1/p')
NVSHARE_RECONNECT_INTERVAL=500ms "${AS_NOBODY[@]}" "$WORKLOAD_BIN" GPU-sim-0 \
    "$(( $(now_ns) + 3000000000 ))" >"$WORK/refused.out" 2>"$WORK/refused.err" ||
    fail "refused workload failed"
[ "$(grep -c 'refused this process: uid 65534 has 5 connections' "$WORK/refused.err")" = 1 ] ||
    fail "expected one warning with the reason: $(cat "$WORK/refused.err")"
check "$(field held_ms "$WORK/refused.out") >= 2500" "the refused workload did not run unscheduled"
after=$("$CTL_BIN" status --json | sed -n 's/.*"refused_connections": \([0-9]*\).*/\1/p')
# Without the back-off it would knock every 500 ms: 6 or 7 times in 3 s;
# with it at 0, 0.5, 1.5 and maybe 3.5 s.
check "$after - $before >= 2 && $after - $before <= 4" \
    "refused workload connected $((after - before)) times in 3 s"
pass "a refused workload warns once, backs off ($((after - before)) attempts in 3 s), runs unscheduled"
