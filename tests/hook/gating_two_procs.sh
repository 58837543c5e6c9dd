#!/usr/bin/env bash
# Two processes under the real scheduler (TQ 100 ms) share one simulated GPU:
# both finish, every launch was gated, the lock changed hands, and no kernel
# of one process ever ran while a kernel of the other was on the GPU. The
# last part proves that a holder's drain completed before it released the
# lock: the fake's trace records when each kernel really occupied the GPU.
# usage: gating_two_procs.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR GATING_TEST
set -euo pipefail
SCHED=$1 LIB=$2 FAKE=$3 TEST=$4
WORK=$(mktemp -d)
export NVSHARE_SOCK_DIR=$WORK/sock
SCHED_PID=
trap '[ -n "$SCHED_PID" ] && kill "$SCHED_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$WORK/sched.log" 2>/dev/null; exit 1; }

UUID=GPU-fa4e0000-0000-0000-0000-000000000000 # the fake's device 0
env NVSHARE_GPUS=$UUID:16384 NVSHARE_TQ=100ms NVSHARE_SCHEDULING_MODE=serial NVSHARE_DEBUG=1 "$SCHED" >"$WORK/sched.log" 2>&1 &
SCHED_PID=$!
for _ in $(seq 500); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && break; sleep 0.02; done
[ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] || fail "scheduler did not start"

mkdir "$WORK/trace"
pids=()
for i in 1 2; do
    FAKE_CUDA_TRACE_DIR=$WORK/trace LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB \
        NVSHARE_STATS=1 "$TEST" run 100 2000 >"$WORK/p$i.out" 2>"$WORK/p$i.err" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a workload failed"; done
for i in 1 2; do
    echo "process $i: $(cat "$WORK/p$i.out")"
    grep -q "gated=100 gated_ptsz=100" "$WORK/p$i.out" || fail "process $i: launches not all gated"
done

# Kernels sorted by start; a kernel overlaps the other process if it starts
# before the latest end seen from that process. Count the hand-overs too.
report=$(for f in "$WORK"/trace/trace.*; do
             awk -v who="${f##*.}" '{ print $2, $3, who }' "$f"
         done | sort -n | awk '
    { if (last != "" && $3 != last) handovers++
      for (w in end) if (w != $3 && $1 < end[w]) overlaps++
      if ($2 > end[$3]) end[$3] = $2; last = $3; kernels++ }
    END { printf "kernels=%d handovers=%d overlaps=%d\n", kernels, handovers, overlaps }')
echo "$report"
grep -q "kernels=400 " <<<"$report" || fail "trace incomplete"
grep -q "overlaps=0$" <<<"$report" || fail "the processes ran at the same time"
handovers=$(sed -n 's/.*handovers=\([0-9]*\).*/\1/p' <<<"$report")
[ "$handovers" -ge 1 ] || fail "the lock never changed hands"
echo "PASS: 2 processes, $handovers hand-overs, no overlap"
