#!/usr/bin/env bash
# Core limits through the whole product path on the fake GPU: fake_job (a
# driver-API program) with libnvshare preloaded, the real scheduler, the
# hook's gating and drain. Single jobs at 10/25/50/75/90 % and the mixes
# 50+60 (scaled to 45.45/54.55), 10+90, 25+75, 30+30+30 and 20 % beside two
# unlimited jobs must land within 1 point of their targets over 20 whole
# windows after 2 s of warm-up.
#
# Achieved share = the job's kernel rate / the rate of an unlimited job
# alone, both measured in this run, over 20 windows. The fake GPU keeps one timeline per
# process, so a process only makes progress while it may submit: its rate
# is its share of the GPU's time. All scenarios run at once, each with its
# own scheduler.
#
# usage: limits_fake.sh SCHEDULER LIBNVSHARE FAKE_LIB_DIR FAKE_JOB
set -euo pipefail
SCHED=$1 LIB=$2 FAKE_DIR=$3 JOB=$4
WORK=$(mktemp -d /tmp/nvshare-limits.XXXXXX)
scheds=()
trap 'kill "${scheds[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
UUID=GPU-fa4e0000-0000-0000-0000-000000000000

scenarios=("100" "10" "25" "50" "75" "90" "50 60" "10 90" "25 75" "30 30 30" "20 100 100")
for k in "${!scenarios[@]}"; do
    mkdir -p "$WORK/s$k"
    NVSHARE_SOCK_DIR=$WORK/s$k NVSHARE_GPUS=$UUID:16384 NVSHARE_TQ=100ms \
        "$SCHED" >"$WORK/s$k/sched.log" 2>&1 &
    scheds+=($!)
done
for k in "${!scenarios[@]}"; do
    for _ in $(seq 500); do [ -S "$WORK/s$k/scheduler.sock" ] && break; sleep 0.02; done
done
from=$(( $(date +%s%N) + 2000000000 )); until=$(( from + 20000000000 ))
pids=()
for k in "${!scenarios[@]}"; do
    j=0
    for limit in ${scenarios[$k]}; do
        j=$((j + 1))
        [ "$limit" = 100 ] && limit=
        NVSHARE_SOCK_DIR=$WORK/s$k NVSHARE_POD_NAME=job-$j NVSHARE_GPU_CORE_LIMIT=$limit \
            LD_LIBRARY_PATH=$FAKE_DIR LD_PRELOAD=$LIB "$JOB" "$from" "$until" \
            >"$WORK/s$k/job$j.out" 2>/dev/null &
        pids+=($!)
    done
done
wait "${pids[@]}"

rate() { sed -n 's/.*rate=\([0-9.]*\).*/\1/p' "$1"; }
solo=$(rate "$WORK/s0/job1.out")
failed=0
for k in "${!scenarios[@]}"; do
    [ "$k" = 0 ] && continue
    sum=0; for limit in ${scenarios[$k]}; do [ "$limit" != 100 ] && sum=$((sum + limit)); done
    unlimited=0; for limit in ${scenarios[$k]}; do [ "$limit" = 100 ] && unlimited=$((unlimited + 1)); done
    j=0; line="  ${scenarios[$k]// /+}:"
    for limit in ${scenarios[$k]}; do
        j=$((j + 1))
        share=$(awk -v r="$(rate "$WORK/s$k/job$j.out")" -v s="$solo" 'BEGIN { printf "%.2f", 100 * r / s }')
        # Limits above 100 % in sum are scaled; unlimited jobs share the rest.
        want=$(awk -v l="$limit" -v s="$sum" -v u="$unlimited" 'BEGIN {
            if (l == 100) printf "%.2f", (100 - (s > 100 ? 100 : s)) / u
            else printf "%.2f", (s > 100) ? 100 * l / s : l }')
        ok=$(awk -v a="$share" -v b="$want" 'BEGIN { d = a - b; print (d <= 1 && d >= -1) ? "ok" : "FAIL" }')
        [ "$ok" = ok ] || failed=1
        line+=" ${limit}%->${share}% (want ${want}%, $ok)"
    done
    echo "$line"
done
echo "  solo rate $solo kernels/s"
[ $failed = 0 ] || { echo "FAIL: a job missed its target by more than 1 point"; exit 1; }
echo "PASS: core limits hold within 1 point through libnvshare on the fake GPU"
