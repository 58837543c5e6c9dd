#!/usr/bin/env bash
# bench/swap_speed.sh - swap-out and swap-in speed of libnvshare on a real
# GPU, with checksums (issue 10, item 4).
#
#   OUT=<dir> bash bench/swap_speed.sh     (from the repository root, after
#                                           cmake -S . -B build && cmake --build build)
#
# First, as before: builds bench/swap_speed.cu with nvcc and runs it with
# libnvshare preloaded and NVSHARE_ENABLE_OVERSUB=1, with a fresh socket
# directory and no
# scheduler (the swaps are libnvshare's own callbacks, called directly, as
# a PREPARE_SWAP, an EVICT and the next grant call them). Prints the
# preparation time, one line per round and the summary line of
# swap_speed.cu (targets: the first, prepared swap-out >= 35 GB/s, later
# ones >= 35 GB/s and >= 70 % of in, in >= 40 GB/s, every checksum intact),
# plus libnvshare's swap statistics (swap-outs, swap-out-bytes, ...).
# Settings: GIB=6 (buffer), ROUNDS=5,
# BUILD=build, GPU (an nvidia-smi index or UUID; default: the first of
# CUDA_VISIBLE_DEVICES, else 0). OVERSUB_RUN=0 leaves this part out.
#
# Then, in the same run, the yardstick and the default (no oversub) swaps:
#  - the machine's pinned copy bandwidth, both directions
#    (bench/pinned_copy.cu: cudaMemcpyAsync between a cudaHostAlloc buffer
#    and device memory, 256 MiB chunks, best of 5, PINNED_GIB=4, natively);
#  - for each size of SIZES (default "1 8 64" GiB; a size the GPU's free
#    memory or the host's available memory cannot hold is scaled down to
#    what fits, and the table says so), swap_speed.cu on plain device
#    memory made swappable (NVSHARE_ENABLE_OVERSUB=1 stands in for the
#    scheduler, whose default does it), SIZE_ROUNDS=3 rounds, prepared as
#    the scheduler prepares a holder before an arrival could have it leave
#    (PREPARE_SWAP: the ring and the host copies, made on a quarter of the
#    threads as beside work): round 1's swap-out is the arrival's, the
#    first of the process; the later rounds' swap-outs (median) and every
#    round's swap-in (median). Each rate is divided by the pinned
#    bandwidth of its direction (out: d2h, in: h2d); PASS at >= 0.80
#    (RATIO_TARGET), and every checksum intact. Then 2 rounds unprepared,
#    for the one row marked "info": a swap-out with no PREPARE_SWAP before
#    it, which the scheduler makes only when a holder must leave within a
#    second of its grant (it writes host memory for the first time).
# Runtime: ~1 min, plus ~1-2 min for 64 GiB (more if unprepared swaps pin
# host memory as they go).
# Results in $OUT/swap_speed (else a new directory under /tmp). Exit status:
# 0 PASS, 1 FAIL, 2 could not run.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
# gpu_target, gpu_mem (LIB too, for this BUILD).
source "$ROOT/tests/gpu/lib.sh"
LIB=$BUILD/src/hook/libnvshare.so
GIB=${GIB:-6} ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-1 8 64} SIZE_ROUNDS=${SIZE_ROUNDS:-3} PINNED_GIB=${PINNED_GIB:-4}
RATIO_TARGET=${RATIO_TARGET:-0.80} OVERSUB_RUN=${OVERSUB_RUN:-1}
RESULTS=${OUT:-$(mktemp -d)}/swap_speed
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$RESULTS" "$WORK/sock"

