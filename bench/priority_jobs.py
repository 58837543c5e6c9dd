"""priority_jobs.py - an inference service and a training loop, for
bench/priority.sh.

    python3 priority_jobs.py light|lightg|heavy|train|k10|k30|k100 FROM_NS UNTIL_NS

light, heavy: inference. A 12-layer 4096-wide bf16 MLP answers requests of
64 rows (light, ~0.8 ms on an H100) or INFER_HEAVY_BATCH rows (heavy,
default 16384, 10-20 ms) that arrive open-loop at exponential gaps (mean
INFER_GAP_MS, default 20; a fixed seed, so every run sees the same
arrivals). A request's latency runs from
its arrival to its result on the host, queueing behind the previous one
included. Prints p50_ms, p99_ms, requests and busy (the fraction of the
window its requests were being served). lightg: light, each request one
replay of a CUDA graph of the model (its kernels reach the GPU at once,
not one launch at a time).

train: an 8-layer 4096-wide bf16 MLP, forward + backward + SGD on a batch
of TRAIN_BATCH rows (default 16384, about 20 ms a step on an H100). Prints
steps_per_s, counting the steps that complete in the window.

k10, k30, k100: one bf16 matmul per kernel of about 10, 30 or 100 ms (its
size calibrated in the warm-up), launched back to back with a
synchronization every 4; steps_per_s counts matmuls.

The service warms up, then waits for FROM_NS (CLOCK_REALTIME) to take
requests, as a service warms up before it takes traffic. The batch jobs
(train, k*) run from their start, count the steps that complete between
FROM_NS and UNTIL_NS (steps_per_s), so that jobs started together are
measured over the same window, and also print from_start_per_s, their
steps from process start (before torch is imported) to UNTIL_NS over that
time: what a user's job gets, its first seconds included. late=1 says the
warm-up ended after FROM_NS: the rate of a late job counts from when it
was ready.
"""
import os
import random
import sys
import time

PROCESS_START_NS = time.time_ns()

import torch  # noqa: E402 (the process's start is taken before the import)
import torch.nn as nn

WIDTH = 4096


def mlp(layers):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(WIDTH, WIDTH, bias=False), nn.ReLU()]
    return nn.Sequential(*mods).cuda().to(torch.bfloat16)


def wait_for(from_ns):
    late = time.time_ns() > from_ns
    while time.time_ns() < from_ns:
        time.sleep(min(0.01, max(0, (from_ns - time.time_ns()) / 1e9)))
    return late


def infer(from_ns, until_ns, batch, gap_ms, graphed=False):
    model = mlp(12).eval()
    x = torch.randn(batch, WIDTH, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        for _ in range(10):
            model(x)
        torch.cuda.synchronize()
        if graphed:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(x)
            graph.replay()
            torch.cuda.synchronize()
        late = wait_for(from_ns)
        rng = random.Random(15)
        arrival, latencies, busy = from_ns, [], 0
        while True:
            arrival += int(rng.expovariate(1.0 / gap_ms) * 1e6)
            if arrival >= until_ns:
                break
            while time.time_ns() < arrival:
                time.sleep(max(0, (arrival - time.time_ns()) / 1e9 - 0.0002))
            start = time.time_ns()
            graph.replay() if graphed else model(x)
            torch.cuda.synchronize()
            done = time.time_ns()
            latencies.append((done - arrival) / 1e6)
            busy += done - start
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    print(f"p50_ms={pick(0.50):.3f} p99_ms={pick(0.99):.3f} requests={len(latencies)} "
          f"busy={busy / (until_ns - from_ns):.4f} late={int(late)}")


def train(from_ns, until_ns, batch):
    model = mlp(8)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, WIDTH, device="cuda", dtype=torch.bfloat16)

    def step():
        loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    run_batch_job(from_ns, until_ns, step, 1, "")


def run_batch_job(from_ns, until_ns, step, per_step, extra):
    """Runs step until UNTIL_NS; prints the window's rate and the rate from
    process start (per_step steps a call)."""
    late = time.time_ns() > from_ns
    start = max(from_ns, time.time_ns())  # a late job counts from when it is ready
    steps = all_steps = 0
    while time.time_ns() < until_ns:
        step()
        torch.cuda.synchronize()
        done = time.time_ns()
        if done <= until_ns:
            all_steps += per_step
            steps += per_step if done >= start else 0
    print(f"steps_per_s={steps * 1e9 / (until_ns - start):.2f} "
          f"from_start_per_s={all_steps * 1e9 / (until_ns - PROCESS_START_NS):.2f}"
          f"{extra} late={int(late)}")


def long_kernels(from_ns, until_ns, kernel_ms):
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    a @ a  # cuBLAS's first call sets it up: not a kernel's time
    torch.cuda.synchronize()
    while True:  # grow a square matmul until one takes kernel_ms
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(3):
            a @ a
        torch.cuda.synchronize()
        took_ms = (time.perf_counter() - t) / 3 * 1e3
        if took_ms >= kernel_ms * 0.9:
            break
        n = int(n * min(2.0, max(1.05, (kernel_ms / took_ms) ** (1 / 3))) / 256) * 256

    def four():
        for _ in range(4):
            a @ a

    run_batch_job(from_ns, until_ns, four, 4, f" n={n} kernel_ms={took_ms:.1f}")


if __name__ == "__main__":
    kind, from_ns, until_ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    gap_ms = float(os.environ.get("INFER_GAP_MS", "20"))
    if kind in ("light", "lightg"):
        infer(from_ns, until_ns, 64, gap_ms, graphed=kind == "lightg")
    elif kind == "heavy":
        infer(from_ns, until_ns, int(os.environ.get("INFER_HEAVY_BATCH", "16384")), gap_ms)
    elif kind in ("k10", "k30", "k100"):
        long_kernels(from_ns, until_ns, int(kind[1:]))
    elif kind == "train":
        train(from_ns, until_ns, int(os.environ.get("TRAIN_BATCH", "16384")))
    else:
        sys.exit(f"unknown job {kind}: light, lightg, heavy, train, k10, k30 or k100")
