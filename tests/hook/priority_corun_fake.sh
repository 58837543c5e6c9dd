#!/usr/bin/env bash
# Priorities without starvation (issue 32), on the fake GPU at default
# settings: a high-priority service (4 kernels of 500 us every 20 ms) beside
# a low-priority training job with kernels of 50 ms, both with libnvshare.
# In auto mode the light service co-runs with the training: each request
# runs at once, time-sliced with the training's kernel on the shared fake
# device (FAKE_CUDA_TIMESLICE_US=2000, as a GPU slices contexts), and the
# training keeps the time the service leaves.
#  - latency: the service's request p99 within its solo p99 + 4 slices of
#    2 ms (each of its 4 kernels waits at most one slice of the training's
#    context) + 5 ms (a loaded CI machine's wake-ups), so never waiting for
#    the training's 50 ms kernel;
#  - no starvation: the training gets at least 80 % of what the service
#    leaves of its solo rate.
# Before: the service held the GPU throughout and the training got 0 %.
#
# usage: priority_corun_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4 CTL=$5
source "$(dirname "$0")/lib.sh"
pids=()
trap 'kill "${pids[@]}" "${scheds[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
SECONDS_RUN=8

# job DIR NAME POD KERNEL_US [GAP_US]: a fake_job of pod POD on DIR's
# scheduler and device, for SECONDS_RUN from its first second.
job() {
    local t0; t0=$(date +%s%N)
    env NVSHARE_SOCK_DIR="$1" FAKE_CUDA_SHARED_GPU="$1/device" FAKE_CUDA_TIMESLICE_US=2000 \
        LD_LIBRARY_PATH="$FAKE_DIR" \
        LD_PRELOAD="$LIB" NVSHARE_POD_NAMESPACE=prio NVSHARE_POD_NAME="$3" \
        ${5:+FAKE_JOB_GAP_US=$5} "$JOB" $((t0 + 1000000000)) \
        $((t0 + (SECONDS_RUN + 1) * 1000000000)) "$4" >"$1/$2.out" 2>"$1/$2.err"
}
field() { sed -n "s/^$1=//p" "$2"; }

for dir in solo_service solo_train shared; do start_scheduler_in "$WORK/$dir"; done
await_schedulers "$WORK/solo_service" "$WORK/solo_train" "$WORK/shared"
NVSHARE_SOCK_DIR=$WORK/shared "$CTL" set priority prio/service high >/dev/null
NVSHARE_SOCK_DIR=$WORK/shared "$CTL" set priority prio/train low >/dev/null

job "$WORK/solo_service" service service 500 20000 & pids+=($!)
job "$WORK/solo_train" train train 50000 & pids+=($!)
job "$WORK/shared" train train 50000 & pids+=($!)
sleep 0.3 # the training holds the GPU when the service arrives
job "$WORK/shared" service service 500 20000 & pids+=($!)
wait "${pids[@]}"
pids=()

solo_p99=$(field batch_p99_ms "$WORK/solo_service/service.out")
p50=$(field batch_p50_ms "$WORK/shared/service.out")
p99=$(field batch_p99_ms "$WORK/shared/service.out")
busy=$(awk -v r="$(field rate "$WORK/solo_service/service.out")" 'BEGIN { printf "%.3f", r * 0.0005 }')
train=$(awk -v r="$(field rate "$WORK/shared/train.out")" -v s="$(field rate "$WORK/solo_train/train.out")" \
    'BEGIN { printf "%.1f", 100 * r / s }')
left=$(awk -v b="$busy" 'BEGIN { printf "%.1f", 100 * (1 - b) }')
echo "service requests: solo p99 $solo_p99 ms; beside the training p50 $p50 ms, p99 $p99 ms"
echo "training: $train % of its solo rate; the service leaves $left %"
failed=0
awk -v p="$p99" -v s="$solo_p99" 'BEGIN { exit !(p <= s + 4 * 2 + 5) }' ||
    { echo "FAIL: the service's p99 $p99 ms is over $solo_p99 + 4 x 2 + 5 ms"; failed=1; }
awk -v t="$train" -v l="$left" 'BEGIN { exit !(t >= 0.8 * l) }' ||
    { echo "FAIL: the training got $train %, under 80 % of the $left % left"; failed=1; }
[ $failed = 0 ] || { tail -n 20 "$WORK/shared/sched.log"; exit 1; }
echo "PASS: a high-priority service runs at once and the training keeps the rest"
