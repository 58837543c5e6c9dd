"""matmul.py - PyTorch bf16 matmul throughput, for native vs libnvshare.

    python3 matmul.py SECONDS [N]

Prints tflops=<achieved> after SECONDS of back-to-back N x N matmuls.
"""
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
n = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
done = 0
start = time.perf_counter()
while time.perf_counter() - start < seconds:
    for _ in range(10):
        c = a @ b
    torch.cuda.synchronize()
    done += 10
elapsed = time.perf_counter() - start
print(f"tflops={2 * n**3 * done / elapsed / 1e12:.2f} matmuls={done} seconds={elapsed:.3f}")
