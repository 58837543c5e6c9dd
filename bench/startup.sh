#!/usr/bin/env bash
# bench/startup.sh - a PyTorch job's start-up, native and under libnvshare.
#
#   OUT=/tmp/b bash bench/startup.sh [BUILD_DIR]     (default: build)
#
# A user's job includes its first seconds: this measures how long PyTorch
# takes from process start to its CUDA context (import, context, operands
# allocated), to its first kernel and to its first measured step (three
# warm-up matmuls done), REPS times (default 5) in turn for each setting:
#   native      no libnvshare, no scheduler;
#   nvshare     libnvshare preloaded, a scheduler with its defaults;
#   limit-50    the same with NVSHARE_GPU_CORE_LIMIT=50.
# Runs alternate between settings so that drift on the machine weighs on
# all alike. Prints median and range per phase and setting; the difference
# of medians is what libnvshare adds to a job's start. Outputs in
# $OUT/startup.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
OUT=${OUT:-$TOP/.bench}/startup
REPS=${REPS:-5}
source "$TOP/tests/gpu/lib.sh"
mkdir -p "$OUT"
export NVSHARE_SOCK_DIR=$OUT/sock
trap sched_stop EXIT

run() { # setting rep
    local start; start=$(date +%s%N)
    local window=(--window "$start" $((start + 1000000000)))
    case $1 in
    native) python3 "$TOP/bench/matmul.py" "${window[@]}" ;;
    nvshare) LD_PRELOAD=$LIB python3 "$TOP/bench/matmul.py" "${window[@]}" ;;
    limit-50) NVSHARE_GPU_CORE_LIMIT=50 LD_PRELOAD=$LIB python3 "$TOP/bench/matmul.py" "${window[@]}" ;;
    esac >"$OUT/$1.$2.out" 2>"$OUT/$1.$2.err"
}

settings=(native nvshare limit-50)
sched_start "$OUT/sched.log"
python3 -c 'import torch' # the page cache, for every setting alike
for rep in $(seq "$REPS"); do
    for s in "${settings[@]}"; do run "$s" "$rep"; done
done
sched_stop

{
echo "== PyTorch start-up, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), $(date -u +%Y-%m-%dT%H:%MZ), $REPS runs each, seconds from process start: median [min..max]"
printf '%-9s | %-22s | %-22s | %-22s\n' setting "torch imported" "context, operands" "first step"
for s in "${settings[@]}"; do
    row=$(printf '%-9s' "$s")
    for phase in imported context first_step; do
        row+=" | $(sed -n "s/.*\b$phase=\([0-9.]*\).*/\1/p" "$OUT/$s".*.out | sort -g |
            awk '{ v[NR] = $1 } END { if (NR) printf "%.3f [%.3f..%.3f]  ", v[int((NR + 1) / 2)], v[1], v[NR]; else printf "%-22s", "no result" }')"
    done
    echo "$row"
done
} | tee "$OUT/summary.txt"
