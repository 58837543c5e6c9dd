#!/usr/bin/env bash
# Core limits through the whole product path on the fake GPU: fake_job (a
# driver-API program) with libnvshare preloaded, the real scheduler, the
# hook's gating and drain. Single jobs at 10/25/50/75/90 % and the mixes
# 50+60 (scaled to 45.45/54.55), 10+90, 25+75, 30+30+30 and 20 % beside two
# unlimited jobs, each measured from its first kernel over 5 s (5 windows):
#  - a limited job's share is at most 1 point above its target (a limit is
#    a cap) and at most 2.5 points below it; an unlimited job's share of
#    what the limits leave is within 2.5 points either way (nothing caps
#    it: one seen at +1.07 in CI);
#  - a job alone used no more than its budget plus 1 point in its first
#    window;
#  - a scaled mix keeps the GPU at least 96 % occupied.
# Below the target is looser than the H100's 1 point (bench/compute_limits.sh)
# because every switch (20 a second in mixes, with pacing) loses the host's
# wake-up and message latency to idle GPU time, and a loaded 2-core CI
# machine stretches it: measured -1.87 to +0.66 points with a build running
# beside the test, -0.92 to +0.64 without (docs/benchmarks.md).
#
# Share = the time the job occupied the fake GPU (its kernels, and the host
# gaps under 3 ms between them: the time it held the GPU) / 5 s, from the
# fake driver's trace. Not kernels per second against a solo run: on a
# shared 2-core machine the host's wake-up latency moves a job's kernel rate
# by several percent from one second to the next (docs/benchmarks.md),
# while what the scheduler decides - who holds the GPU when - does not
# depend on it. Scenarios run in two waves of about ten jobs, each with its
# own scheduler.
#
# usage: limits_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4
source "$(dirname "$0")/lib.sh"
SPAN_NS=5000000000

# Occupancy of one job's trace: per window of 1 s from its first kernel,
# then the total, in percent.
occupancy() {
    cat "$1"/trace.* | awk '{ print $2, $3 }' | sort -n | awk -v span="$SPAN_NS" '
        function add(a, b,   w, lo, hi) {
            for (w = int((a - t0) / 1e9); w <= int((b - t0) / 1e9); w++) {
                lo = a > t0 + w * 1e9 ? a : t0 + w * 1e9
                hi = b < t0 + (w + 1) * 1e9 ? b : t0 + (w + 1) * 1e9
                if (hi > lo && w < span / 1e9) { held[w] += hi - lo; total += hi - lo }
            }
        }
        NR == 1 { t0 = $1; from = $1; to = $2; next }
        { if ($1 - to < 3e6) { if ($2 > to) to = $2 } else { add(from, to); from = $1; to = $2 } }
        END { add(from, to); printf "%.2f %.2f\n", 100 * held[0] / 1e9, 100 * total / span }'
}

run_wave() {
    local pids=() k j limit
    local dirs=()
    for k in "$@"; do
        # Serial: the fake GPU runs co-running processes each at full speed,
        # so auto mode's trial beside others would look like extra share.
        start_scheduler_in "$WORK/s$k" NVSHARE_TQ=100ms NVSHARE_SCHEDULING_MODE=serial
        dirs+=("$WORK/s$k")
    done
    await_schedulers "${dirs[@]}"
    for k in "$@"; do
        j=0
        for limit in ${scenarios[$k]}; do
            j=$((j + 1))
            mkdir -p "$WORK/s$k/trace$j"
            [ "$limit" = 100 ] && limit=
            start=$(date +%s%N)
            NVSHARE_SOCK_DIR=$WORK/s$k NVSHARE_POD_NAME=job-$j NVSHARE_GPU_CORE_LIMIT=$limit \
                FAKE_CUDA_TRACE_DIR=$WORK/s$k/trace$j LD_LIBRARY_PATH=$FAKE_DIR LD_PRELOAD=$LIB \
                "$JOB" "$start" $((start + SPAN_NS + 300000000)) >/dev/null 2>&1 &
            pids+=($!)
        done
    done
    wait "${pids[@]}"
}

scenarios=("10" "25" "50" "75" "90" "50 60" "10 90" "25 75" "30 30 30" "20 100 100")
run_wave 0 1 2 3 4 9
run_wave 5 6 7 8

failed=0
for k in "${!scenarios[@]}"; do
    sum=0; unlimited=0
    for limit in ${scenarios[$k]}; do
        if [ "$limit" = 100 ]; then unlimited=$((unlimited + 1)); else sum=$((sum + limit)); fi
    done
    j=0; line="  ${scenarios[$k]// /+}:"; aggregate=0; read -ra jobs <<<"${scenarios[$k]}"
    for limit in ${scenarios[$k]}; do
        j=$((j + 1))
        read -r first share < <(occupancy "$WORK/s$k/trace$j")
        # Limits above 100 % in sum are scaled; unlimited jobs share the rest.
        want=$(awk -v l="$limit" -v s="$sum" -v u="$unlimited" 'BEGIN {
            if (l == 100) printf "%.2f", (100 - (s > 100 ? 100 : s)) / u
            else printf "%.2f", (s > 100) ? 100 * l / s : l }')
        ok=$(awk -v a="$share" -v b="$want" -v f="$first" -v n="${#jobs[@]}" -v l="$limit" 'BEGIN {
            d = a - b; over = (l == 100) ? 2.5 : 1
            print (d <= over && d >= -2.5 && (n > 1 || f <= b + 1)) ? "ok" : "FAIL" }')
        [ "$ok" = ok ] || failed=1
        aggregate=$(awk -v a="$aggregate" -v b="$share" 'BEGIN { print a + b }')
        line+=" ${limit}%->${share}% (want ${want}%, first window ${first}%, $ok)"
    done
    if [ "$sum" -gt 100 ]; then
        ok=$(awk -v a="$aggregate" 'BEGIN { print (a >= 96) ? "ok" : "FAIL" }')
        [ "$ok" = ok ] || failed=1
        line+=" aggregate ${aggregate}% ($ok)"
    fi
    echo "$line"
done
[ $failed = 0 ] || { echo "FAIL: a job exceeded its limit or fell short of its target"; exit 1; }
echo "PASS: core limits hold as caps from the first kernel through libnvshare on the fake GPU"
