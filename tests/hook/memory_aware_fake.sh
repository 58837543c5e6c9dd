#!/usr/bin/env bash
# Memory-aware scheduling through the whole product path on the fake GPU:
# fake_job (a driver-API program) with libnvshare preloaded and
# NVSHARE_ENABLE_OVERSUB=1, the real scheduler, a GPU of 16 GiB. Two jobs of
# 12 GiB cannot run together: they must alternate, the leaving one's memory
# going to the host (copies to pinned memory, then its device pages
# discarded, in the fake's trace) before the incoming one runs, and the
# incoming one's copies back to the device completing before its first
# kernel, with every byte restored from a copy of its own. Each job is told
# to prepare (PREPARE_SWAP) when the other waits for memory, a switch time
# (1 s) before its EVICT: its pinned copies (FAKE_CUDA_PIN_GBPS=50: 0.26 s)
# are made by then, and no swap-out pins.
#
# usage: memory_aware_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4
WORK=$(mktemp -d /tmp/nvshare-memfake.XXXXXX)
SCHED_PID=
KEEP=${KEEP:-}
trap 'kill $SCHED_PID 2>/dev/null; [ -n "$KEEP" ] || rm -rf "$WORK"' EXIT
UUID=GPU-fa4e0000-0000-0000-0000-000000000000
fail() { echo "FAIL: $*" >&2; tail -n 40 "$WORK/sched.log" >&2; exit 1; }

export NVSHARE_SOCK_DIR=$WORK FAKE_CUDA_TRACE_DIR=$WORK/trace
mkdir -p "$WORK/trace"
NVSHARE_DEBUG=1 NVSHARE_GPUS=$UUID:16384 NVSHARE_SCHEDULING_MODE=auto \
    NVSHARE_SWITCH_TIME_MODE=fixed NVSHARE_SWITCH_TIME_FIXED=1s \
    "$SCHED" >"$WORK/sched.log" 2>&1 &
SCHED_PID=$!
for _ in $(seq 500); do [ -S "$WORK/scheduler.sock" ] && break; sleep 0.02; done

from=$(date +%s%N); until=$(( from + 5000000000 ))
pids=()
for j in 1 2; do
    LD_LIBRARY_PATH=$FAKE_DIR LD_PRELOAD=$LIB NVSHARE_ENABLE_OVERSUB=1 \
        NVSHARE_STATS=1 FAKE_CUDA_PIN_GBPS=50 \
        FAKE_JOB_MEM_MB=12288 FAKE_CUDA_MEM_MB=81920 FAKE_CUDA_SWAP_GBPS=100 \
        NVSHARE_POD_NAME=job-$j "$JOB" "$from" "$until" >"$WORK/job$j.out" \
        2>"$WORK/job$j.err" &
    pids+=($!)
done
wait "${pids[@]}" || { cat "$WORK"/job*.err >&2; fail "a job failed"; }

traces=("$WORK"/trace/trace.*)
[ "${#traces[@]}" -eq 2 ] || fail "expected 2 traces, got ${#traces[@]}"
for t in "${traces[@]}"; do
    echo "  $(basename "$t"): $(grep -c '^discard ' "$t") swap-outs," \
         "$(grep -c '^discard_prefetch_device' "$t") swap-ins," \
         "$(grep -vcE '^(copy|discard|prefetch)' "$t") kernels"
done
grep -q "waits for memory" "$WORK/sched.log" || fail "no WAIT_FOR_MEM"
grep -q "waiting for GPU memory" "$WORK"/job*.err || fail "the waiting job did not log why"
[ "$(cat "${traces[@]}" | grep -c '^discard ')" -ge 2 ] || fail "fewer than 2 swap-outs"
[ "$(cat "${traces[@]}" | grep -c '^discard_prefetch_device')" -ge 1 ] || fail "no swap-in"
! grep -q "^prefetch" "${traces[@]}" || fail "converted memory was prefetched, not copied"
! grep -q "moves of managed memory failed" "$WORK"/job*.err || fail "a swap failed"
grep -q "client [0-9]* prepares to swap out" "$WORK/sched.log" || fail "no PREPARE_SWAP"
for j in 1 2; do
    grep -q "stats: swap-pinned-ahead [1-9]" "$WORK/job$j.err" ||
        fail "job $j made no pinned copy ahead"
    grep -q "stats: swap-unpinned 0$" "$WORK/job$j.err" ||
        fail "a swap-out of job $j found an allocation without its copy: $(grep pinned "$WORK/job$j.err")"
done
for j in 1 2; do
    rate=$(sed -n 's/rate=//p' "$WORK/job$j.out")
    awk "BEGIN { exit !($rate > 50) }" || fail "job $j starved (rate $rate)"
done

# Order of events (CLOCK_MONOTONIC, one timeline per process): no kernel of
# a job while the other job's memory is on the GPU, none between its own
# swap-out and swap-in, and a swap-in only after the other swapped out (or
# finished).
{ for i in 0 1; do
      awk -v c="$i" '/^(copy|discard)/ { next }
                     { print $2, "unit", c; if ($3 > last) last = $3 }
                     END { print last, "gone", c }' "${traces[$i]}"
      # A swap-out is chunked copies to the host, then a discard; a
      # swap-in makes device pages, then copies back: each copy chunk is
      # its own out/in event.
      awk -v c="$i" '$1 == "copy_dtoh" || $1 == "discard" { print $3, "out", c }
                     $1 == "discard_prefetch_device" { print $2, "in_start", c }
                     $1 == "copy_htod" { print $3, "in_end", c }' \
          "${traces[$i]}"
  done; } | sort -k1,1n | awk '
    function other(c) { return c == 0 ? 1 : 0 }
    $2 == "unit" { if (out[$3]) { print "kernel of " $3 " at " $1 " while swapped out"; bad++ }
                   if (on[other($3)]) { print "kernel of " $3 " at " $1 " while the other is resident"; bad++ }
                   on[$3] = 1 }
    $2 == "out" || $2 == "gone" { on[$3] = 0; out[$3] = ($2 == "out") }
    $2 == "in_start" { if (on[other($3)]) { print "swap-in of " $3 " before the other left"; bad++ } }
    $2 == "in_end" { out[$3] = 0; on[$3] = 1 }
    END { exit bad > 0 }' || fail "events out of order"
echo "PASS: 12 + 12 GiB jobs alternate through libnvshare with explicit swaps, in order"
