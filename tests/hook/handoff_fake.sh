#!/usr/bin/env bash
# A lower class's backlog bound is the process's (backlog.c), but a thread
# waits only for marks on its own submission's stream. On the fake GPU,
# under the real scheduler: a pod set low beside a present high one (so
# the scheduler's short budget applies) has thread A queue an NCCL-like
# collective on one stream, whose peer (another process) launches its
# half only after thread B's launch on a second stream returns; B must not
# wait for A's stream, or the three wait for each other until the timeout.
# See handoff_test.c.
#
# usage: handoff_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR HANDOFF_TEST NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 TEST=$4 CTL=$5
source "$(dirname "$0")/lib.sh"

start_scheduler_in "$WORK"
await_schedulers "$WORK"
NVSHARE_SOCK_DIR=$WORK "$CTL" set priority service high >/dev/null
NVSHARE_SOCK_DIR=$WORK "$CTL" set priority batch low >/dev/null

client=(LD_LIBRARY_PATH="$FAKE_DIR" NVSHARE_SOCK_DIR="$WORK" LD_PRELOAD="$LIB")
ranks=(FAKE_CUDA_COLLECTIVE="$WORK/collective" FAKE_CUDA_COLLECTIVE_RANKS=2)
env "${client[@]}" NVSHARE_POD_NAME=service "$TEST" present "$WORK/stop" \
    >"$WORK/service.out" 2>&1 &
pids+=($!)
env LD_LIBRARY_PATH="$FAKE_DIR" "${ranks[@]}" "$TEST" peer "$WORK/go" >"$WORK/peer.out" 2>&1 &
pids+=($!)
status=0
timeout 20 env "${client[@]}" "${ranks[@]}" NVSHARE_POD_NAME=batch NVSHARE_STATS=1 \
    "$TEST" low "$WORK/go" >"$WORK/low.out" 2>"$WORK/low.err" || status=$?
touch "$WORK/stop" "$WORK/go"
wait "${pids[@]}" 2>/dev/null || true
pids=()

marks=$(sed -n 's/.*stats: process-marks \([0-9]*\).*/\1/p' "$WORK/low.err")
echo "low pod: exit $status, output '$(cat "$WORK/low.out")', marks in the process's table: ${marks:-none}"
if [ "$status" = 124 ]; then
    echo "FAIL: a thread waited for another stream's collective, which waited for it (killed after 20 s)"
    exit 1
fi
[ "$status" = 0 ] && grep -qx ok "$WORK/low.out" ||
    { echo "FAIL: the low pod failed:"; cat "$WORK/low.err"; exit 1; }
echo "PASS: the second stream's thread went on; the collective and both streams completed"
