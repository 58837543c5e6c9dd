"""memory_jobs.py - a PyTorch job with a large memory footprint, for
memory-aware scheduling (tests/gpu/memory_aware.sh).

    python3 memory_jobs.py --gib G --steps N [options]

Allocates G GiB of float32 tensors on the GPU in chunks (--chunk-mib), then
runs a fixed amount of work: N steps, each of which touches all of that
memory (an in-place add on every chunk: G GiB read and written) and then
runs --matmuls bf16 matmuls of --matmul-n squared, so that it is
compute-relevant. A fixed number of steps rather than a duration: makespans
are then comparisons of the same work. --host-ms adds host time after each
step (a light job that keeps the GPU partly idle, like one fed by a data
loader); --host-jitter J draws each step's host time uniformly from
host-ms x (1 +- J), as a loader's batches vary, from a generator seeded by
the pid.

Under NVSHARE_ENABLE_OVERSUB=1 libnvshare makes cuMemAlloc managed memory;
PyTorch's caching allocator allocates with cudaMalloc, so every chunk is
evictable.

Timing (CLOCK_REALTIME, comparable with `date +%s%N`):
  --ready-file F  written (with the pid) once the memory is allocated and
                  before any kernel runs;
  --go-file F     after allocating, wait until F exists; it holds the start
                  time in ns (a common start for jobs that run together);
                  without it the start is when allocation finished.
Then initialization (fill every chunk, random matmul operands: the first
kernels, so the first lock request), then the steps. The result is one line:

  memory_jobs pid=P gib=G steps=N elapsed=T wall=W init_s=I step_ms=M
      step_ms_max=X go_ns=.. first_step_ns=.. end_ns=.. check=ok

elapsed: first step to last (seconds); wall: go to the end, init included
(what a makespan adds up); step_ms: median step time (the step time to
calibrate --steps with); step_ms_max: the longest step (one that waited for
the GPU or for a swap). At the end every element must equal the number of
steps (a swap that lost data fails here: exit 1). --trace F writes one line
"start_ns end_ns" per step.

--device cpu runs the same on the CPU (for checking the script without a
GPU; slow: use small --gib).
"""
import argparse
import os
import random
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gib", type=float, required=True,
                   help="GiB of float32 tensors to allocate")
    p.add_argument("--steps", type=int, required=True,
                   help="steps of work (each touches all the memory)")
    p.add_argument("--chunk-mib", type=int, default=1024,
                   help="size of each tensor (default 1024)")
    p.add_argument("--matmul-n", type=int, default=8192,
                   help="matmul size, bf16 (default 8192; 0: none)")
    p.add_argument("--matmuls", type=int, default=24,
                   help="matmuls per step (default 24)")
    p.add_argument("--host-ms", type=float, default=0.0,
                   help="host time after each step, ms (default 0)")
    p.add_argument("--host-jitter", type=float, default=0.0,
                   help="vary the host time by up to this fraction (0-1, default 0)")
    p.add_argument("--ready-file", help="written once the memory is allocated")
    p.add_argument("--go-file", help="wait for it after allocating; holds the start ns")
    p.add_argument("--go-timeout", type=float, default=600.0,
                   help="seconds to wait for --go-file (default 600)")
    p.add_argument("--trace", help="write 'start_ns end_ns' per step here")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    a = p.parse_args()
    if a.gib <= 0 or a.steps <= 0 or a.chunk_mib <= 0 or a.matmuls < 0 or a.matmul_n < 0:
        p.error("--gib, --steps and --chunk-mib must be positive")
    if not 0.0 <= a.host_jitter <= 1.0:
        p.error("--host-jitter is a fraction from 0 to 1")
    return a


def log(msg):
    print(f"memory_jobs[{os.getpid()}] {msg}", file=sys.stderr, flush=True)


def wait_for_go(path, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"memory_jobs: no {path} after {timeout:.0f} s")
        time.sleep(0.01)


def main():
    a = parse_args()
    import torch

    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("memory_jobs: no usable GPU")

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    # Allocation only: torch.empty launches no kernel, so nothing here waits
    # for the scheduler's lock.
    total = int(a.gib * (1 << 30)) // 4 * 4
    chunk = a.chunk_mib << 20
    chunks = []
    left = total
    while left > 0:
        n = min(chunk, left)
        chunks.append(torch.empty(n // 4, dtype=torch.float32, device=dev))
        left -= n
    mm_dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    if a.matmul_n and a.matmuls:
        x = torch.empty(a.matmul_n, a.matmul_n, dtype=mm_dtype, device=dev)
        y = torch.empty(a.matmul_n, a.matmul_n, dtype=mm_dtype, device=dev)
        z = torch.empty(a.matmul_n, a.matmul_n, dtype=mm_dtype, device=dev)
        mm_bytes = 3 * a.matmul_n * a.matmul_n * x.element_size()
    else:
        mm_bytes = 0
    log(f"allocated {total / (1 << 30):.2f} GiB in {len(chunks)} chunks "
        f"+ {mm_bytes / (1 << 20):.0f} MiB of matmul operands")
    if a.ready_file:
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, a.ready_file)
    go_ns = wait_for_go(a.go_file, a.go_timeout) if a.go_file else time.time_ns()

    # Initialization: the first kernels (first touch of managed memory).
    for c in chunks:
        c.zero_()
    if mm_bytes:
        x.normal_()
        y.normal_()
        torch.matmul(x, y, out=z)  # cuBLAS handle and workspace
    sync()

    trace = []
    first_ns = time.time_ns()
    host_s = a.host_ms / 1000.0
    jitter = random.Random(os.getpid())
    for _ in range(a.steps):
        t0 = time.time_ns()
        for c in chunks:
            c.add_(1.0)
        for _ in range(a.matmuls if mm_bytes else 0):
            torch.matmul(x, y, out=z)
        sync()
        trace.append((t0, time.time_ns()))
        if host_s > 0:
            time.sleep(host_s * (1.0 + a.host_jitter * jitter.uniform(-1.0, 1.0)))
    end_ns = time.time_ns()

    # Every element was zeroed and then incremented once per step: min and
    # max of each chunk must both be the step count (reductions with no
    # temporary the size of a chunk).
    want = float(a.steps)
    bad = 0
    for c in chunks:
        lo, hi = c.min().item(), c.max().item()
        if lo != want or hi != want:
            bad += 1
            log(f"check: a chunk holds values from {lo} to {hi}, want {want}")
    check = "ok" if bad == 0 else f"FAILED({bad}_chunks)"

    steps_ms = sorted((e - s) / 1e6 for s, e in trace)
    median = steps_ms[len(steps_ms) // 2]
    if a.trace:
        with open(a.trace, "w") as f:
            f.writelines(f"{s} {e}\n" for s, e in trace)
    print(f"memory_jobs pid={os.getpid()} gib={a.gib:g} steps={a.steps} "
          f"elapsed={(end_ns - first_ns) / 1e9:.3f} wall={(end_ns - go_ns) / 1e9:.3f} "
          f"init_s={(first_ns - go_ns) / 1e9:.3f} step_ms={median:.2f} "
          f"step_ms_max={steps_ms[-1]:.2f} go_ns={go_ns} first_step_ns={first_ns} "
          f"end_ns={end_ns} check={check}", flush=True)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
