#!/usr/bin/env bash
# The memory quota without a scheduler (NVSHARE_GPU_MEMORY_LIMIT, per
# process), on the fake driver and the fake NVML:
#   - memory_test paths: every allocation path refused over the quota with
#     CUDA_ERROR_OUT_OF_MEMORY, exact at it, freed back; every memory query
#     reports the quota;
#   - each refusal logged on one line that names the limit;
#   - a forked child, and a second process holding its whole quota at the
#     same time, each have their own quota;
#   - NVSHARE_GPU_MEMORY_LIMIT=0 is refused with a warning (no limit).
# usage: memory_quota.sh LIBNVSHARE FAKE_LIB_DIR MEMORY_TEST
set -euo pipefail
LIB=$1 FAKE=$2 TEST=$3
QUOTA=$((64 << 20))
dir=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null || true; rm -rf "$dir"' EXIT
run() {
    NVSHARE_SOCK_DIR=$dir LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB \
        NVSHARE_GPU_MEMORY_LIMIT=64Mi FAKE_CUDA_MEM_MB=1024 "$TEST" "$@"
}

# A second process holds its whole quota throughout.
mkfifo "$dir/hold.in"
run hold "$QUOTA" <"$dir/hold.in" >"$dir/hold.out" 2>"$dir/hold.err" &
holder=$!
exec 3>"$dir/hold.in"
for _ in $(seq 100); do grep -q held "$dir/hold.out" && break; sleep 0.02; done
grep -q held "$dir/hold.out" || { cat "$dir/hold.err"; echo "FAIL: holder"; exit 1; }

status=0
run paths "$QUOTA" >"$dir/out" 2>"$dir/err" || status=1
cat "$dir/out"
run fork "$QUOTA" >"$dir/fork.out" 2>"$dir/fork.err" || status=1
cat "$dir/fork.out"
exec 3>&-
wait "$holder" || { cat "$dir/hold.err"; echo "FAIL: holder"; status=1; }
[ $status = 0 ] || { cat "$dir/err" "$dir/fork.err"; echo "FAIL"; exit 1; }

# The wording is the client's; what matters is one line per refusal, naming
# the limit and the error the application gets.
refusals=$(grep -c "CUDA_ERROR_OUT_OF_MEMORY" "$dir/err" || true)
named=$(grep "CUDA_ERROR_OUT_OF_MEMORY" "$dir/err" | grep -c "limit 64.00 MiB" || true)
[ "$refusals" -gt 0 ] && [ "$refusals" = "$named" ] ||
    { cat "$dir/err"; echo "FAIL: $refusals refusal lines, $named name the limit"; exit 1; }
echo "PASS: $refusals refusal lines, e.g. $(grep -m1 "CUDA_ERROR_OUT_OF_MEMORY" "$dir/err")"

NVSHARE_SOCK_DIR=$dir LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LIB NVSHARE_GPU_MEMORY_LIMIT=0 \
    FAKE_CUDA_MEM_MB=1024 "$TEST" hold $((128 << 20)) </dev/null >"$dir/zero.out" 2>"$dir/zero.err" ||
    { cat "$dir/zero.err"; echo "FAIL: NVSHARE_GPU_MEMORY_LIMIT=0"; exit 1; }
grep -q "held" "$dir/zero.out" && grep -q "ignoring NVSHARE_GPU_MEMORY_LIMIT=0" "$dir/zero.err" ||
    { cat "$dir/zero.err"; echo "FAIL: NVSHARE_GPU_MEMORY_LIMIT=0 was not refused with a warning"; exit 1; }
echo "PASS: $(grep -m1 "ignoring NVSHARE_GPU_MEMORY_LIMIT=0" "$dir/zero.err")"
