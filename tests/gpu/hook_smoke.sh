#!/usr/bin/env bash
# hook_smoke.sh - libnvshare on a real GPU: each workload must run correctly
# under LD_PRELOAD and have its launches counted as gated (NVSHARE_STATS).
# Needs nvcc and cmake; PyTorch/JAX/CuPy rows run when importable. Then two
# copies of a compute-bound job share the GPU through the scheduler.
# The GPU is lib.sh's gpu_target (CUDA_VISIBLE_DEVICES, else index 0).
# usage: tests/gpu/hook_smoke.sh   (from the repository root)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
gpu_target
gpu_work_dir
gpu_build nvshare nvshare-scheduler
nvcc -O2 -o "$WORK/spin" "$ROOT/tests/gpu/spin.cu" || exit 1
nvcc -O2 --default-stream per-thread -o "$WORK/spin_ptds" "$ROOT/tests/gpu/spin.cu" || exit 1

printf '%-28s %-6s %10s %10s %s\n' workload result launches gated "entry points"
row() { # name command...
    local name=$1; shift
    local err=$WORK/err out=$WORK/out result=FAIL
    NVSHARE_STATS=1 LD_PRELOAD=$LIB "$@" >"$out" 2>"$err" && result=ok
    # Launch-family and graph entry points, summed.
    local calls gated points
    calls=$(awk '/stats: cu(Launch|Graph)/ { c += $(NF-2) } END { print c+0 }' "$err")
    gated=$(awk '/stats: cu(Launch|Graph)/ { g += $NF } END { print g+0 }' "$err")
    points=$(sed -n 's/.*stats: \(cu\(Launch\|Graph\)[A-Za-z_0-9]*\) calls.*/\1/p' "$err" | sort -u | tr '\n' ' ')
    [ "$calls" -gt 0 ] && [ "$calls" = "$gated" ] || result=FAIL
    printf '%-28s %-6s %10s %10s %s\n' "$name" "$result" "$calls" "$gated" "$points"
    [ "$result" = ok ] || tail -n 5 "$err" | sed 's/^/    /'
}
row "cudart legacy stream" "$WORK/spin" 1000
row "cudart per-thread stream" "$WORK/spin_ptds" 1000
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    T='import torch; x=torch.randn(2048,2048,device="cuda")
for _ in range(50): x = torch.tanh(x @ x / 2048)
torch.cuda.synchronize(); print(float(x.sum()))'
    row "torch default allocator" python3 -c "$T"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True row "torch expandable_segments" python3 -c "$T"
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync row "torch cudaMallocAsync" python3 -c "$T"
    row "torch CUDA graph replay" python3 -c 'import torch
x=torch.randn(1024,1024,device="cuda"); s=torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(3): y = x @ x
torch.cuda.current_stream().wait_stream(s); g=torch.cuda.CUDAGraph()
with torch.cuda.graph(g): y = x @ x
for _ in range(20): g.replay()
torch.cuda.synchronize(); print(float(y.sum()))'
    row "torch.compile (Triton)" python3 -c 'import torch
f=torch.compile(lambda a: torch.sin(a) * 2 + 1)
x=torch.randn(1<<20, device="cuda"); print(float(f(x).sum()))'
fi
if python3 -c 'import jax; assert jax.devices("gpu")' 2>/dev/null; then
    row "jax" python3 -c 'import jax.numpy as jnp; x=jnp.ones((2048,2048)); print(float((x@x).sum()))'
fi
if python3 -c 'import cupy' 2>/dev/null; then
    row "cupy" python3 -c 'import cupy as cp; x=cp.ones((2048,2048)); print(float((x@x).sum()))'
fi

# Sharing: N copies of a fixed-work job (bench/fixed_work.cu) under the
# scheduler, measured over the same 8 s after start-up, against a solo run
# of the same length: aggregate throughput and each copy's share of it.
nvcc -O2 -o "$WORK/fixed_work" "$ROOT/bench/fixed_work.cu" || exit 1
val() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2"; }
solo=$("$WORK/fixed_work" 8 | sed -n 's/.*rate=\([0-9.]*\).*/\1/p')
printf '\n%-22s %-6s %10s %s\n' sharing result aggregate "shares (1/N each)"
for run in "2 1s" "3 1s" "2 100ms" "3 100ms"; do
    set -- $run; n=$1; tq=$2
    export NVSHARE_SOCK_DIR=$WORK/sock-$n-$tq
    NVSHARE_TQ=$tq "$BUILD/src/scheduler/nvshare-scheduler" >"$WORK/sched-$n-$tq.log" 2>&1 &
    sched=$!
    for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && break; sleep 0.05; done
    pids=(); result=ok
    from=$(( $(date +%s%N) + 3000000000 )); until=$(( from + 8000000000 ))
    for i in $(seq 1 "$n"); do
        LD_PRELOAD=$LIB "$WORK/fixed_work" --window "$from" "$until" >"$WORK/f$i" 2>"$WORK/f$i.err" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || result=FAIL; done
    kill $sched; wait $sched 2>/dev/null
    rates=$(for i in $(seq 1 "$n"); do val rate "$WORK/f$i"; done)
    echo "$rates" | awk -v solo="$solo" -v n="$n" -v tq="$tq" -v r="$result" '
        { v[NR] = $1; sum += $1 }
        END {
            line = ""
            for (i = 1; i <= NR; i++) line = line sprintf("%.3f ", v[i] / sum)
            if (sum < 0.97 * solo) r = "FAIL"
            printf "%-22s %-6s %9.1f%% %s\n", n " copies, TQ " tq, r, 100 * sum / solo, line
        }'
done
