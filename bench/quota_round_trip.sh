#!/usr/bin/env bash
# bench/quota_round_trip.sh - what a reservation costs when the process's
# credit does not cover it and the scheduler must be asked.
#
#   bench/quota_round_trip.sh [BUILD_DIR]
#
# tests/integration/sim_alloc reserves and frees 300 MiB against a 1000 MiB
# pod quota: 300 MiB exceeds the credit a process keeps (256 MiB), so every
# reservation is a round trip to the scheduler; 200 MiB stays within it and
# is local. Prints microseconds per reserve+release pair for both.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
export NVSHARE_SOCK_DIR=$(mktemp -d)
export NVSHARE_STATE_FILE= # no settings left behind for the next run
NVSHARE_GPUS=GPU-bench-0:16384 "$BUILD/src/scheduler/nvshare-scheduler" >/dev/null 2>&1 &
sched=$!
trap 'kill $sched; rm -rf "$NVSHARE_SOCK_DIR"' EXIT
for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && break; sleep 0.05; done
pair_us() { # MiB rounds
    local start end
    start=$(date +%s%N)
    NVSHARE_POD_NAME=bench NVSHARE_GPU_MEMORY_LIMIT=1000Mi \
        "$BUILD/tests/integration/sim_alloc" GPU-bench-0 race "$2" "$1" /dev/null >/dev/null
    end=$(date +%s%N)
    echo $(( (end - start) / 1000 ))
}
base=$(pair_us 300 1)
for mib in 300 200; do
    total=$(pair_us "$mib" 5000)
    awk -v t="$total" -v b="$base" -v m="$mib" 'BEGIN {
        printf "quota %s MiB pairs: %.1f us per reserve+release (%s)\n", m, (t - b) / 5000,
               m == 300 ? "round trip to the scheduler" : "local credit" }'
done
