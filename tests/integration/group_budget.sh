#!/usr/bin/env bash
# A group (nvsharectl set group): two pods draw on one memory budget on a
# GPU, as a DRA claim shared by two pods does. One pod alone may take more
# than half of it; together they never exceed it; the status shows which
# group a client is billed to; a group survives a restart; reset ends it;
# malformed groups are refused.
source "$(dirname "$0")/lib.sh" "$1" "$2"
ALLOC_BIN=$2
CTL_BIN=$3
ctl() { "$CTL_BIN" "$@"; }
STATE=$WORK/state.conf
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384,GPU-sim-1:16384 NVSHARE_STATE_FILE="$STATE"
alloc() { # POD ARGS...: sim_alloc as a process of team/POD; always in a
          # subshell ($(...) or &), which exec makes the process to kill
    NVSHARE_POD_NAMESPACE=team NVSHARE_POD_NAME=$1 exec "$ALLOC_BIN" "${@:2}"
}

ctl set group claim-1 --gpu 0 --pods team/a,team/b --memory 1000Mi --core 30 |
    grep -q "group claim-1: 2 pod(s) billed together on gpu 0" || fail "set group"
grep -q "^group claim-1 gpu=0 pods=team/a,team/b memory-limit=1000Mi core-limit=30$" "$STATE" ||
    fail "the state file lacks the group: $(cat "$STATE")"

# 1. One pod alone takes 700 MiB of the 1000: more than an even split's 500.
alloc a GPU-sim-0 hold 700 60 >"$WORK/a.out" & holder=$!
wait_for grep -q held "$WORK/a.out" || fail "pod a could not take 700 MiB of its group's 1000"
# 2. Together they stay within it: b gets what a leaves, not more.
[ "$(alloc b GPU-sim-0 try 400)" = refused ] || fail "pod b took 400 MiB beside a's 700 of 1000"
[ "$(alloc b GPU-sim-0 try 250)" = ok ] || fail "pod b was refused 250 MiB of the 300 left"
# On another GPU each pod is its own: no group, no limit there.
[ "$(alloc b GPU-sim-1 try 2000)" = ok ] || fail "the group held on a GPU it is not on"
pass "two pods share one 1000 MiB budget: one alone took 700, the other the rest"

ctl status >"$WORK/status"
grep -q "team/a (group claim-1)" "$WORK/status" || fail "status does not show a's group: $(cat "$WORK/status")"
ctl status --json | grep -q '"group": "claim-1"' || fail "status --json does not show the group"
pass "status shows the group a client is billed to"

# 3. Removed while a holds 700: b is its own pod again, unlimited.
ctl reset group claim-1 | grep -q "group claim-1 removed" || fail "reset group"
[ "$(alloc b GPU-sim-0 try 400)" = ok ] || fail "pod b still held by a removed group"
ctl status | grep -q "(group " && fail "status still shows a group"
# ... and set again while a is connected: a moves into it with its 700.
ctl set group claim-1 --gpu 0 --pods team/a,team/b --memory 1000Mi >/dev/null
[ "$(alloc b GPU-sim-0 try 400)" = refused ] || fail "a connected pod did not move into its group"
kill "$holder"; wait "$holder" 2>/dev/null || true
pass "reset group frees its pods; a group set later takes in connected pods"

# 4. Kept across a restart.
stop_scheduler
start_scheduler NVSHARE_GPUS=GPU-sim-0:16384,GPU-sim-1:16384 NVSHARE_STATE_FILE="$STATE"
alloc a GPU-sim-0 hold 700 60 >"$WORK/a.out" & holder=$!
wait_for grep -q held "$WORK/a.out" || fail "pod a could not allocate after the restart"
[ "$(alloc b GPU-sim-0 try 400)" = refused ] || fail "the group did not survive a restart"
kill "$holder"; wait "$holder" 2>/dev/null || true
pass "a group survives a restart"

# 5. Refusals: the operator's input is judged, none of it half applied.
expect() { # STATUS MESSAGE ARGS...
    local want=$1 text=$2 rc=0
    shift 2
    ctl "$@" >/dev/null 2>"$WORK/err" || rc=$?
    [ "$rc" = "$want" ] || fail "nvsharectl $*: exit status $rc, expected $want"
    grep -qF -- "$text" "$WORK/err" || fail "nvsharectl $*: '$(cat "$WORK/err")' lacks '$text'"
}
expect 1 "is in group claim-1 on that GPU already" set group claim-2 --gpu 0 --pods team/b,team/c
expect 1 "a pod is named twice" set group claim-2 --gpu 0 --pods team/c,team/c
expect 1 "no GPU '7'" set group claim-2 --gpu 7 --pods team/c
expect 1 "group's name" set group 'bad/name' --gpu 0 --pods team/c
expect 1 "no group 'claim-9'" reset group claim-9
expect 2 "--gpu names its GPU" set group claim-2 --pods team/c
expect 2 "--pods names its pods" set group claim-2 --gpu 0
expect 2 "--core" set group claim-2 --gpu 0 --pods team/c --core 101
expect 2 "16 pods at most" set group claim-2 --gpu 0 --pods "$(seq -s, -f 'p%g' 17)"
ctl set group claim-2 --gpu 1 --pods team/b,team/c >/dev/null || fail "a pod in groups on two GPUs"
ctl reset group claim-1 >/dev/null && ctl reset group claim-2 >/dev/null || fail "reset group"
grep -q "^group" "$STATE" && fail "the state file keeps a removed group"
pass "bad groups are refused with the reason; reset empties the state"
