"""matmul.py - PyTorch bf16 matmul throughput, for native vs libnvshare.

    python3 matmul.py SECONDS [N]
    python3 matmul.py --window FROM_NS UNTIL_NS [N]

Prints tflops=<achieved> and rate=<matmuls per second>. The first form runs
for SECONDS after warm-up; the second runs until UNTIL_NS and counts only
matmuls that complete between FROM_NS and UNTIL_NS (CLOCK_REALTIME), so that
jobs started one after another are measured over the same window.

MATMUL_MODE=compile runs a torch.compile'd (Triton) step instead of the plain
matmul, MATMUL_MODE=graph replays the four matmuls of a step as one CUDA
graph. STEADY_FROM_NS: also print steady=<steps per second> from then on.
busy= and steady_busy= are the fractions of those windows in which the GPU
ran this job's steps (CUDA events).
"""
import os
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
mode = os.environ.get("MATMUL_MODE", "eager")
if mode == "compile":
    # Elementwise work around the matmul, so that Triton kernels run.
    step = torch.compile(lambda x, y: torch.relu(x @ y).sin() * 0.5 + x)
elif mode == "graph":
    graph = torch.cuda.CUDAGraph()
    for _ in range(3):  # warm-up on a side stream, as capture requires
        a @ b
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(4):
            c = a @ b
    step = lambda x, y: graph.replay()
else:
    step = lambda x, y: x @ y
for _ in range(3):
    step(a, b)
torch.cuda.synchronize()
steady_ns = int(os.environ.get("STEADY_FROM_NS", "0"))
steady_done = 0
if start_ns is None:
    start_ns = time.time_ns()
    until_ns = start_ns + int(seconds * 1e9)
done = 0
matmuls_per_step = 4 if mode == "graph" else 1
# GPU time per step, from CUDA events: a compute limit is a share of GPU
# time, and work per GPU second is not constant on a power-capped GPU (a
# bf16 matmul alone runs at ~1.45 GHz, held to 50 % at ~1.8 GHz). Steps go
# in groups of GROUP launched back to back before one sync, so every step
# but a group's first starts when the previous one ends: its event-to-event
# time is its own GPU time, whatever waits (libnvshare's gate, the host)
# came before the group. A window's GPU time = the sum of those times,
# scaled by GROUP / (GROUP - 1) for the groups' first steps. (A median
# times the count was biased: step times vary with the clock in a run.)
GROUP = 4
durations = []  # (finished_ns, ms) of steps that were not first in a group
while time.time_ns() < until_ns:
    events = [torch.cuda.Event(enable_timing=True) for _ in range(GROUP + 1)]
    events[0].record()
    for e in events[1:]:
        step(a, b)
        e.record()
    torch.cuda.synchronize()
    finished = time.time_ns()
    durations += [(finished, events[i].elapsed_time(events[i + 1]))
                  for i in range(1, GROUP)]
    if start_ns <= finished <= until_ns:
        done += GROUP * matmuls_per_step
    if steady_ns and steady_ns <= finished <= until_ns:
        steady_done += GROUP * matmuls_per_step


def busy_ms(since):
    return GROUP / (GROUP - 1) * sum(d for t, d in durations if since <= t <= until_ns)


elapsed = (until_ns - start_ns) / 1e9
steady = (f" steady={steady_done * 1e9 / (until_ns - steady_ns):.3f}"
          f" steady_busy={busy_ms(steady_ns) / ((until_ns - steady_ns) / 1e6):.5f}"
          if steady_ns and steady_ns < until_ns else "")
print(f"tflops={2 * n**3 * done / elapsed / 1e12:.2f} rate={done / elapsed:.3f} "
      f"matmuls={done} seconds={elapsed:.3f} busy={busy_ms(start_ns) / (elapsed * 1e3):.5f}"
      f"{steady}")
