#!/usr/bin/env bash
# The busy measure for the scheduler's auto mode (backlog.c): a thread that
# keeps the GPU busy - back-to-back kernels, or batches of kernels with a
# synchronization after each - reports more than 80 % busy; one that runs a
# short kernel, waits for it and then works on the host reports less than
# 30 %. Two busy processes time-sliced by the real scheduler still report
# more than 80 %: time spent waiting for the lock is not idleness.
# usage: busy.sh LIBNVSHARE FAKE_LIB_DIR BUSY_TEST SCHEDULER
set -euo pipefail
LIB=$1 FAKE=$2 TEST=$3 SCHED=$4
dir=$(mktemp -d)
SCHED_PID=
trap '[ -n "$SCHED_PID" ] && kill "$SCHED_PID" 2>/dev/null; rm -rf "$dir"' EXIT
run() {
    NVSHARE_SOCK_DIR=$dir LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB NVSHARE_STATS=1 \
        "$TEST" "$@" 2>/dev/null
}
ratio() { sed -n 's/.*ratio=\([-0-9.]*\).*/\1/p' <<<"$1"; }
status=0
expect() { # what, output, awk condition on r
    local r
    r=$(ratio "$2")
    if awk -v r="$r" "BEGIN { exit !($3) }"; then
        echo "ok: $1: $2"
    else
        echo "FAIL: $1: $2 (want $3)"; status=1
    fi
}
expect "back-to-back kernels" "$(run full 400)" "r > 0.8"
expect "batches of 4 kernels, then a sync" "$(run batches 400)" "r > 0.8"
expect "100 us kernel, sync, 1 ms on the host" "$(run bursty 400 100 1000)" "r >= 0 && r < 0.3"
expect "100 us kernel, sync, 300 us on the host" "$(run bursty 400 100 300)" "r >= 0 && r < 0.5"

# Time-sliced under the scheduler (TQ 100 ms): each waits for the other.
mkdir "$dir/sched"
NVSHARE_SOCK_DIR=$dir/sched NVSHARE_GPUS=GPU-fa4e0000-0000-0000-0000-000000000000:16384 \
    NVSHARE_TQ=100ms "$SCHED" >"$dir/sched.log" 2>&1 &
SCHED_PID=$!
for _ in $(seq 500); do [ -S "$dir/sched/scheduler.sock" ] && break; sleep 0.02; done
for i in 1 2; do
    NVSHARE_SOCK_DIR=$dir/sched LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB NVSHARE_STATS=1 \
        "$TEST" batches 1500 >"$dir/p$i.out" 2>/dev/null &
    pids[$i]=$!
done
for i in 1 2; do wait "${pids[$i]}" || { echo "FAIL: process $i"; status=1; }; done
for i in 1 2; do
    out=$(cat "$dir/p$i.out")
    expect "time-sliced process $i" "$out" "r > 0.8"
    grep -q "skipped=[1-9]" <<<"$out" || { echo "FAIL: process $i never waited for the lock"; status=1; }
done
[ $status = 0 ] && echo PASS
exit $status
