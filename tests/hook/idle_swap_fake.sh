#!/usr/bin/env bash
# An idle process's memory for a newcomer, end to end on one fake GPU
# shared by the processes (FAKE_CUDA_SHARED_GPU: its 176 MiB are the
# node's, the fake refuses what does not fit beside the others' memory),
# with the real scheduler and nothing about oversubscription in the jobs'
# environment (the scheduler's default makes their memory swappable).
#
# A holder allocates 96 MiB, writes it, runs a batch of kernels and idles
# for 5 s without a CUDA call. A newcomer needing 96 MiB starts during the
# idle period: its cuMemCreate finds the GPU full, waits for the lock, and
# the scheduler swaps the idle holder out (copies to the host, physical
# memory released), after which the newcomer allocates and runs - no
# CUDA_ERROR_OUT_OF_MEMORY. Once the newcomer is done, the holder's next
# kernels bring its memory back: it reports its content intact at its
# address. The two are never resident at once (the fake's traces).
#
# Both jobs declare a 128 MiB limit, which keeps the credit the scheduler
# counts beyond each allocation small (8 MiB, not 64): each counts as
# 96 + 8 + 16 MiB of context overhead, and the holder's rest while it is
# swapped out (24 MiB) fits beside the newcomer in the 158 MiB admitted.
#
# With idle-swap-after (the scheduler's NVSHARE_IDLE_SWAP_AFTER, where it
# exists), the holder keeps its memory that long after it went idle: set
# to 1 s here, the newcomer's first kernel comes at least 1 s after the
# holder's last one. Without it the current scheduler evicts an idle
# client as soon as a waiter needs the room.
#
# usage: idle_swap_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4
source "$(dirname "$0")/lib.sh"
DIR=$WORK/s
fail() { echo "FAIL: $*" >&2; tail -n 40 "$DIR/sched.log" "$WORK"/*.err >&2; exit 1; }
export NVSHARE_SOCK_DIR=$DIR

idle_swap=()
if "$SCHED" --help 2>&1 | grep -q NVSHARE_IDLE_SWAP_AFTER; then
    idle_swap=(NVSHARE_IDLE_SWAP_AFTER=1s)
else
    echo "note: the scheduler has no idle-swap-after: the holder is swapped out as soon as the newcomer waits"
fi
start_scheduler_in "$DIR" NVSHARE_DEBUG=1 NVSHARE_GPUS=$UUID:176 \
    NVSHARE_CONTEXT_OVERHEAD=16Mi "${idle_swap[@]}"
await_schedulers "$DIR"

# job NAME SECONDS [VAR=VALUE...]: a 96 MiB job that writes its memory.
job() {
    local name=$1 seconds=$2 now; now=$(date +%s%N)
    shift 2
    mkdir -p "$WORK/$name"
    env LD_LIBRARY_PATH="$FAKE_DIR" LD_PRELOAD="$LIB" NVSHARE_DEBUG=1 \
        FAKE_CUDA_TRACE_DIR="$WORK/$name" FAKE_CUDA_SHARED_GPU="$WORK/gpu" \
        FAKE_CUDA_MEM_MB=176 NVSHARE_GPU_MEMORY_LIMIT=128Mi \
        FAKE_JOB_MEM_MB=96 FAKE_JOB_WRITE=1 NVSHARE_POD_NAME="$name" "$@" \
        "$JOB" "$now" $(( now + seconds * 1000000000 )) \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    pids+=($!)
}

# The holder: its first batch, 5 s idle, then kernels up to its 7th second.
job holder 7 FAKE_JOB_IDLE_MS=5000
for _ in $(seq 500); do
    [ "$(cat "$WORK"/holder/trace.* 2>/dev/null | grep -c '^sleep_')" -ge 4 ] && break
    sleep 0.02
done
[ "$(cat "$WORK"/holder/trace.* 2>/dev/null | grep -c '^sleep_')" -ge 4 ] ||
    fail "the holder did not run its first batch"
job newcomer 1
for p in "${pids[@]}"; do wait "$p" || fail "a job failed"; done
pids=()

holder=$(echo "$WORK"/holder/trace.*) newcomer=$(echo "$WORK"/newcomer/trace.*)
! grep -q "refused" "$WORK/newcomer.err" || fail "the newcomer's memory was refused"
grep -q "waiting for .* MiB of device memory" "$WORK/newcomer.err" ||
    fail "the newcomer never found the GPU full"
grep -qE "client [0-9]+ swaps out" "$DIR/sched.log" || fail "nobody was asked to swap out"
! grep -q "ignored" "$DIR/sched.log" || fail "the scheduler ignored a swap"
! grep -q "moves failed" "$WORK"/*.err || fail "a swap failed"
out_bytes=$(awk '$1 == "copy_dtoh" { s += $4 } END { print s + 0 }' "$holder")
in_bytes=$(awk '$1 == "copy_htod" { s += $4 } END { print s + 0 }' "$holder")
[ "$out_bytes" = $((96 << 20)) ] || fail "the holder copied $out_bytes bytes out, want 96 MiB"
[ "$in_bytes" = $((96 << 20)) ] || fail "the holder copied $in_bytes bytes back, want 96 MiB"
! grep -q '^copy_dtoh' "$newcomer" || fail "the newcomer was swapped out"
grep -qx "lost_bytes=0" "$WORK/holder.out" || fail "the holder lost content: $(cat "$WORK/holder.out")"
grep -qx "address_kept=1" "$WORK/holder.out" || fail "the holder's memory moved"
grep -qx "lost_bytes=0" "$WORK/newcomer.out" || fail "the newcomer lost content"

# The newcomer ran in the holder's idle period, after its swap-out, and the
# holder resumed after the newcomer.
{ swap_events "$holder" holder; swap_events "$newcomer" newcomer; } | sort -k1,1n \
    >"$WORK/events"
never_both_resident holder newcomer <"$WORK/events" || fail "both resident at once"
read -r first_batch_end swapped_out resumed < <(awk '
    $3 == "holder" && $2 == "unit" { if (!out) last = $1; else if (!resumed) resumed = $1 }
    $3 == "holder" && $2 == "out" && !out { out = $1 }
    END { print last, out, resumed }' "$WORK/events")
newcomer_first=$(awk '$3 == "newcomer" && $2 == "unit" { print $1; exit }' "$WORK/events")
newcomer_last=$(awk '$1 !~ /^(copy|prefetch)/ && $3 > e { e = $3 } END { print e }' "$newcomer")
if [ -z "$swapped_out" ] || [ -z "$resumed" ]; then
    fail "the holder was not swapped out and back"
fi
[ "$newcomer_first" -gt "$swapped_out" ] || fail "the newcomer ran before the holder's swap-out"
[ "$resumed" -gt "$newcomer_last" ] || fail "the holder resumed before the newcomer was done"
if [ "${#idle_swap[@]}" -gt 0 ]; then
    [ $(( newcomer_first - first_batch_end )) -ge 1000000000 ] ||
        fail "the holder was swapped out $(( (newcomer_first - first_batch_end) / 1000000 )) ms after it went idle, before idle-swap-after (1 s)"
fi
echo "PASS: the idle holder's 96 MiB went to the host for the newcomer" \
    "($(( (newcomer_first - first_batch_end) / 1000000 )) ms after its last kernel)," \
    "came back intact at its address after"
