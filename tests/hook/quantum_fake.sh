#!/usr/bin/env bash
# The default quantum as users meet it (issue 28), through the whole product
# path: fake_job processes with libnvshare preloaded and the real scheduler
# at its default settings (auto mode, tq auto). Each scenario has its own
# scheduler and shared fake device, and both run at once.
#
#  1. Heavy tenants: 4 jobs started together share the GPU within 5 % of
#     1/4 each, counted from their second second on.
#  2. Arrival: while 3 heavy jobs hold the GPU, each of 5 jobs that arrive
#     one after another finishes its first kernels within 1 s of its
#     process's start (fake_job's first_kernel_ms), and its first kernel
#     starts within the policy's bound of its first launch (the fake
#     driver's trace): a fresh arrival has the holder cut short after its
#     slice (5 ms since its grant), then waits for the holder's queued
#     kernels (4 x 1 ms) to drain. The margin is for a loaded 2-core CI
#     machine; the bound stays under the 100 ms an arrival waited when the
#     holder was cut at the quantum's floor (then 0-100 ms, 50 at the median).
# Status shows each GPU's quantum as auto, with its reason.
#
# usage: quantum_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB NVSHARECTL
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4 CTL=$5
source "$(dirname "$0")/lib.sh"
failed=0

SLICE_MS=5       # POLICY_FRESH_SLICE_NS: the holder's quantum is the floor
DRAIN_MS=4       # the holder's queued kernels: fake_job syncs every 4 x 1 ms
MARGIN_MS=40     # wake-ups and hand-overs on a busy 2-core CI machine
bound_ms=$((SLICE_MS + DRAIN_MS + MARGIN_MS))

# job DIR NAME FROM UNTIL [VAR=VALUE...]: a fake_job on DIR's scheduler and
# device.
job() {
    env NVSHARE_SOCK_DIR="$1" FAKE_CUDA_SHARED_GPU="$1/device" LD_LIBRARY_PATH="$FAKE_DIR" \
        LD_PRELOAD="$LIB" "${@:5}" "$JOB" "$3" "$4" >"$1/$2.out" 2>"$1/$2.err"
}
field() { sed -n "s/^$1=//p" "$2"; }

start_scheduler_in "$WORK/heavy"
start_scheduler_in "$WORK/arrival"
await_schedulers "$WORK/heavy" "$WORK/arrival"

t0=$(date +%s%N)
for j in 1 2 3 4; do
    job "$WORK/heavy" "job$j" $((t0 + 1000000000)) $((t0 + 11000000000)) &
    pids+=($!)
done
for j in 1 2 3; do
    job "$WORK/arrival" "holder$j" "$t0" $((t0 + 14000000000)) &
    pids+=($!)
done

# Arrivals: each runs 0.5 s, 1.5 s after the previous one started, once
# the holders have had their first turns.
sleep 2
for a in 1 2 3 4 5; do
    now=$(date +%s%N)
    mkdir -p "$WORK/arrival/trace$a"
    job "$WORK/arrival" "arrival$a" "$now" $((now + 500000000)) \
        FAKE_CUDA_TRACE_DIR="$WORK/arrival/trace$a" &
    pids+=($!)
    sleep 1.5
done
NVSHARE_SOCK_DIR=$WORK/heavy "$CTL" status >"$WORK/status" || true
wait "${pids[@]}"
pids=()

echo "4 heavy jobs at default settings, their seconds 1-11:"
total=0
for j in 1 2 3 4; do
    total=$(awk -v a="$total" -v b="$(field rate "$WORK/heavy/job$j.out")" 'BEGIN { print a + b }')
done
line="  shares of the aggregate:"
for j in 1 2 3 4; do
    share=$(awk -v r="$(field rate "$WORK/heavy/job$j.out")" -v t="$total" \
        'BEGIN { printf "%.2f", 100 * r / t }')
    line+=" $share%"
    awk -v x="$share" 'BEGIN { exit !(x >= 0.95 * 25 && x <= 1.05 * 25) }' ||
        { line+="(FAIL)"; failed=1; }
done
echo "$line (want 25 % +- 5 % of it)"
grep -E "^  quantum" "$WORK/status" | sed 's/^/ /'
grep -qE "^  quantum +[0-9.]+m?s \(auto" "$WORK/status" ||
    { echo "  FAIL: status does not show an auto quantum"; failed=1; }

echo "5 arrivals beside 3 heavy jobs, first kernels after the process's start:"
line=" "
for a in 1 2 3 4 5; do
    ms=$(field first_kernel_ms "$WORK/arrival/arrival$a.out")
    line+=" ${ms:-none} ms"
    awk -v x="${ms:--1}" 'BEGIN { exit !(x >= 0 && x < 1000) }' ||
        { line+="(FAIL)"; failed=1; }
done
echo "$line (want each under 1000 ms)"

echo "the same, from its first launch to the start of its first kernel:"
line=" "
for a in 1 2 3 4 5; do
    launch=$(field first_launch "$WORK/arrival/arrival$a.out")
    ms=$(cat "$WORK/arrival/trace$a"/trace.* 2>/dev/null | awk -v l="${launch:-0}" '
        l > 0 && (!s || $2 < s) { s = $2 }
        END { if (s) printf "%.1f", (s - l) / 1e6; else print "none" }')
    line+=" $ms ms"
    awk -v x="$ms" -v b="$bound_ms" 'BEGIN { exit !(x != "none" && x >= 0 && x <= b) }' ||
        { line+="(FAIL)"; failed=1; }
done
echo "$line (want each under $SLICE_MS + $DRAIN_MS + $MARGIN_MS = $bound_ms ms)"

[ $failed = 0 ] || { echo "FAIL: the default quantum"; tail -n 20 "$WORK/arrival/sched.log"; exit 1; }
echo "PASS: at default settings heavy jobs share evenly and a newcomer starts at once"
