#!/usr/bin/env bash
# memory_quota.sh - the GPU memory quota on a real GPU, first without a
# scheduler (NVSHARE_GPU_MEMORY_LIMIT=4Gi, enforced per process), then with
# one: two PyTorch processes of one pod share the pod's 4 GiB. For each workload:
# 3 GiB allocate, 2 GiB more raise the framework's own OOM error, and the
# memory the application reads (cudaMemGetInfo, torch.cuda.mem_get_info,
# nvidia-smi, JAX's pool, CuPy) is the 4 GiB quota. Rows for PyTorch, JAX
# and CuPy run when importable (else SKIP). No managed memory is used.
# The GPU is lib.sh's gpu_target (CUDA_VISIBLE_DEVICES, else index 0);
# the host's other GPUs may be busy.
# usage: tests/gpu/memory_quota.sh   (from the repository root)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
gpu_target
gpu_work_dir
gpu_build nvshare nvshare-scheduler nvsharectl
export NVSHARE_GPU_MEMORY_LIMIT=4Gi
export NVSHARE_SOCK_DIR=$WORK # no scheduler: the static limit applies

cat >"$WORK/cudart.cu" <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
int main() {
    void *a, *b; size_t f, t;
    if (cudaMalloc(&a, 3ull << 30) != cudaSuccess) { puts("3 GiB refused"); return 1; }
    cudaError_t e = cudaMalloc(&b, 2ull << 30);
    cudaMemGetInfo(&f, &t);
    printf("2 GiB more: %s; total %zu free %zu\n", cudaGetErrorName(e), t, f);
    return e == cudaErrorMemoryAllocation && t == (4ull << 30) && f <= (1ull << 30) ? 0 : 1;
}
CU
nvcc -O2 -o "$WORK/cudart" "$WORK/cudart.cu" || exit 1

cat >"$WORK/torch_check.py" <<'PY'
import torch
x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
free, total = torch.cuda.mem_get_info()
assert total == 4 << 30, f"mem_get_info total {total}"
try:
    y = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    raise SystemExit("2 GiB more were allocated")
except torch.cuda.OutOfMemoryError:
    pass
print(f"OutOfMemoryError; mem_get_info total {total} free {free}")
PY

cat >"$WORK/jax_check.py" <<'PY'
import jax, jax.numpy as jnp
stats = jax.devices()[0].memory_stats() or {}
limit = stats.get("bytes_limit", 0)
assert 0 < limit <= 4 << 30, f"pool bytes_limit {limit} exceeds the quota"
x = jnp.ones((3 << 30) // 4 // 2, dtype=jnp.float32).block_until_ready()  # 1.5 GiB
try:
    y = jnp.ones((5 << 30) // 4, dtype=jnp.float32).block_until_ready()
    raise SystemExit("5 GiB were allocated")
except Exception as e:  # XlaRuntimeError / JaxRuntimeError
    assert "RESOURCE_EXHAUSTED" in str(e), str(e)[:200]
print(f"RESOURCE_EXHAUSTED; pool bytes_limit {limit}")
PY

cat >"$WORK/cupy_check.py" <<'PY'
import cupy as cp
free, total = cp.cuda.runtime.memGetInfo()
assert total == 4 << 30, f"memGetInfo total {total}"
x = cp.empty(3 << 30, dtype=cp.uint8)
try:
    y = cp.empty(2 << 30, dtype=cp.uint8)
    raise SystemExit("2 GiB more were allocated")
except cp.cuda.memory.OutOfMemoryError:
    pass
print(f"OutOfMemoryError; memGetInfo total {total}")
PY

failed=0
printf '%-34s %-6s %s\n' workload result detail
row() { # name command...
    local name=$1; shift
    local out=$WORK/out result=FAIL
    LD_PRELOAD=$LIB "$@" >"$out" 2>&1 && result=ok
    [ "$result" = ok ] || failed=1
    printf '%-34s %-6s %s\n' "$name" "$result" "$(grep -v '^nvshare\[' "$out" | tail -n 1)"
}
skip() { printf '%-34s %-6s %s\n' "$1" SKIP "$2"; }

row "cudart cudaMalloc" "$WORK/cudart"
# NVML's view of the GPU under test: the hook answers for its process's
# CUDA GPUs (CUDA_VISIBLE_DEVICES=$GPU_UUID), matched by UUID.
smi=$(LD_PRELOAD=$LIB nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i "$GPU_UUID" 2>/dev/null)
if [ "$smi" = 4096 ]; then r=ok; else r=FAIL; failed=1; fi
printf '%-34s %-6s %s\n' "nvidia-smi memory.total" "$r" "${smi:-none} MiB (want 4096)"

if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    row "torch default allocator" python3 "$WORK/torch_check.py"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
        row "torch expandable_segments" python3 "$WORK/torch_check.py"
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
        row "torch cudaMallocAsync" python3 "$WORK/torch_check.py"
else
    skip "torch" "not importable or no GPU"
fi
if python3 -c 'import jax; assert jax.devices()[0].platform == "gpu"' 2>/dev/null; then
    row "jax (preallocate default)" python3 "$WORK/jax_check.py"
else
    skip "jax" "not importable or no GPU"
fi
if python3 -c 'import cupy; cupy.cuda.runtime.getDeviceCount()' 2>/dev/null; then
    row "cupy" python3 "$WORK/cupy_check.py"
else
    skip "cupy" "not importable or no GPU"
fi
# Two processes of one pod under the scheduler: the first holds 3 GiB, the
# second gets 0.5 GiB but not 2 GiB, and sees the pod's usage.
cat >"$WORK/torch_pod.py" <<'PY'
import sys, time, torch
role = sys.argv[1]
if role == "holder":
    x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    open(sys.argv[2], "w").write("held")
    time.sleep(30)
else:
    y = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    try:
        z = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        raise SystemExit("2 GiB granted beyond the pod's quota")
    except torch.cuda.OutOfMemoryError:
        pass
    free, total = torch.cuda.mem_get_info()
    assert total == 4 << 30, f"total {total}"
    assert free <= (512 << 20) + (64 << 20), f"free {free}: the pod's other process is not counted"
    print(f"second process: 0.5 GiB ok, 2 GiB OutOfMemoryError, mem_get_info free {free >> 20} MiB of {total >> 20}")
PY
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    export NVSHARE_SOCK_DIR=$WORK/sock
    "$BUILD/src/scheduler/nvshare-scheduler" >"$WORK/sched.log" 2>&1 & sched=$!
    for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && break; sleep 0.05; done
    export NVSHARE_POD_NAMESPACE=gpu-test NVSHARE_POD_NAME=trainer
    LD_PRELOAD=$LIB python3 "$WORK/torch_pod.py" holder "$WORK/held" >/dev/null 2>&1 & holder=$!
    for _ in $(seq 600); do [ -f "$WORK/held" ] && break; sleep 0.05; done
    row "torch, 2 processes of one pod" python3 "$WORK/torch_pod.py" second
    "$BUILD/src/ctl/nvsharectl" status | sed -n '/POD MEM/,$p' | sed 's/^/    /'
    kill "$holder" "$sched" 2>/dev/null; wait "$holder" "$sched" 2>/dev/null
else
    skip "torch, 2 processes of one pod" "not importable or no GPU"
fi
exit $failed
