#!/usr/bin/env bash
# bench/run.sh - interposer and time-slicing benchmarks on a real GPU.
#
#   bench/run.sh [BUILD_DIR]
#
# Every number is a ratio against native measured in this same run:
#  1. empty-kernel launch cost, libnvshare (lock held) vs native, alternated
#     5 times, medians compared;
#  1b. cudaMalloc + cudaFree of 64 MiB under a 4Gi quota vs native, with
#     the scheduler arbitrating the pod's quota;
#  2. PyTorch bf16 matmul throughput alone, libnvshare vs native (skipped
#     without torch);
#  3. 2, 4 and 8 tenants of a fixed-work job at TQ 100 ms for 10 s: aggregate
#     vs a solo run, each tenant's share vs 1/N, and the preemption latency
#     (DROP_LOCK sent to LOCK_RELEASED received) from the scheduler's log.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$TOP/build}
OUT=${OUT:-$TOP/.bench}
mkdir -p "$OUT"
BIN=$OUT/bin; mkdir -p "$BIN"
LIB=$BUILD/src/hook/libnvshare.so
export NVSHARE_SOCK_DIR=$OUT/sock
export NVSHARE_STATE_FILE= # no settings left behind for the next run
NVCC=${NVCC:-nvcc}

[ -f "$LIB" ] || { echo "bench: build first ($LIB missing)"; exit 1; }
for prog in launch_overhead fixed_work alloc_free; do
    "$NVCC" -O2 -o "$BIN/$prog" "$TOP/bench/$prog.cu"
done

start_scheduler() {
    rm -rf "$NVSHARE_SOCK_DIR"
    env NVSHARE_DEBUG=1 "$@" "$BUILD/src/scheduler/nvshare-scheduler" >"$OUT/sched.log" 2>&1 &
    SCHED=$!
    for _ in $(seq 200); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && return; sleep 0.05; done
    echo "bench: scheduler did not start"; exit 1
}
stop_scheduler() { kill "$SCHED" 2>/dev/null; wait "$SCHED" 2>/dev/null || true; }
trap 'stop_scheduler 2>/dev/null || true' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
val() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p"; }

echo "== device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
start_scheduler NVSHARE_TQ=30s

echo "== 1. empty-kernel launch (us per launch, 100000 launches, 15 alternations)"
# Pinned to one core: the VM's scheduling noise is larger than the effect.
for i in $(seq 1 15); do
    taskset -c 3 "$BIN/launch_overhead" 100000 >>"$OUT/native.txt"
    LD_PRELOAD=$LIB taskset -c 3 "$BIN/launch_overhead" 100000 >>"$OUT/hooked.txt"
done
for metric in launch_us call_us; do
    n=$(val $metric <"$OUT/native.txt" | median); h=$(val $metric <"$OUT/hooked.txt" | median)
    awk -v m="$metric" -v n="$n" -v h="$h" 'BEGIN { printf "%s: native %.3f us, libnvshare %.3f us, ratio %.4f (%+.2f %%)\n", m, n, h, h / n, 100 * (h / n - 1) }' | tee -a "$OUT/summary.txt"
done

echo "== 1b. cudaMalloc + cudaFree of 64 MiB (us per pair, 11 alternations; libnvshare with a 4Gi quota)"
for i in $(seq 1 11); do
    taskset -c 3 "$BIN/alloc_free" 64 2000 >>"$OUT/alloc_native.txt"
    NVSHARE_GPU_MEMORY_LIMIT=4Gi LD_PRELOAD=$LIB taskset -c 3 "$BIN/alloc_free" 64 2000 >>"$OUT/alloc_hooked.txt"
done
n=$(val pair_us <"$OUT/alloc_native.txt" | median); h=$(val pair_us <"$OUT/alloc_hooked.txt" | median)
awk -v n="$n" -v h="$h" 'BEGIN { printf "alloc_free 64MiB: native %.2f us, libnvshare+quota %.2f us, ratio %.4f (%+.2f %%)\n", n, h, h / n, 100 * (h / n - 1) }' | tee -a "$OUT/summary.txt"