[ -f "$LIB" ] || { echo "swap_speed: $LIB missing: build first"; exit 2; }
nvcc -O2 -o "$WORK/swap_speed" "$ROOT/bench/swap_speed.cu" || exit 2
nvcc -O2 -o "$WORK/pinned_copy" "$ROOT/bench/pinned_copy.cu" || exit 2
gpu_target >/dev/null
rc=0
if [ "$OVERSUB_RUN" = 1 ]; then
    echo "== swap_speed: $GIB GiB, $ROUNDS rounds, GPU $GPU_INDEX ($GPU_NAME), $(date -u +%FT%TZ)"
    NVSHARE_SOCK_DIR=$WORK/sock NVSHARE_ENABLE_OVERSUB=1 \
        NVSHARE_STATS=1 LD_PRELOAD=$LIB timeout -k 10 600 "$WORK/swap_speed" "$GIB" "$ROUNDS" \
        2>"$RESULTS/stderr.log" | tee "$RESULTS/result.txt"
    rc=${PIPESTATUS[0]}
    grep -E "stats: (swap|oversub)" "$RESULTS/stderr.log" | sed 's/^.*stats: /   /'
    grep -E "warning|error" "$RESULTS/stderr.log" | grep -v "no scheduler" | head -5
fi

# --- the pinned bandwidth, and the default swaps against it -------------------
echo "== pinned copies, GPU $GPU_INDEX ($GPU_NAME, $GPU_UUID), natively:"
timeout -k 10 120 "$WORK/pinned_copy" "$PINNED_GIB" 5 2>&1 | tee "$RESULTS/pinned.txt"
H2D=$(sed -n 's/.* h2d \([0-9.]*\) GB\/s.*/\1/p' "$RESULTS/pinned.txt")
D2H=$(sed -n 's/.* d2h \([0-9.]*\) GB\/s.*/\1/p' "$RESULTS/pinned.txt")
if [ -z "$H2D" ] || [ -z "$D2H" ]; then
    echo "swap_speed: no pinned bandwidth measured; see $RESULTS/pinned.txt"
    echo "== results in $RESULTS"
    exit 2
fi

