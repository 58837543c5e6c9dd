#!/usr/bin/env bash
# host_budget.sh - the host swap budget on a real GPU (issue 38, criterion
# 7). The card is configured at 10 GiB (9 GiB admitted) and the scheduler
# started with host-swap-budget 2Gi; everything else is at its defaults
# (idle-swap-after 10 s). A (tests/gpu/idle_jobs.py holder) holds 6 GiB of
# tensors and goes idle; B (worker) needs 6 GiB more. A's swap-out would
# park about 7 GiB on the host, past the budget, so:
#  1. once A has been idle for idle-swap-after + 5 s, B still waits for
#     memory, its reason the budget (nvsharectl status --json wait_why),
#     nothing has been swapped out and B has not run a step;
#  2. `nvsharectl set host-swap-budget 16Gi` at run time: A is swapped out
#     and B runs its first step within 30 s, and finishes;
#  3. A, woken, finds its tensors bit-identical at the same addresses.
# The GPU: GPU= (an nvidia-smi index or UUID), else the first of
# CUDA_VISIBLE_DEVICES, else 0 (lib.sh's gpu_target). About a minute.
# usage: OUT=DIR tests/gpu/host_budget.sh   (BUILD=build-gpu)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
gpu_target
gpu_build nvshare nvshare-scheduler nvsharectl
gpu_results_dir host_budget
gpu_cleanup_at_exit
export NVSHARE_SOCK_DIR=$RES/sock PYTHONUNBUFFERED=1
IDLE_SWAP_AFTER_S=10 # the scheduler's default, which this test relies on
sched_start "$RES/sched.log" NVSHARE_GPUS="$GPU_UUID:10240" NVSHARE_HOST_SWAP_BUDGET=2Gi

# state PYTHON-EXPR: evaluates EXPR over status --json (a = A's client
# record, b = B's, g = the GPU's), printing its value.
state() {
    "$CTL_BIN" status --json 2>/dev/null | python3 -c '
import json, sys
st = json.load(sys.stdin)
by_pod = {c["pod"]: c for c in st["clients"]}
a, b, g = by_pod.get("a", {}), by_pod.get("b", {}), st["gpus"][0]
print(eval(sys.argv[1]))' "$1"
}
a_long_idle() { [ "$(state "a.get('idle_ns', 0) > ($IDLE_SWAP_AFTER_S + 5) * 10**9 and bool(b)")" = True ]; }

idle_holder host-budget 6 || { echo "host_budget: A never went idle"; exit 1; }
idle_worker host-budget 6 50

# 1. A is long past idle-swap-after, and B still waits for the budget.
poll_until 90 a_long_idle
why=$(state "b.get('wait_why')") outs=$(state "g['swaps']['out']['count']")
"$CTL_BIN" status >"$RES/status.txt" 2>&1
verdict "B waits, its reason the host swap budget" \
    "$([[ $why == "host swap budget"* && ! -f $RES/b.first ]] && echo 1 || echo 0)" "wait_why: $why"
verdict "nothing swapped out past the budget" "$([ "$outs" = 0 ] && echo 1 || echo 0)" "swap-outs: $outs"

# 2. The budget raised at run time: A goes, B runs.
raised=$(date +%s%N)
"$CTL_BIN" set host-swap-budget 16Gi >/dev/null
poll_until 30 test -f "$RES/b.first"
first=$([ -f "$RES/b.first" ] && echo $((($(date +%s%N) - raised) / 1000000)) || echo none)
verdict "budget raised to 16Gi: B's first step within 30 s" \
    "$([ "$first" != none ] && echo 1 || echo 0)" "after $first ms; swap-outs $(state "g['swaps']['out']['count']")"
wait "$B_PID"; b_rc=$?
verdict "B finishes" "$([ "$b_rc" = 0 ] && echo 1 || echo 0)" "rc $b_rc"

# 3. A wakes intact.
touch "$RES/a/wake"
wait "$A_PID"
a_line=$(grep -h '^idle_jobs holder' "$RES/a.out")
verdict "A's tensors bit-identical, addresses unchanged" \
    "$([[ $a_line == *"ptrs=same"*"check=ok"* ]] && echo 1 || echo 0)" "$(grep -o 'identical=[0-9/]*' <<<"$a_line")"
[ "$FAILED" = 0 ] && echo "host_budget: PASS" || echo "host_budget: FAIL (logs in $RES)"
exit "$FAILED"