echo "== 2. PyTorch bf16 matmul alone"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    : >"$OUT/mm_native.txt"; : >"$OUT/mm_hooked.txt"
    for i in 1 2 3; do
        python3 "$TOP/bench/matmul.py" 4 | val tflops >>"$OUT/mm_native.txt"
        LD_PRELOAD=$LIB python3 "$TOP/bench/matmul.py" 4 | val tflops >>"$OUT/mm_hooked.txt"
    done
    n=$(median <"$OUT/mm_native.txt"); h=$(median <"$OUT/mm_hooked.txt")
    awk -v n="$n" -v h="$h" 'BEGIN { printf "matmul: native %.1f TFLOPS, libnvshare %.1f TFLOPS, ratio %.4f\n", n, h, h / n }' | tee -a "$OUT/summary.txt"
    # Training loop with the caching allocator, libnvshare with an 8 GiB
    # quota arbitrated by the scheduler (running since section 1).
    for i in 1 2 3; do
        python3 "$TOP/bench/train_loop.py" 5 | val steps_per_s >>"$OUT/train_native.txt"
        NVSHARE_POD_NAME=train NVSHARE_GPU_MEMORY_LIMIT=8Gi LD_PRELOAD=$LIB \
            python3 "$TOP/bench/train_loop.py" 5 | val steps_per_s >>"$OUT/train_hooked.txt"
    done
    n=$(median <"$OUT/train_native.txt"); h=$(median <"$OUT/train_hooked.txt")
    awk -v n="$n" -v h="$h" 'BEGIN { printf "training loop: native %.1f steps/s, libnvshare+8Gi quota %.1f steps/s, ratio %.4f\n", n, h, h / n }' | tee -a "$OUT/summary.txt"
else
    echo "matmul: SKIPPED (no torch with CUDA)" | tee -a "$OUT/summary.txt"
fi
stop_scheduler

echo "== 3. tenants of a fixed-work job, TQ 100ms, measured over the same 10 s"
solo=$("$BIN/fixed_work" 10 | val rate)
echo "solo: $solo kernels/s" | tee -a "$OUT/summary.txt"
for n in 2 4 8; do
    start_scheduler NVSHARE_TQ=100ms
    pids=()
    from=$(( $(date +%s%N) + 3000000000 )); until=$(( from + 10000000000 ))
    for i in $(seq 1 "$n"); do
        LD_PRELOAD=$LIB "$BIN/fixed_work" --window "$from" "$until" >"$OUT/t$n.$i.out" 2>"$OUT/t$n.$i.err" & pids+=($!)
    done
    wait "${pids[@]}"
    stop_scheduler
    rates=$(for i in $(seq 1 "$n"); do val rate <"$OUT/t$n.$i.out"; done)
    grep -o 'preempt [0-9.]* ms' "$OUT/sched.log" | awk '{ print $2 }' >"$OUT/preempt$n.txt" || true
    p50=$(median <"$OUT/preempt$n.txt")
    p99=$(sort -g "$OUT/preempt$n.txt" | awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; print v[i] }')
    echo "$rates" | awk -v solo="$solo" -v n="$n" -v p50="$p50" -v p99="$p99" -v cnt="$(wc -l <"$OUT/preempt$n.txt")" '
        { r[NR] = $1; sum += $1 }
        END {
            worst = 0
            for (i = 1; i <= NR; i++) { d = (r[i] / sum) * n - 1; if (d < 0) d = -d; if (d > worst) worst = d }
            printf "tenants %d: aggregate %.4f of solo, worst share deviation %.2f %% of 1/N, preemptions %d (median %.2f ms, p99 %.2f ms)\n",
                   n, sum / solo, 100 * worst, cnt, p50, p99
        }' | tee -a "$OUT/summary.txt"
done
echo; echo "== summary"; cat "$OUT/summary.txt"
