"""vmm_swap.py - one process's swap out and back on a real GPU, through
libnvshare's test entries (nvshare_hook_swap_out/in, called as the client
does on EVICT and LOCK_OK), with PyTorch's allocator named by ALLOCATOR.

Prints key=value lines: what was allocated, what the hook counts as
evictable, device memory used (NVML, this process) before / while out /
after, the swap rates, whether every tensor is bit-identical at the same
address. Exit 1 on a wrong tensor or a moved address."""
import ctypes
import os
import subprocess
import sys
import time

import torch

GIB = 1 << 30


def used_by_me():
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory",
         "--format=csv,noheader,nounits"],
        capture_output=True, text=True).stdout
    for line in out.splitlines():
        pid, mib = [f.strip() for f in line.split(",")]
        if int(pid) == os.getpid():
            return int(mib)
    return 0


def pinned_gbps():
    """The machine's pinned host-device copy rate, both ways, best of 3."""
    host = torch.empty(GIB, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(GIB, dtype=torch.uint8, device="cuda")
    rates = []
    for copy in (lambda: dev.copy_(host, non_blocking=True),
                 lambda: host.copy_(dev, non_blocking=True)):
        best = 0.0
        for _ in range(3):
            torch.cuda.synchronize()
            t = time.monotonic()
            copy()
            torch.cuda.synchronize()
            best = max(best, GIB / (time.monotonic() - t) / 1e9)
        rates.append(best)
    del host, dev
    torch.cuda.empty_cache()
    return rates


def main():
    gib = float(os.environ.get("SWAP_GIB", "8"))
    hook = ctypes.CDLL(None)
    hook.nvshare_hook_swap_out.restype = ctypes.c_uint64
    hook.nvshare_hook_swap_in.restype = ctypes.c_uint64
    hook.nvshare_hook_managed_bytes.restype = ctypes.c_uint64
    htod, dtoh = pinned_gbps()
    print(f"pinned_htod_gbps={htod:.1f} pinned_dtoh_gbps={dtoh:.1f}")
    torch.manual_seed(1)
    # Tensors of 256 MiB and a few small ones, as a model's would be.
    n_big = max(1, int(gib * 4))
    tensors = [torch.randn(64 << 20, device="cuda") for _ in range(n_big)]
    tensors += [torch.randn(1000 + i, device="cuda") for i in range(50)]
    torch.cuda.synchronize()
    sums = [t.double().sum().item() for t in tensors]
    copies = [t.cpu() for t in tensors[:4]]
    ptrs = [t.data_ptr() for t in tensors]
    allocated = torch.cuda.memory_reserved()
    evictable = hook.nvshare_hook_managed_bytes(0)
    before = used_by_me()
    t0 = time.monotonic()
    out_bytes = hook.nvshare_hook_swap_out(0)
    t1 = time.monotonic()
    during = used_by_me()
    t2 = time.monotonic()
    in_bytes = hook.nvshare_hook_swap_in(0)
    t3 = time.monotonic()
    after = used_by_me()
    # A second round: the host copies the first one left are written again.
    t4 = time.monotonic()
    out2 = hook.nvshare_hook_swap_out(0)
    t5 = time.monotonic()
    in2 = hook.nvshare_hook_swap_in(0)
    t6 = time.monotonic()
    print(f"second_swap_out_gbps={out2 / max(t5 - t4, 1e-9) / 1e9:.1f} "
          f"second_swap_in_gbps={in2 / max(t6 - t5, 1e-9) / 1e9:.1f}")
    ok = all(t.data_ptr() == p for t, p in zip(tensors, ptrs))
    print(f"addresses_unchanged={int(ok)}")
    same = all(t.double().sum().item() == s for t, s in zip(tensors, sums))
    same = same and all(torch.equal(t.cpu(), c) for t, c in zip(tensors, copies))
    print(f"bit_identical={int(same)}")
    print(f"allocator={os.environ.get('PYTORCH_CUDA_ALLOC_CONF', 'default')}")
    print(f"reserved_gib={allocated / GIB:.2f} evictable_gib={evictable / GIB:.2f} "
          f"evictable_fraction={evictable / max(allocated, 1):.3f}")
    print(f"nvml_mib_before={before} nvml_mib_out={during} nvml_mib_after={after}")
    print(f"swap_out_gib={out_bytes / GIB:.2f} swap_out_s={t1 - t0:.3f} "
          f"swap_out_gbps={out_bytes / max(t1 - t0, 1e-9) / 1e9:.1f}")
    print(f"swap_in_gib={in_bytes / GIB:.2f} swap_in_s={t3 - t2:.3f} "
          f"swap_in_gbps={in_bytes / max(t3 - t2, 1e-9) / 1e9:.1f}")
    # Kernels still run on the memory after it came back.
    c = tensors[0][: 1 << 20] * 2
    torch.cuda.synchronize()
    print(f"kernel_after_swap_in={int(torch.equal(c, copies[0][: 1 << 20].cuda() * 2))}")
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
