#!/usr/bin/env bash
# bench/swap_speed.sh - swap-out and swap-in speed of libnvshare on a real
# GPU, with checksums (issue 10, item 4).
#
#   OUT=<dir> bash bench/swap_speed.sh     (from the repository root, after
#                                           cmake -S . -B build && cmake --build build)
#
# Builds bench/swap_speed.cu with nvcc and runs it with libnvshare preloaded
# and NVSHARE_ENABLE_OVERSUB=1, with a fresh socket directory and no
# scheduler (the swaps are libnvshare's own callbacks, called directly, as
# a PREPARE_SWAP, an EVICT and the next grant call them). Prints the
# preparation time, one line per round and the summary line of
# swap_speed.cu (targets: the first, prepared swap-out >= 35 GB/s, later
# ones >= 35 GB/s and >= 70 % of in, in >= 40 GB/s, every checksum intact),
# plus libnvshare's swap statistics (swap-pinned-ahead: pinned copies made
# by the preparation; swap-unpinned: allocations a swap-out prefetched for
# want of a copy, 0 when prepared). Settings: GIB=6 (buffer), ROUNDS=5,
# BUILD=build, GPU=0.
# Results in $OUT/swap_speed (else a new directory under /tmp). Exit status:
# 0 PASS, 1 FAIL, 2 could not run.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
LIB=$BUILD/src/hook/libnvshare.so
GIB=${GIB:-6} ROUNDS=${ROUNDS:-5} GPU=${GPU:-0}
RESULTS=${OUT:-$(mktemp -d)}/swap_speed
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$RESULTS" "$WORK/sock"

[ -f "$LIB" ] || { echo "swap_speed: $LIB missing: build first"; exit 2; }
nvcc -O2 -o "$WORK/swap_speed" "$ROOT/bench/swap_speed.cu" || exit 2
echo "== swap_speed: $GIB GiB, $ROUNDS rounds, GPU $GPU ($(nvidia-smi -i "$GPU" --query-gpu=name --format=csv,noheader 2>/dev/null)), $(date -u +%FT%TZ)"
CUDA_VISIBLE_DEVICES=$GPU NVSHARE_SOCK_DIR=$WORK/sock NVSHARE_ENABLE_OVERSUB=1 \
    NVSHARE_STATS=1 LD_PRELOAD=$LIB "$WORK/swap_speed" "$GIB" "$ROUNDS" \
    2>"$RESULTS/stderr.log" | tee "$RESULTS/result.txt"
rc=${PIPESTATUS[0]}
grep -E "stats: (swap|oversub)" "$RESULTS/stderr.log" | sed 's/^.*stats: /   /'
grep -E "warning|error" "$RESULTS/stderr.log" | grep -v "no scheduler" | head -5
echo "== results in $RESULTS"
exit "$rc"
