#!/usr/bin/env bash
# Swappable device memory without a scheduler (NVSHARE_ENABLE_OVERSUB of
# the process), on the fake driver:
#   - on: cuMemAlloc_v2 / cuMemAllocPitch_v2 of >= 2 MiB are VMM ranges of
#     the rounded size (never managed memory), charged and refused by the
#     quota as device memory of that size (oversub_test convert, and
#     memory_test's 15 allocation paths unchanged), and no more than the
#     device has; off or unset: plain device memory;
#   - swap out / in move exactly the evictable allocations and wait for
#     them: converted ones are copied to the host through the pinned ring
#     (4 MiB copies in the fake's trace, as many bytes as the hook says it
#     moved) and their physical memory released, then mapped again at the
#     same addresses and copied back intact; the application's own managed
#     memory is prefetched; nothing is discarded;
#   - cuMemAllocAsync of the default pool is converted too, its frees
#     parked for reuse on their stream and released (not copied) by a
#     swap-out (oversub_test async);
#   - PREPARE_SWAP pins the ring ahead (FAKE_CUDA_PIN_GBPS low), so the
#     swap-out does not; without it the first swap-out pins; a process
#     exits cleanly while the ring is being pinned;
#   - a blank allocation (gate closed since it was made) is released and
#     made again without copies.
# Every swap moves at most 32 MiB: the hook's host copies are real memcpy.
# usage: oversub.sh LIBNVSHARE FAKE_LIB_DIR OVERSUB_TEST MEMORY_TEST
set -euo pipefail
LIB=$1 FAKE=$2 TEST=$3 MEMTEST=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/sock"
QUOTA=$((64 << 20))
run() { # env... -- command...
    env NVSHARE_SOCK_DIR="$dir/sock" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$LIB" \
        NVSHARE_STATS=1 "$@"
}
fail() { echo "FAIL: $*"; cat "$dir/out" "$dir/err" 2>/dev/null; exit 1; }
check() { # name, then the command; it must print PASS
    local name=$1; shift
    "$@" >"$dir/out" 2>"$dir/err" || fail "$name"
    grep -q '^PASS' "$dir/out" || fail "$name"
    echo "ok: $name: $(grep -v '^PASS' "$dir/out" | tr '\n' ' ')"
}
# trace NAME: a fresh trace directory for the next run
trace() { rm -rf "${dir:?}/$1"; mkdir "$dir/$1"; echo "$dir/$1"; }

check "oversub on: VMM ranges, quota on rounded sizes" \
    run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_GPU_MEMORY_LIMIT=64Mi "$TEST" convert 1 $QUOTA
grep -q "converted=[1-9]" "$dir/out" || fail "no conversion counted"
check "oversub off: device memory" \
    run NVSHARE_ENABLE_OVERSUB=0 NVSHARE_GPU_MEMORY_LIMIT=64Mi "$TEST" convert 0 $QUOTA
check "oversub unset: device memory" \
    run NVSHARE_GPU_MEMORY_LIMIT=64Mi "$TEST" convert 0 $QUOTA
check "a device without VMM: device memory" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_VMM=0 NVSHARE_GPU_MEMORY_LIMIT=64Mi \
    "$TEST" convert 0 $QUOTA
warned=$(grep -c "has no virtual memory management" "$dir/err" || true)
[ "$warned" = 1 ] || fail "$warned warnings about a device without VMM, want 1"

# Without a scheduler converted memory is the device's: 48 MiB do not fit
# a 32 MiB device, 24 MiB do.
for on in 1 0; do
    check "48 MiB on a 32 MiB device, oversub $on" \
        run NVSHARE_ENABLE_OVERSUB=$on FAKE_CUDA_MEM_MB=32 "$TEST" beyond $((48 << 20)) 0
    check "24 MiB on a 32 MiB device, oversub $on" \
        run NVSHARE_ENABLE_OVERSUB=$on FAKE_CUDA_MEM_MB=32 "$TEST" beyond $((24 << 20)) 1
done

# Every allocation path keeps its quota behaviour with oversub on.
run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_GPU_MEMORY_LIMIT=64Mi FAKE_CUDA_MEM_MB=1024 \
    "$MEMTEST" paths $QUOTA >"$dir/out" 2>"$dir/err" || fail "memory_test paths with oversub on"
