#!/usr/bin/env bash
# The state file wins over the environment, and says so: after `nvsharectl
# set tq 1s`, a restart with NVSHARE_TQ=3s runs at 1s with one warning that
# names both values and `nvsharectl reset tq`; reset sets the environment's
# 3s at once and takes tq out of the state file, so the next restart runs
# at 3s without a warning. A run-time setting the environment does not set
# (switch-time here) warns of nothing. Reset of the mode too.
source "$(dirname "$0")/lib.sh" "$1" "$2"
CTL_BIN=$3
ctl() { "$CTL_BIN" "$@"; }
export NVSHARE_STATE_FILE=$WORK/state.conf
GPUS=GPU-sim-0:16384
tq() { ctl status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["tq_ns"])'; }
mode() { ctl status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["gpus"][0]["mode"])'; }
restart() { stop_scheduler; : >"$WORK/sched.log"; start_scheduler NVSHARE_GPUS=$GPUS "$@"; }

start_scheduler NVSHARE_GPUS=$GPUS NVSHARE_TQ=3s
ctl set tq 1s >/dev/null
ctl set switch-time 5s >/dev/null
ctl set mode concurrent >/dev/null
restart NVSHARE_TQ=3s

[ "$(tq)" = 1000000000 ] || fail "the state file's tq did not apply: $(tq) ns"
warnings=$(grep -c "overridden" "$WORK/sched.log" || true)
grep "overridden" "$WORK/sched.log" | sed 's/^/  /'
grep -q "NVSHARE_TQ=3s is overridden by the state file's tq 1s .*'nvsharectl reset tq'" \
    "$WORK/sched.log" || fail "no warning that names NVSHARE_TQ=3s, tq 1s and the reset"
grep -q "NVSHARE_SCHEDULING_MODE=serial is overridden by the state file's mode concurrent" \
    "$WORK/sched.log" || fail "no warning for the mode the environment set"
[ "$warnings" = 2 ] || fail "$warnings warnings, expected 2 (tq and mode; not switch-time)"

out=$(ctl reset tq) || fail "reset tq failed: $out"
echo "  reset tq: $out"
[ "$(tq)" = 3000000000 ] || fail "reset did not set the environment's 3s: $(tq) ns"
grep -q "^tq " "$NVSHARE_STATE_FILE" && fail "the state file still holds tq: $(cat "$NVSHARE_STATE_FILE")"
grep -q "^switch-time 5s" "$NVSHARE_STATE_FILE" || fail "reset tq lost the switch time"
out=$(ctl reset mode) || fail "reset mode failed: $out"
[ "$(mode)" = serial ] || fail "reset mode did not set the environment's serial: $(mode)"
err=$(ctl reset drain-timeout 2>&1) && fail "reset of a start-up setting succeeded: $err"
echo "  reset drain-timeout: $err"

restart NVSHARE_TQ=3s
[ "$(tq)" = 3000000000 ] || fail "after reset and restart tq is $(tq) ns, not 3s"
grep -q "overridden" "$WORK/sched.log" && fail "a warning after reset: $(grep overridden "$WORK/sched.log")"
pass "state file over environment: $warnings warnings, reset returns to NVSHARE_TQ=3s"
