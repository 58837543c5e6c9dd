#!/usr/bin/env bash
# scheduler_gone.sh - a swapped-out process outlives its scheduler, on a
# real GPU. The card is configured at 10 GiB (9 GiB admitted), everything
# else at the scheduler's defaults (idle-swap-after 10 s). A
# (tests/gpu/idle_jobs.py holder) holds 6 GiB of tensors and goes idle; B
# (worker) needs 6 GiB more, so A is swapped out for it. While A is out and
# B runs, the scheduler is killed (SIGKILL); then A wakes:
#  1. A's next step runs without a scheduler (fail-open) and finds its
#     tensors bit-identical at the same addresses: its client thread
#     brought the memory back before the gate opened, where A's kernels
#     would otherwise have met unmapped memory;
#  2. B finishes, unscheduled.
# The GPU: GPU= (an nvidia-smi index or UUID), else the first of
# CUDA_VISIBLE_DEVICES, else 0 (lib.sh's gpu_target). About a minute.
# usage: OUT=DIR tests/gpu/scheduler_gone.sh   (BUILD=build-gpu)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
gpu_target
gpu_build nvshare nvshare-scheduler nvsharectl
gpu_results_dir scheduler_gone
gpu_cleanup_at_exit
export NVSHARE_SOCK_DIR=$RES/sock PYTHONUNBUFFERED=1
sched_start "$RES/sched.log" NVSHARE_GPUS="$GPU_UUID:10240"

a_swapped_out() { grep -q "swapped out [1-9]" "$RES/a.err"; }

idle_holder scheduler-gone 6 || { echo "scheduler_gone: A never went idle"; exit 1; }
idle_worker scheduler-gone 6 1500
poll_until 60 a_swapped_out || { echo "scheduler_gone: A was not swapped out for B"; tail -n 5 "$RES/a.err"; exit 1; }
poll_until 60 test -f "$RES/b.first"
kill -9 "$SCHED"; wait "$SCHED" 2>/dev/null; SCHED=
touch "$RES/a/wake"
wait "$A_PID"; a_rc=$?
a_line=$(grep -h '^idle_jobs holder' "$RES/a.out")
verdict "A, woken with no scheduler, intact at the same addresses" \
    "$([[ $a_rc = 0 && $a_line == *"ptrs=same"*"check=ok"* ]] && echo 1 || echo 0)" \
    "rc $a_rc, $(grep -o 'identical=[0-9/]*' <<<"$a_line")"
verdict "A's memory came back by its own client thread" \
    "$(grep -A1000 "lost the scheduler" "$RES/a.err" | grep -q "swapped in" && echo 1 || echo 0)" \
    "$(grep -h "swapped in" "$RES/a.err" | tail -n 1 | cut -d' ' -f4-)"
wait "$B_PID"; b_rc=$?
verdict "B finishes, unscheduled" "$([ "$b_rc" = 0 ] && echo 1 || echo 0)" "rc $b_rc"
[ "$FAILED" = 0 ] && echo "scheduler_gone: PASS" || echo "scheduler_gone: FAIL (logs in $RES)"
exit "$FAILED"
