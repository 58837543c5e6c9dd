#!/usr/bin/env bash
# Evictable memory is what is really evictable (issue 10, item 3), on the
# fake GPU with the real scheduler and libnvshare. The scheduler makes
# oversubscription the node default (NVSHARE_ENABLE_OVERSUB=1 on the
# daemon), the jobs do not set it, the GPU has 10 GiB (9 GiB admitted), and
# each job's first CUDA call after its context is a 6 GiB cuMemAlloc_v2,
# made before its REGISTER_OK can have arrived.
#
#  1. Scheduler up: the allocation waits for the node default and becomes
#     managed memory; each job reports its 6 GiB as evictable (status), and
#     the two jobs (6.5 GiB footprints) alternate with swaps, never both
#     resident.
#  2. Scheduler not up yet when the first job allocates: its 6 GiB stay
#     device memory and, once it has registered, are reported non-evictable;
#     a second job is then not admitted beside it (no kernel of the second
#     while the first lives) and the first is never asked to swap out.
#
# usage: oversub_node_default.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4 CTL=$5
WORK=$(mktemp -d /tmp/nvshare-nodedefault.XXXXXX)
SCHED_PID= JOB_PIDS=()
trap 'kill $SCHED_PID "${JOB_PIDS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
UUID=GPU-fa4e0000-0000-0000-0000-000000000000
GiB=1073741824
fail() { echo "FAIL: $*" >&2; tail -n 30 "$WORK"/sched.log "$WORK"/*.err >&2; exit 1; }
export NVSHARE_SOCK_DIR=$WORK

start_scheduler() {
    NVSHARE_DEBUG=1 NVSHARE_ENABLE_OVERSUB=1 NVSHARE_GPUS=$UUID:10240 \
        NVSHARE_SCHEDULING_MODE=concurrent NVSHARE_SWITCH_TIME_MODE=fixed \
        NVSHARE_SWITCH_TIME_FIXED=500ms "$SCHED" >"$WORK/sched.log" 2>&1 &
    SCHED_PID=$!
    for _ in $(seq 500); do [ -S "$WORK/scheduler.sock" ] && break; sleep 0.02; done
    [ -S "$WORK/scheduler.sock" ] || fail "the scheduler did not start"
}

stop_scheduler() {
    kill "$SCHED_PID"
    wait "$SCHED_PID" 2>/dev/null || true
    SCHED_PID=
}

# job NAME SECONDS: a 6 GiB job in the background, its trace in $WORK/NAME.
job() {
    local now; now=$(date +%s%N)
    mkdir -p "$WORK/$1"
    LD_LIBRARY_PATH=$FAKE_DIR LD_PRELOAD=$LIB FAKE_CUDA_TRACE_DIR=$WORK/$1 \
        FAKE_JOB_MEM_MB=6144 FAKE_CUDA_MEM_MB=81920 NVSHARE_RECONNECT_INTERVAL=100ms \
        NVSHARE_POD_NAME="$1" "$JOB" "$now" $(( now + $2 * 1000000000 )) \
        >"$WORK/$1.out" 2>"$WORK/$1.err" &
    JOB_PIDS+=($!)
}

# status_of POD FIELD: the field of that pod's client in `status --json`.
status_of() {
    "$CTL" status --json | python3 -c 'import json, sys
c = [c for c in json.load(sys.stdin)["clients"] if c["pod"] == sys.argv[1]]
print(c[0][sys.argv[2]] if c else -1)' "$1" "$2"
}

await_status() { # POD FIELD VALUE
    for _ in $(seq 250); do
        [ "$(status_of "$1" "$2")" = "$3" ] && return 0
        sleep 0.02
    done
    fail "$1: $2 is $(status_of "$1" "$2"), want $3"
}

# ---- 1. the allocation waits for the node default ---------------------------
start_scheduler
job a 4
job b 4
await_status a evictable_bytes $(( 6 * GiB ))
await_status b evictable_bytes $(( 6 * GiB ))
[ "$(status_of a oversubscribed)" = True ] || fail "a: not oversubscribed"
[ "$(status_of a non_evictable_bytes)" -lt $GiB ] || fail "a: device memory beside its managed memory"
wait "${JOB_PIDS[@]}" || fail "a job failed"
JOB_PIDS=()
grep -q "waits for memory" "$WORK/sched.log" || fail "6.5 + 6.5 GiB were admitted on 9 GiB"
outs=$(cat "$WORK"/a/trace.* "$WORK"/b/trace.* | grep -cE '^(discard|prefetch_host) ' || true)
[ "$outs" -ge 1 ] || fail "no swap-out"
# Never both resident: a kernel of one only while the other is swapped out
# (after its discard, or its prefetch to the host while its pinned copy was
# still being made, and before its next swap-in) or gone.
{ for j in a b; do
      awk -v c="$j" '$1 == "discard" || $1 == "prefetch_host" { print $3, "out", c; next }
                     $1 == "discard_prefetch_device" || $1 == "prefetch_device" { print $2, "in", c; next }
                     /^(copy|prefetch)/ { next }
                     { print $2, "unit", c; if ($3 > last) last = $3 }
                     END { print last, "gone", c }' "$WORK"/$j/trace.*
  done; } | sort -k1,1n | awk '
    function other(c) { return c == "a" ? "b" : "a" }
    $2 == "unit" { if (on[other($3)]) { print "kernel of " $3 " at " $1 " while " other($3) " is resident"; bad++ }
                   on[$3] = 1 }
    $2 == "in" { on[$3] = 1 }
    $2 == "out" || $2 == "gone" { on[$3] = 0 }
    END { exit bad > 0 }' || fail "both jobs were resident at once"
echo "PASS: allocations before REGISTER_OK follow the node default: 6 GiB evictable each, $outs swap-outs, never co-resident"
stop_scheduler

# ---- 2. made before any registration: counted non-evictable -----------------
rm -f "$WORK/scheduler.sock"
job early 5
for _ in $(seq 250); do grep -q "no scheduler" "$WORK/early.err" && break; sleep 0.02; done
grep -q "no scheduler" "$WORK/early.err" || fail "the early job did not start without a scheduler"
start_scheduler
await_status early non_evictable_bytes $(( 6 * GiB + 512 * 1048576 ))
[ "$(status_of early evictable_bytes)" = 0 ] || fail "early: device memory reported evictable"
job late 6
wait "${JOB_PIDS[@]}" || fail "a job failed"
JOB_PIDS=()
early_end=$(awk '!/^(copy|discard|prefetch)/ && $3 > e { e = $3 } END { print e }' "$WORK"/early/trace.*)
late_start=$(awk '!/^(copy|discard|prefetch)/ && (s == "" || $2 < s) { s = $2 } END { print s }' "$WORK"/late/trace.*)
[ -n "$late_start" ] || fail "the late job never ran"
[ "$late_start" -gt "$early_end" ] || fail "the late job ran beside 6 GiB that cannot move"
! grep -q "client 1 swaps out" "$WORK/sched.log" || fail "the job with nothing evictable was asked to swap out"
echo "PASS: device memory allocated before registration counts as non-evictable: the second job ran only after the first ended"
