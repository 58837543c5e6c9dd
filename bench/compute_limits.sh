#!/usr/bin/env bash
# bench/compute_limits.sh - core limits on a real GPU.
#
#   bench/compute_limits.sh [BUILD_DIR]
#
# Achieved share = throughput under a limit / solo throughput, both measured
# in this run over the same length (6 whole accounting windows, after 3 s of
# start-up). For a compute-bound fixed-work kernel, PyTorch bf16 matmul and
# a bursty job (small kernels with host gaps): limits 10/25/50/75/90 %. Then
# the mixes 50+60 (scaled to 45.5/54.5) and 10+90 of the fixed-work job: the
# aggregate (GPU busy) and the ratio between the two. Switch rate and
# preemption latency come from the scheduler's log.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
OUT=${OUT:-$TOP/.bench}/limits
mkdir -p "$OUT/bin"
LIB=$BUILD/src/hook/libnvshare.so
export NVSHARE_SOCK_DIR=$OUT/sock
SECONDS_MEASURED=6
for prog in fixed_work bursty; do nvcc -O2 -o "$OUT/bin/$prog" "$TOP/bench/$prog.cu"; done
val() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p"; }

start_scheduler() {
    rm -rf "$NVSHARE_SOCK_DIR"
    NVSHARE_DEBUG=1 NVSHARE_TQ=100ms "$BUILD/src/scheduler/nvshare-scheduler" >"$OUT/sched.log" 2>&1 &
    SCHED=$!
    for _ in $(seq 200); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && return; sleep 0.05; done
    echo "scheduler did not start"; exit 1
}
stop_scheduler() { kill "$SCHED" 2>/dev/null; wait "$SCHED" 2>/dev/null || true; }
trap 'stop_scheduler 2>/dev/null || true' EXIT

job() { # name -> command prefix taking --window FROM UNTIL
    case $1 in
    fixed_work) echo "$OUT/bin/fixed_work" ;;
    bursty) echo "$OUT/bin/bursty" ;;
    matmul) echo "python3 $TOP/bench/matmul.py" ;;
    esac
}

# Python jobs need longer to import torch and create their context.
window() {
    local startup=3000000000
    [ "${1:-}" = matmul ] && startup=8000000000
    from=$(( $(date +%s%N) + startup )); until=$(( from + SECONDS_MEASURED * 1000000000 ))
}

# run_limited NAME LIMIT... : one process per limit, all at once; prints rates.
run_limited() {
    local name=$1; shift
    local pids=() i=0
    start_scheduler
    window "$name"
    for limit in "$@"; do
        i=$((i + 1))
        NVSHARE_GPU_CORE_LIMIT=$limit NVSHARE_POD_NAME=job-$i LD_PRELOAD=$LIB \
            $(job "$name") --window "$from" "$until" >"$OUT/$name.$i.out" 2>"$OUT/$name.$i.err" & pids+=($!)
    done
    wait "${pids[@]}"
    stop_scheduler
    grants=$(grep -c "lease .* to client" "$OUT/sched.log" || true)
    grep -o 'preempt [0-9.]* ms' "$OUT/sched.log" | awk '{ print $2 }' >>"$OUT/preempt.txt" || true
    echo "$grants" >>"$OUT/grants.txt"
    for j in $(seq 1 "$i"); do val rate <"$OUT/$name.$j.out"; done
}

echo "== device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)" | tee "$OUT/summary.txt"
: >"$OUT/preempt.txt"; : >"$OUT/grants.txt"
for name in fixed_work matmul bursty; do
    if [ "$name" = matmul ] && ! python3 -c 'import torch' 2>/dev/null; then continue; fi
    window "$name"
    solo=$($(job "$name") --window "$from" "$until" | val rate)
    line="$name (solo $solo/s):"
    for limit in 10 25 50 75 90; do
        rate=$(run_limited "$name" "$limit")
        line+=$(awk -v r="$rate" -v s="$solo" -v l="$limit" 'BEGIN { a = 100 * r / s; printf " %d%%->%.2f%% (%+.2f)", l, a, a - l }')
    done
    echo "$line" | tee -a "$OUT/summary.txt"
done

window
solo=$("$OUT/bin/fixed_work" --window "$from" "$until" | val rate)
for mix in "50 60" "10 90"; do
    rates=$(run_limited fixed_work $mix | tr '\n' ' ')
    set -- $mix
    awk -v s="$solo" -v la="$1" -v lb="$2" -v r="$rates" 'BEGIN {
        split(r, v, " "); sum = la + lb; scale = sum > 100 ? 100 / sum : 1
        a = 100 * v[1] / s; b = 100 * v[2] / s
        printf "mix %d+%d: %.2f%% + %.2f%% (targets %.2f + %.2f), aggregate %.2f%%, ratio %.4f (want %.4f, error %+.2f %%)\n",
               la, lb, a, b, la * scale, lb * scale, a + b, a / b, la / lb, 100 * ((a / b) / (la / lb) - 1)
    }' | tee -a "$OUT/summary.txt"
done
sort -g "$OUT/preempt.txt" | awk '{ v[NR] = $1 } END { printf "preemptions %d: median %.2f ms, p99 %.2f ms\n", NR, v[int(NR / 2) + 1], v[int(NR * 0.99) + 1] }' | tee -a "$OUT/summary.txt"
awk -v s="$SECONDS_MEASURED" '{ g += $1; n++ } END { printf "lock grants per run (start-up included): %.0f on average, ~%.1f/s\n", g / n, g / n / (s + 3) }' "$OUT/grants.txt" | tee -a "$OUT/summary.txt"
