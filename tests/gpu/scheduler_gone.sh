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
JOBS=$ROOT/tests/gpu/idle_jobs.py
mkdir -p "$RES/a"
sched_start "$RES/sched.log" NVSHARE_GPUS="$GPU_UUID:10240"

FAILED=0
check() { # NAME OK DETAIL
    printf '%-58s %s  %s\n' "$1" "$([ "$2" = 1 ] && echo PASS || echo FAIL)" "$3"
    [ "$2" = 1 ] || FAILED=1
}
# until_true SECONDS CMD...: polls CMD every 0.2 s; 1 if it never held.
until_true() {
    local end=$(($(date +%s) + $1)); shift
    until "$@"; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.2
    done
}
a_swapped_out() { grep -q "swapped out [1-9]" "$RES/a.err"; }

NVSHARE_POD_NAMESPACE=scheduler-gone NVSHARE_POD_NAME=a LD_PRELOAD=$LIB NVSHARE_LOG_LEVEL=info \
    python3 "$JOBS" holder --gib 6 --steps 20 --state-dir "$RES/a" --timeout 300 \
    >"$RES/a.out" 2>"$RES/a.err" &
A_PID=$!; PIDS+=("$A_PID")
until_true 120 test -f "$RES/a/idle" || { echo "scheduler_gone: A never went idle"; tail -n 5 "$RES/a.err"; exit 1; }
NVSHARE_POD_NAMESPACE=scheduler-gone NVSHARE_POD_NAME=b LD_PRELOAD=$LIB NVSHARE_LOG_LEVEL=info \
    python3 "$JOBS" worker --gib 6 --steps 1500 --first-step-file "$RES/b.first" \
    >"$RES/b.out" 2>"$RES/b.err" &
B_PID=$!; PIDS+=("$B_PID")
until_true 60 a_swapped_out || { echo "scheduler_gone: A was not swapped out for B"; tail -n 5 "$RES/a.err"; exit 1; }
until_true 60 test -f "$RES/b.first"
kill -9 "$SCHED"; wait "$SCHED" 2>/dev/null; SCHED=
touch "$RES/a/wake"
wait "$A_PID"; a_rc=$?
a_line=$(grep -h '^idle_jobs holder' "$RES/a.out")
check "A, woken with no scheduler, intact at the same addresses" \
    "$([[ $a_rc = 0 && $a_line == *"ptrs=same"*"check=ok"* ]] && echo 1 || echo 0)" \
    "rc $a_rc, $(grep -o 'identical=[0-9/]*' <<<"$a_line")"
check "A's memory came back by its own client thread" \
    "$(grep -A1000 "lost the scheduler" "$RES/a.err" | grep -q "swapped in" && echo 1 || echo 0)" \
    "$(grep -h "swapped in" "$RES/a.err" | tail -n 1 | cut -d' ' -f4-)"
wait "$B_PID"; b_rc=$?
check "B finishes, unscheduled" "$([ "$b_rc" = 0 ] && echo 1 || echo 0)" "rc $b_rc"
PIDS=()
[ "$FAILED" = 0 ] && echo "scheduler_gone: PASS" || echo "scheduler_gone: FAIL (logs in $RES)"
exit "$FAILED"
