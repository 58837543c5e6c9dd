#!/usr/bin/env bash
# Memory-aware scheduling through the whole product path on the fake GPU:
# fake_job (a driver-API program) with libnvshare preloaded and
# NVSHARE_ENABLE_OVERSUB=1, the real scheduler, one fake GPU of 280 MiB
# (252 MiB admitted) shared by both processes (FAKE_CUDA_SHARED_GPU). Two
# jobs of 64 MiB that they write, each counted as 144 MiB (its allocation,
# 64 MiB of credit beyond it, 16 MiB of context overhead; 80 MiB of it
# stay while it is swapped out), fit one at a time, not together: they
# must alternate, the leaving one's memory going to the host (4 MiB
# copies out through the pinned ring, in the fake's trace) and its
# physical memory released before the incoming one runs, and the incoming
# one's copies back completing before its first kernel. Each job ends
# with its memory intact at its address (fake_job's report).
#
# Each job is told to prepare (PREPARE_SWAP) before its first EVICT, which
# pins its staging ring (FAKE_CUDA_PIN_GBPS=0.1: 1.34 s) on a thread: no
# swap-out that copies pins, each one the scheduler times takes less than
# the pinning would. (A blank swap-out, of memory not written since the
# process last held the GPU, copies nothing and is not timed here: it
# makes the ring all the same when it comes before the preparer's.)
#
# The host copies are real memcpy: 64 MiB per swap at most.
# usage: memory_aware_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4
source "$(dirname "$0")/lib.sh"
DIR=$WORK/s
fail() { echo "FAIL: $*" >&2; tail -n 40 "$DIR/sched.log" >&2; exit 1; }
PIN_MS=1342 # the ring, 128 MiB, at 0.1 GB/s

export NVSHARE_SOCK_DIR=$DIR FAKE_CUDA_TRACE_DIR=$WORK/trace
mkdir -p "$WORK/trace"
start_scheduler_in "$DIR" NVSHARE_DEBUG=1 NVSHARE_GPUS=$UUID:280 \
    NVSHARE_CONTEXT_OVERHEAD=16Mi NVSHARE_SCHEDULING_MODE=auto \
    NVSHARE_SWITCH_TIME_MODE=fixed NVSHARE_SWITCH_TIME_FIXED=1s
await_schedulers "$DIR"

from=$(date +%s%N); until=$(( from + 8000000000 ))
for j in 1 2; do
    LD_LIBRARY_PATH=$FAKE_DIR LD_PRELOAD=$LIB NVSHARE_ENABLE_OVERSUB=1 \
        NVSHARE_STATS=1 NVSHARE_DEBUG=1 FAKE_CUDA_PIN_GBPS=0.1 \
        FAKE_CUDA_SHARED_GPU="$WORK/gpu" FAKE_CUDA_MEM_MB=280 \
        FAKE_JOB_MEM_MB=64 FAKE_JOB_WRITE=1 \
        NVSHARE_POD_NAME=job-$j "$JOB" "$from" "$until" >"$WORK/job$j.out" \
        2>"$WORK/job$j.err" &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || { cat "$WORK"/job*.err >&2; fail "a job failed"; }
done

traces=("$WORK"/trace/trace.*)
[ "${#traces[@]}" -eq 2 ] || fail "expected 2 traces, got ${#traces[@]}"
for t in "${traces[@]}"; do
    echo "  $(basename "$t"): $(grep -c '^copy_dtoh ' "$t") copies out," \
         "$(grep -c '^copy_htod' "$t") copies in," \
         "$(grep -vcE '^(copy|prefetch)' "$t") kernels and memsets"
done
grep -q "waits for memory" "$DIR/sched.log" || fail "no WAIT_FOR_MEM"
grep -q "waiting for GPU memory" "$WORK"/job*.err || fail "the waiting job did not log why"
for t in "${traces[@]}"; do
    grep -q '^copy_dtoh ' "$t" || fail "$(basename "$t"): never swapped out"
done
[ "$(cat "${traces[@]}" | grep -c '^copy_htod ')" -ge 1 ] || fail "no swap-in"
! grep -qE "^(prefetch|discard)" "${traces[@]}" || fail "converted memory was prefetched or discarded, not copied"
! grep -q "moves failed" "$WORK"/job*.err || fail "a swap failed"
! grep -q "ignored" "$DIR/sched.log" || fail "the scheduler ignored a swap"
for j in 1 2; do
    grep -qx "lost_bytes=0" "$WORK/job$j.out" || fail "job $j lost content: $(cat "$WORK/job$j.out")"
    grep -qx "address_kept=1" "$WORK/job$j.out" || fail "job $j's memory moved"
    grep -q "stats: swap-out-bytes [1-9]" "$WORK/job$j.err" || fail "job $j copied nothing out"
done

# Prepared before each EVICT, and no swap-out pinned: each took less than
# the ring's pinning.
awk '/prepares to swap out/ { p[$(NF - 4)] = 1 }
     / swaps out$/ { if (!p[$(NF - 2)]) { print "client " $(NF - 2) " evicted unprepared"; bad++ } }
     END { exit bad > 0 }' "$DIR/sched.log" || fail "an EVICT before PREPARE_SWAP"
outs=$(sed -n 's/.*client [0-9]* swapped out [1-9][0-9]* bytes in \([0-9.]*\) ms$/\1/p' "$DIR/sched.log")
[ "$(wc -w <<<"$outs")" -ge 2 ] || fail "fewer than 2 swap-outs with copies timed: $outs"
for ms in $outs; do
    awk "BEGIN { exit !($ms < $PIN_MS) }" || fail "a swap-out took $ms ms: it pinned (${PIN_MS} ms)"
done
for j in 1 2; do
    rate=$(sed -n 's/rate=//p' "$WORK/job$j.out")
    awk "BEGIN { exit !($rate > 50) }" || fail "job $j starved (rate $rate)"
done

# Order of events (one timeline per process): no kernel of a job while
# the other job's memory is on the GPU, none between its own swap-out and
# swap-in, and a swap-in only after the other swapped out (or finished).
{ swap_events "${traces[0]}" 0; swap_events "${traces[1]}" 1; } | sort -k1,1n |
    never_both_resident 0 1 || fail "events out of order"
echo "PASS: 64 + 64 MiB jobs alternate through libnvshare with copied swaps, in order, intact; swap-outs $(tr '\n' ' ' <<<"$outs")ms"
