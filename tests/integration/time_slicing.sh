#!/usr/bin/env bash
# Two and four workloads share one GPU at TQ 100 ms: the GPU stays busy
# (aggregate within 2 % of ideal) and shares are equal (within 5 %), and no
# two workloads ever hold the GPU at the same time.
#
# The ideal is the time from the first unit of work to the common end:
# process start-up is not the scheduler's to count. Runs are 60 quanta long
# per workload pair so that the last, unfinished round (one quantum) moves a
# share by at most 1/30.
source "$(dirname "$0")/lib.sh"

start_scheduler NVSHARE_GPUS=GPU-sim-0:16384 NVSHARE_TQ=100ms

run_mix() {
    local n=$1 seconds=$2 start until
    start=$(now_ns)
    until=$(( start + seconds * 1000000000 ))
    local pids=()
    rm -f "$WORK"/trace.* "$WORK"/w*.out
    for i in $(seq 1 "$n"); do
        "$WORKLOAD_BIN" GPU-sim-0 "$until" 1000 "$WORK/trace.$i" >"$WORK/w$i.out" &
        pids+=($!)
    done
    wait "${pids[@]}" || fail "a workload failed"
    local total=0 first=$until
    for i in $(seq 1 "$n"); do
        local held f; held=$(field held_ms "$WORK/w$i.out")
        f=$(field first_unit_ns "$WORK/w$i.out")
        [ "$f" -lt "$first" ] && first=$f
        [ -n "$held" ] || fail "workload $i of $n did not report"
        total=$(awk "BEGIN { print $total + $held }")
        echo "  $n workloads: #$i held ${held} ms, grants $(field grants "$WORK/w$i.out")"
    done
    local window_ms=$(( (until - first) / 1000000 ))
    echo "  $n workloads: aggregate ${total} ms of ${window_ms} ms" \
         "(start-up $(( (first - start) / 1000000 )) ms)"
    check "$total >= 0.98 * $window_ms" "$n workloads: aggregate $total ms < 98 % of $window_ms ms"
    for i in $(seq 1 "$n"); do
        local held; held=$(field held_ms "$WORK/w$i.out")
        check "($held / $total) > (1 / $n) * 0.95 && ($held / $total) < (1 / $n) * 1.05" \
            "$n workloads: share of #$i is $held / $total, not 1/$n within 5 %"
    done
    # Sorted by start, every unit must begin after the previous one ended.
    cat "$WORK"/trace.* | sort -k2,2n | awk '
        { if (NR > 1 && $2 < prev_end) { bad++ } if ($3 > prev_end) prev_end = $3 }
        END { if (bad) { print "  " bad " overlapping units"; exit 1 } }' ||
        fail "$n workloads: two workloads held the GPU at once"
    pass "$n workloads share one GPU"
}

run_mix 2 6
run_mix 4 12