# swap_rows LABEL FILE: table rows from swap_speed.cu's round lines.
ROWS=()
FAILED=0
row() { # size what gbps pinned_gbps [note]; info=1: not judged
    local ratio r
    ratio=$(awk -v a="$3" -v b="$4" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    r=$(awk -v x="$ratio" -v t="$RATIO_TARGET" 'BEGIN { if (x + 0 >= t + 0) print "PASS"; else print "FAIL" }')
    if [ "${info:-0}" = 1 ]; then r=info; elif [ "$r" != PASS ]; then FAILED=1; fi
    ROWS+=("$(printf '%-14s %-36s %8s %8s %6s  %-4s %s' "$1" "$2" "$3" "$4" "$ratio" "$r" "${5:-}")")
}
swap_rows() {
    local label=$1 file=$2 rounds ok
    rounds=$(grep -c '^round [0-9]*:' "$file")
    ok=$(grep -c '^round [0-9]*:.*checksum ok' "$file")
    if [ "$rounds" -lt 2 ]; then
        ROWS+=("$(printf '%-14s %-36s %s' "$label" "no rounds" "FAIL: see $file and its .err")")
        FAILED=1
        return
    fi
    # "round R: out G GiB in T s (X GB/s), in G GiB in T s (Y GB/s), checksum ok"
    local first later ins
    first=$(sed -n 's/^round 1: out .*(\([0-9.]*\) GB\/s), in .*/\1/p' "$file")
    later=$(sed -n 's/^round \([2-9]\|[1-9][0-9]\+\): out .*(\([0-9.]*\) GB\/s), in .*/\2/p' "$file" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    ins=$(sed -n 's/^round [0-9]*: out .*, in .*(\([0-9.]*\) GB\/s), checksum.*/\1/p' "$file" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    row "$label" "out, right after an arrival (round 1)" "${first:-0}" "$D2H"
    row "$label" "out, later rounds (median)" "${later:-0}" "$D2H"
    row "$label" "in (median of $rounds)" "${ins:-0}" "$H2D"
    if [ "$ok" -ne "$rounds" ]; then
        ROWS+=("$(printf '%-14s %-36s %s' "$label" "checksums" "FAIL: $ok of $rounds intact")")
        FAILED=1
    fi
}

# swaps FILE GIB ROUNDS [unprepared]: swap_speed.cu's lines into FILE.
swaps() {
    NVSHARE_SOCK_DIR=$WORK/sock NVSHARE_STATS=1 NVSHARE_ENABLE_OVERSUB=1 LD_PRELOAD=$LIB \
        timeout -k 10 300 "$WORK/swap_speed" "$2" "$3" ${4:-} >"$1" 2>"$1.err"
    local src=$?
    sed 's/^/   /' "$1"
    [ "$src" -le 1 ] || { echo "   exit status $src:"; grep -v "stats:" "$1.err" | tail -n 5 | sed 's/^/      /'; }
    grep -E "stats: swap" "$1.err" | sed 's/^.*stats: /      /'
}

read -r FREE_MIB <<<"$(gpu_mem free)"
HOST_MIB=$(awk '/^MemAvailable:/ { printf "%d", $2 / 1024 }' /proc/meminfo)
# Device: the buffer + 2 GiB (context, checksum); host: the swapped-out
# copy + 16 GiB.
FIT_GIB=$(awk -v f="${FREE_MIB:-0}" -v h="$HOST_MIB" 'BEGIN {
    d = int((f - 2048) / 1024); m = int((h - 16384) / 1024); print d < m ? d : m }')
echo "== default swaps (plain device memory), $SIZE_ROUNDS rounds each, prepared, then 2 unprepared; GPU $FREE_MIB MiB free, host $HOST_MIB MiB available: up to $FIT_GIB GiB fits"
done_sizes=" "
for size in $SIZES; do
    run=$size note=
    if [ "$FIT_GIB" -lt 1 ]; then
        ROWS+=("$(printf '%-14s %-36s %s' "$size GiB" "not run" "no room: GPU $FREE_MIB MiB free, host $HOST_MIB MiB")")
        FAILED=1
        continue
    fi
    if awk -v s="$size" -v f="$FIT_GIB" 'BEGIN { exit !(s > f) }'; then
        run=$FIT_GIB
        note=" (scaled down from $size GiB: no room)"
        echo "   $size GiB does not fit (GPU $FREE_MIB MiB free, host $HOST_MIB MiB available): measured at $run GiB instead"
    fi
    if [[ $done_sizes == *" $run "* ]]; then
        echo "   $size GiB: $run GiB measured already"
        continue
    fi
    done_sizes+="$run "
    label="$run GiB$([ -n "$note" ] && echo '*')"
    echo "-- $run GiB$note"
    swaps "$RESULTS/default_${size}gib.txt" "$run" "$SIZE_ROUNDS"
    swap_rows "$label" "$RESULTS/default_${size}gib.txt"
    u=$RESULTS/unprepared_${size}gib.txt
    echo "-- $run GiB$note, unprepared"
    swaps "$u" "$run" 2 unprepared
    info=1 row "$label" "out, no PREPARE_SWAP before it" \
        "$(sed -n 's/^round 1: out .*(\([0-9.]*\) GB\/s), in .*/\1/p' "$u")" "$D2H"
done

echo
echo "== swap rates against the pinned bandwidth (h2d $H2D GB/s, d2h $D2H GB/s), target >= $RATIO_TARGET"
printf '%-14s %-36s %8s %8s %6s  %s\n' size swap GB/s pinned ratio result
printf '%s\n' "${ROWS[@]}"
grep -q '\*' <<<"${ROWS[*]}" && echo "(* scaled down: the size asked for did not fit)"
echo "== results in $RESULTS"
[ "$rc" -ne 0 ] && [ "$rc" -ne 1 ] && exit "$rc"
[ "$FAILED" = 0 ] && [ "$rc" = 0 ] && exit 0
exit 1
