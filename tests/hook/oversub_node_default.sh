#!/usr/bin/env bash
# Evictable memory is what is really evictable (issue 10, item 3), on the
# fake GPU with the real scheduler and libnvshare. Oversubscription is the
# scheduler's default (nothing set on the daemon), the jobs do not set
# NVSHARE_ENABLE_OVERSUB, the GPU is shared by the jobs' processes
# (FAKE_CUDA_SHARED_GPU), and each job's first CUDA call after its context
# is a 64 MiB cuMemAlloc_v2 that it writes, made before its REGISTER_OK can
# have arrived. The scheduler counts a job as its allocation, the 64 MiB
# of credit it holds beyond it and 16 MiB of context overhead: 144 MiB, of
# which 80 stay resident while it is swapped out.
#
#  1. Scheduler up: the allocation waits for the node default and becomes
#     swappable (a VMM range); each job reports its 64 MiB as evictable
#     (status), and the two jobs alternate with swaps (copies out and
#     back) on a GPU of 280 MiB (252 MiB admitted: 144 + 80 fit, 144 + 144
#     do not), never both resident, content intact.
#  2. NVSHARE_ENABLE_OVERSUB=0 in a job's environment: its 64 MiB stay
#     device memory, reported non-evictable.
#  3. Scheduler not up yet when the first job allocates: its 64 MiB stay
#     device memory and, once it has registered, are reported
#     non-evictable (80 MiB with its context); on a GPU of 200 MiB (180
#     admitted) a second job (144 MiB) is then not admitted beside it (no
#     kernel of the second while the first lives) and the first is never
#     asked to swap out.
#
# usage: oversub_node_default.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4 CTL=$5
source "$(dirname "$0")/lib.sh"
MiB=1048576
fail() { echo "FAIL: $*" >&2; tail -n 30 "$WORK"/sched.log "$WORK"/*.err >&2; exit 1; }
export NVSHARE_SOCK_DIR=$WORK

# The GPU's memory, for the scheduler and the fake device.
GPU_MIB=280

start_scheduler() {
    NVSHARE_DEBUG=1 NVSHARE_GPUS=$UUID:$GPU_MIB NVSHARE_CONTEXT_OVERHEAD=16Mi \
        NVSHARE_SCHEDULING_MODE=concurrent NVSHARE_SWITCH_TIME_MODE=fixed \
        NVSHARE_SWITCH_TIME_FIXED=1s "$SCHED" >"$WORK/sched.log" 2>&1 &
    scheds+=($!)
    await_schedulers "$WORK"
}

stop_scheduler() {
    kill "${scheds[@]}"
    wait "${scheds[@]}" 2>/dev/null || true
    scheds=()
}

# job NAME SECONDS [VAR=VALUE...]: a 64 MiB job in the background, its
# trace in $WORK/NAME.
job() {
    local name=$1 seconds=$2 now; now=$(date +%s%N)
    shift 2
    mkdir -p "$WORK/$name"
    env LD_LIBRARY_PATH="$FAKE_DIR" LD_PRELOAD="$LIB" FAKE_CUDA_TRACE_DIR="$WORK/$name" \
        FAKE_CUDA_SHARED_GPU="$WORK/gpu" FAKE_CUDA_MEM_MB=$GPU_MIB \
        FAKE_JOB_MEM_MB=64 FAKE_JOB_WRITE=1 NVSHARE_RECONNECT_INTERVAL=100ms \
        NVSHARE_POD_NAME="$name" "$@" "$JOB" "$now" $(( now + seconds * 1000000000 )) \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    pids+=($!)
}

await_jobs() {
    for p in "${pids[@]}"; do wait "$p" || fail "a job failed"; done
    pids=()
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

intact() { # NAME: fake_job's report of its memory
    grep -qx "lost_bytes=0" "$WORK/$1.out" && grep -qx "address_kept=1" "$WORK/$1.out" ||
        fail "$1: memory not intact at its address: $(cat "$WORK/$1.out")"
}

# ---- 1. the allocation waits for the node default ---------------------------
start_scheduler
grep -q "oversub=on" "$WORK/sched.log" || fail "oversubscription is not the scheduler's default"
job a 4
job b 4
await_status a evictable_bytes $(( 64 * MiB ))
await_status b evictable_bytes $(( 64 * MiB ))
[ "$(status_of a oversubscribed)" = True ] || fail "a: not oversubscribed"
# Its context and credit, not its allocation.
[ "$(status_of a non_evictable_bytes)" = $(( 80 * MiB )) ] ||
    fail "a: device memory beside its evictable memory"
await_jobs
grep -q "waits for memory" "$WORK/sched.log" || fail "144 + 144 MiB were admitted on 252 MiB"
intact a
intact b
outs=$(cat "$WORK"/a/trace.* "$WORK"/b/trace.* | grep -c '^copy_dtoh ' || true)
[ "$outs" -ge 1 ] || fail "no swap-out copied"
! grep -qE '^(prefetch|discard)' "$WORK"/a/trace.* "$WORK"/b/trace.* ||
    fail "converted memory was prefetched or discarded"
{ swap_events "$WORK"/a/trace.* a; swap_events "$WORK"/b/trace.* b; } | sort -k1,1n |
    never_both_resident a b || fail "both jobs were resident at once"
echo "PASS: allocations before REGISTER_OK follow the node default: 64 MiB evictable each, $outs copies out, never co-resident, intact"

# ---- 2. a job that says no ----------------------------------------------------
job own 2 NVSHARE_ENABLE_OVERSUB=0
await_status own non_evictable_bytes $(( 80 * MiB ))
[ "$(status_of own evictable_bytes)" = 0 ] || fail "own: device memory reported evictable"
await_jobs
intact own
echo "PASS: NVSHARE_ENABLE_OVERSUB=0 keeps device memory under the node default"
stop_scheduler

# ---- 3. made before any registration: counted non-evictable -----------------
rm -f "$WORK/scheduler.sock"
GPU_MIB=200
job early 5
for _ in $(seq 250); do grep -q "no scheduler" "$WORK/early.err" && break; sleep 0.02; done
grep -q "no scheduler" "$WORK/early.err" || fail "the early job did not start without a scheduler"
start_scheduler
await_status early non_evictable_bytes $(( 80 * MiB ))
[ "$(status_of early evictable_bytes)" = 0 ] || fail "early: device memory reported evictable"
job late 6
await_jobs
early_end=$(awk '!/^(copy|prefetch)/ && $3 > e { e = $3 } END { print e }' "$WORK"/early/trace.*)
late_start=$(awk '!/^(copy|prefetch)/ && (s == "" || $2 < s) { s = $2 } END { print s }' "$WORK"/late/trace.*)
[ -n "$late_start" ] || fail "the late job never ran"
[ "$late_start" -gt "$early_end" ] || fail "the late job ran beside 64 MiB that cannot move"
! grep -q "client 1 swaps out" "$WORK/sched.log" || fail "the job with nothing evictable was asked to swap out"
intact early
intact late
echo "PASS: device memory allocated before registration counts as non-evictable: the second job ran only after the first ended"
