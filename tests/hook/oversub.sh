#!/usr/bin/env bash
# Oversubscription without a scheduler (NVSHARE_ENABLE_OVERSUB of the
# process), on the fake driver:
#   - on: cuMemAlloc_v2 / cuMemAllocPitch_v2 give managed memory, charged
#     and refused by the quota exactly as device memory (oversub_test
#     convert, and memory_test's 15 allocation paths unchanged), and may
#     exceed the device's memory; off or unset: device memory;
#   - a device without concurrent managed access: not converted, one warning;
#   - swap out / in move exactly the managed allocations and wait for them:
#     converted ones are copied to pinned host memory and back intact, the
#     application's own are prefetched (the fake's trace shows both);
#   - after PREPARE_SWAP the pinned copies are made in the background
#     (pinning at FAKE_CUDA_PIN_GBPS), so the swap-out only copies, intact;
#     a process exits cleanly while a copy is being made.
# usage: oversub.sh LIBNVSHARE FAKE_LIB_DIR OVERSUB_TEST MEMORY_TEST
set -euo pipefail
LIB=$1 FAKE=$2 TEST=$3 MEMTEST=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/sock" "$dir/trace"
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

check "oversub on: managed, quota unchanged" \
    run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_GPU_MEMORY_LIMIT=64Mi "$TEST" convert 1 $QUOTA
grep -q "converted=[1-9]" "$dir/out" || fail "no conversion counted"
check "oversub off: device memory" \
    run NVSHARE_ENABLE_OVERSUB=0 NVSHARE_GPU_MEMORY_LIMIT=64Mi "$TEST" convert 0 $QUOTA
check "oversub unset: device memory" \
    run NVSHARE_GPU_MEMORY_LIMIT=64Mi "$TEST" convert 0 $QUOTA
check "no concurrent managed access: device memory" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_CONCURRENT_MANAGED=0 \
    NVSHARE_GPU_MEMORY_LIMIT=64Mi "$TEST" convert 0 $QUOTA
warned=$(grep -c "no concurrent managed access" "$dir/err" || true)
[ "$warned" = 1 ] || fail "$warned warnings about concurrent managed access, want 1"

# Managed memory may exceed the device (32 MiB here); device memory not.
check "48 MiB on a 32 MiB device, oversub on" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_MEM_MB=32 "$TEST" beyond $((48 << 20)) 1
check "48 MiB on a 32 MiB device, oversub off" \
    run NVSHARE_ENABLE_OVERSUB=0 FAKE_CUDA_MEM_MB=32 "$TEST" beyond $((48 << 20)) 0

# Every allocation path keeps its quota behaviour with oversub on.
run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_GPU_MEMORY_LIMIT=64Mi FAKE_CUDA_MEM_MB=1024 \
    "$MEMTEST" paths $QUOTA >"$dir/out" 2>"$dir/err" || fail "memory_test paths with oversub on"
echo "ok: memory_test paths with oversub on: $(grep -c PASS "$dir/out") PASS lines"

check "swap out / in" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_SWAP_GBPS=1 FAKE_CUDA_COPY_GBPS=1 \
    FAKE_CUDA_TRACE_DIR="$dir/trace" "$TEST" swap
trace=$(cat "$dir"/trace/trace.*)
grep -q "^copy_dtoh [0-9]* [0-9]* 16777216$" <<<"$trace" || fail "no copy to the host in the trace"
grep -q "^discard [0-9]* [0-9]* [0-9]*$" <<<"$trace" || fail "no discard in the trace"
grep -q "^discard_prefetch_device [0-9]* [0-9]* [0-9]*$" <<<"$trace" || fail "no device pages made in the trace"
grep -q "^copy_htod [0-9]* [0-9]* 16777216$" <<<"$trace" || fail "no copy to the device in the trace"
grep -q "^prefetch_host [0-9]* [0-9]* 8388608$" <<<"$trace" || fail "no prefetch of the application's managed memory to the host"
grep -q "^prefetch_device [0-9]* [0-9]* 8388608$" <<<"$trace" || fail "no prefetch of the application's managed memory to the device"
! grep -q "^prefetch_host [0-9]* [0-9]* 16777216$" <<<"$trace" || fail "converted memory was prefetched, not copied"
! grep -q " 3145728$" <<<"$trace" || fail "the pool allocation was moved"
echo "PASS: $(grep -c '^copy_dtoh' <<<"$trace") copies to the host," \
    "$(grep -c '^copy_htod' <<<"$trace") to the device," \
    "$(grep -c '^prefetch_host' <<<"$trace") prefetches to the host"

check "prepared swap-out pins nothing" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS=0.2 "$TEST" prepare
grep -q "unpinned=0" "$dir/out" || fail "the prepared swap-out found an allocation without its copy"
check "a swap-out behind the preparer prefetches, and the next copies" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS=0.2 "$TEST" prepare-behind
check "a swap-out as the process exits" \
    run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_FAIL_CLOSED=0 "$TEST" swap-at-exit
! grep -q "swap out.*failed" "$dir/err" || fail "a swap-out during the exit warned: $(cat "$dir/err")"
check "blank allocations are discarded, not copied" \
    run NVSHARE_ENABLE_OVERSUB=1 NVSHARE_FAIL_CLOSED=1 "$TEST" blank
check "exit while preparing" \
    run NVSHARE_ENABLE_OVERSUB=1 FAKE_CUDA_PIN_GBPS=0.5 "$TEST" prepare-exit