echo "ok: memory_test paths with oversub on: $(grep -c PASS "$dir/out") PASS lines"

check "stream-ordered: parked for reuse, swapped" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_MEM_MB=64 "$TEST" async

t=$(trace swap)
check "swap out / in" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_MEM_MB=48 FAKE_CUDA_COPY_GBPS=0.2 \
    FAKE_CUDA_TRACE_DIR="$t" "$TEST" swap
grep -q "swap out.*failed\|swap in.*failed" "$dir/err" && fail "a swap warned: $(cat "$dir/err")"
trace=$(cat "$t"/trace.*)
grep -q "^copy_dtoh [0-9]* [0-9]* 4194304$" <<<"$trace" || fail "no copy to the host in the trace"
grep -q "^copy_htod [0-9]* [0-9]* 4194304$" <<<"$trace" || fail "no copy to the device in the trace"
! grep -q "^discard" <<<"$trace" || fail "a discard in the trace"
awk '$1 ~ /^copy_/ && $4 > 4194304 { exit 1 }' <<<"$trace" ||
    fail "a copy larger than the ring's 4 MiB chunks"
grep -q "^prefetch_host [0-9]* [0-9]* 8388608$" <<<"$trace" || fail "no prefetch of the application's managed memory to the host"
grep -q "^prefetch_device [0-9]* [0-9]* 8388608$" <<<"$trace" || fail "no prefetch of the application's managed memory to the device"
! grep -qE "^prefetch_(host|device) [0-9]* [0-9]* (16777216|4194304)$" <<<"$trace" ||
    fail "converted memory was prefetched, not copied"
! grep -q " 3145728$" <<<"$trace" || fail "the pool allocation was moved"
# Every byte the hook counts as moved out was copied (or prefetched).
counted=$(sed -n 's/.*stats: swap-out-bytes //p' "$dir/err")
copied=$(awk '$1 == "copy_dtoh" || $1 == "prefetch_host" { s += $4 } END { print s + 0 }' <<<"$trace")
[ "$counted" = "$copied" ] || fail "the hook counts $counted bytes swapped out, the trace $copied"
echo "PASS: $(grep -c '^copy_dtoh' <<<"$trace") copies to the host," \
    "$(grep -c '^copy_htod' <<<"$trace") to the device," \
    "$(grep -c '^prefetch_host' <<<"$trace") prefetches to the host, $copied bytes out"

# The ring (8 MiB per CPU, up to 16) pins in 2.7 s at this rate: a swap-out
# that pins takes that long, one that does not a fraction of it.
pin_gbps=$(awk -v n="$(getconf _NPROCESSORS_ONLN)" \
    'BEGIN { if (n > 16) n = 16; if (n < 1) n = 1; printf "%.5f", 0.05 * n / 16 }')
check "prepared swap-out pins nothing" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS="$pin_gbps" "$TEST" prepare
check "unprepared: the first swap-out pins, the next not" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS="$pin_gbps" "$TEST" unprepared
check "a swap-out behind the preparer" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS=0.2 "$TEST" prepare-behind
check "a swap-out while the preparer makes the host copies" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS=2 "$TEST" prepare-race
check "exit while preparing" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS=0.5 "$TEST" prepare-exit
check "a swap-out as the process exits" \
    run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_FAIL_CLOSED=0 "$TEST" swap-at-exit
! grep -q "swap out.*failed" "$dir/err" || fail "a swap-out during the exit warned: $(cat "$dir/err")"
check "copies that fail in the middle of a swap-out" \
    run NVSHARE_ENABLE_OVERSUB=1 "$TEST" copy-fails
check "swaps beside the application's graph capture" \
    run NVSHARE_ENABLE_OVERSUB=1 "$TEST" capture
check "two contexts, then the staging buffers' context destroyed" \
    run NVSHARE_ENABLE_OVERSUB=1 "$TEST" contexts

t=$(trace blank)
check "blank allocations are released, not copied" \
    run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_FAIL_CLOSED=1 FAKE_CUDA_TRACE_DIR="$t" "$TEST" blank
! grep -q "^copy" "$t"/trace.* 2>/dev/null || fail "a blank allocation was copied"
