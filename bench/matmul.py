"""matmul.py - PyTorch bf16 matmul throughput, for native vs libnvshare.

    python3 matmul.py SECONDS [N]
    python3 matmul.py --window FROM_NS UNTIL_NS [N]

Prints tflops=<achieved> and rate=<matmuls per second>. The first form runs
for SECONDS after warm-up; the second runs until UNTIL_NS and counts only
matmuls that complete between FROM_NS and UNTIL_NS (CLOCK_REALTIME), so that
jobs started one after another are measured over the same window.
"""
import sys
import time

import torch

if len(sys.argv) > 3 and sys.argv[1] == "--window":
    start_ns, until_ns = int(sys.argv[2]), int(sys.argv[3])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 8192
else:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
    start_ns = None
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
if start_ns is None:
    start_ns = time.time_ns()
    until_ns = start_ns + int(seconds * 1e9)
done = 0
while time.time_ns() < until_ns:
    for _ in range(4):
        c = a @ b
    torch.cuda.synchronize()
    finished = time.time_ns()
    if start_ns <= finished <= until_ns:
        done += 4
elapsed = (until_ns - start_ns) / 1e9
print(f"tflops={2 * n**3 * done / elapsed / 1e12:.2f} rate={done / elapsed:.3f} "
      f"matmuls={done} seconds={elapsed:.3f}")
