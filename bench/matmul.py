"""matmul.py - PyTorch bf16 matmul throughput, for native vs libnvshare.

    python3 matmul.py SECONDS [N]
    python3 matmul.py --window FROM_NS UNTIL_NS [N]

Prints tflops=<achieved> and rate=<matmuls per second>. The first form runs
for SECONDS after warm-up; the second runs until UNTIL_NS and counts only
matmuls that complete between FROM_NS and UNTIL_NS (CLOCK_REALTIME), so that
jobs started one after another are measured over the same window.

MATMUL_MODE=compile runs a torch.compile'd (Triton) step instead of the plain
matmul, MATMUL_MODE=graph replays the four matmuls of a step as one CUDA
graph. STEADY_FROM_NS: also print steady=<matmuls per second> from then on.

KERNEL_TRACE=FILE: also trace the job's kernels through CUPTI
(torch.profiler) and write each one's "START_NS END_NS" to FILE, as the
GPU timed them, in CLOCK_REALTIME (bench/kernel_trace.py reads it).

WINDOW_FROM moves the window (and STEADY_FROM_NS with it) to begin later
than FROM_NS, and prints its start as from_ns=:
  first_submission  just before the job's first kernel, once CUDA's context
                    exists (PyTorch's import and CUDA start-up excluded);
  first_step        at the first measured step, after the warm-up and any
                    compilation.
Either way it prints the start-up's phases in seconds after FROM_NS:
imported= (torch imported), context= (context created and the operands
allocated, no kernel yet), first_step=.
"""
import os
import sys
import time

import torch

imported_ns = time.time_ns()

if len(sys.argv) > 3 and sys.argv[1] == "--window":
    start_ns, until_ns = int(sys.argv[2]), int(sys.argv[3])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 8192
else:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
    start_ns = None
# Allocations create the context and submit nothing; normal_ is the first
# kernel.
a = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
context_ns = time.time_ns()
a.normal_()
b.normal_()
trace_path = os.environ.get("KERNEL_TRACE", "")
if trace_path:
    # Started before any step (and torch.compile's compilation), so that its
    # own start-up falls outside the window.
    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CUDA])
    trace_started_ns = time.time_ns()
    profiler.start()
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
first_step_ns = time.time_ns()
steady_ns = int(os.environ.get("STEADY_FROM_NS", "0"))
steady_done = 0
process_ns = start_ns
if start_ns is None:
    process_ns = start_ns = first_step_ns
    until_ns = start_ns + int(seconds * 1e9)
else:
    moved = {"first_submission": context_ns, "first_step": first_step_ns}
    window_from = os.environ.get("WINDOW_FROM", "")
    if window_from and window_from not in moved:
        sys.exit(f"WINDOW_FROM={window_from}: want first_submission or first_step")
    if window_from:
        shift = moved[window_from] - start_ns
        start_ns, until_ns = start_ns + shift, until_ns + shift
        steady_ns = steady_ns + shift if steady_ns else 0
done = 0.0
matmuls_per_step = 4 if mode == "graph" else 1
# Steps go in groups of GROUP launched back to back before one sync
# (MATMUL_GROUP, default 4). A group that straddles an edge of a window
# counts in proportion to its time inside: a group held to 10 % of the GPU
# takes ten times as long, and counting it whole or not at all would move
# a share by up to a group. The job's share of GPU time is not measured
# here: CUDA events count the gaps that libnvshare's gate leaves in a queue
# (bench/gpu_busy.py reads the GPU's own record instead). RUN_PAST_NS: go
# on that long past UNTIL_NS, uncounted, so that such a record sees the
# same load up to the window's end.
GROUP = int(os.environ.get("MATMUL_GROUP", "4"))
run_until_ns = until_ns + int(os.environ.get("RUN_PAST_NS", "0"))


def inside(began, finished, lo, hi):
    """The part of a group that ran from began to finished inside lo..hi."""
    overlap = min(finished, hi) - max(began, lo)
    return GROUP * matmuls_per_step * overlap / (finished - began) if overlap > 0 else 0


began = time.time_ns()
while began < run_until_ns:
    for _ in range(GROUP):
        step(a, b)
    torch.cuda.synchronize()
    finished = time.time_ns()
    done += inside(began, finished, start_ns, until_ns)
    if steady_ns:
        steady_done += inside(began, finished, steady_ns, until_ns)
    began = finished


def traced_kernels():
    """This job's kernels as sorted (start_ns, end_ns), in CLOCK_REALTIME."""
    profiler.stop()
    kernels = sorted((e.start_ns(), e.end_ns())
                     for e in profiler.profiler.kineto_results.events()
                     if e.device_type() == torch.autograd.DeviceType.CUDA and
                     not e.name().startswith(("Memcpy", "Memset")))
    # Kineto's timestamps are CLOCK_REALTIME here (PyTorch 2.11); a version
    # on another clock must not pass for one.
    if kernels and not 0 <= kernels[0][0] - trace_started_ns < 60e9:
        sys.exit(f"KERNEL_TRACE: the first kernel is {(kernels[0][0] - trace_started_ns) / 1e9:.0f} s "
                 "from the profiler's start: its clock is not CLOCK_REALTIME")
    return kernels


if trace_path:
    with open(trace_path, "w") as f:
        f.writelines(f"{lo} {hi}\n" for lo, hi in traced_kernels())
elapsed = (until_ns - start_ns) / 1e9
steady = (f" steady={steady_done * 1e9 / (until_ns - steady_ns):.3f}"
          if steady_ns and steady_ns < until_ns else "")
phases = " ".join(f"{name}={(at - process_ns) / 1e9:.3f}" for name, at in
                  (("imported", imported_ns), ("context", context_ns),
                   ("first_step", first_step_ns)))
print(f"tflops={2 * n**3 * done / elapsed / 1e12:.2f} rate={done / elapsed:.3f} "
      f"matmuls={done:.1f} seconds={elapsed:.3f} from_ns={start_ns}{steady} {phases}")
