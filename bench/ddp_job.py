"""ddp_job.py - a data-parallel training job for bench/multi_gpu.sh.

    torchrun --nproc-per-node 2 ddp_job.py UNTIL_NS     (PyTorch DDP, NCCL)
    python3 ddp_job.py UNTIL_NS                          (one GPU, no DDP)
    torchrun --nproc-per-node 2 ddp_job.py --quota BYTES (the quota check)

Training: an 8-layer 4096-wide MLP, bf16 autocast, forward + backward +
SGD on 8192 rows a step; under DDP the 134M gradients are all-reduced in
buckets during the backward pass, as in any DDP job. The ranks agree on
when to stop (an all-reduce of rank 0's verdict every 5 steps), so no rank
is left waiting in a collective at UNTIL_NS (CLOCK_REALTIME). Rank 0
prints "steps N at NS" after every 5 steps, so that any window can be
measured afterwards, and "done steps=N" at the end.

--quota BYTES: every rank checks that its GPU reads BYTES as its total
memory, that 3/4 of it can be allocated and 1/2 more raises PyTorch's
out-of-memory error; prints "rank R gpu G quota ok" or exits 1.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

WIDTH, LAYERS, ROWS = 4096, 8, 8192

world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
local_rank = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local_rank)
if world > 1:
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))


def check_quota(quota):
    free, total = torch.cuda.mem_get_info()
    assert total == quota, f"rank {rank}: mem_get_info total {total}, want {quota}"
    held = torch.empty(quota * 3 // 4, dtype=torch.uint8, device="cuda")
    try:
        more = torch.empty(quota // 2, dtype=torch.uint8, device="cuda")
        raise SystemExit(f"rank {rank}: {more.numel()} bytes past the quota were allocated")
    except torch.cuda.OutOfMemoryError:
        pass
    del held
    print(f"rank {rank} gpu {local_rank} quota ok (total {total})", flush=True)
    if world > 1:
        dist.barrier()


def train(until_ns):
    layers = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*layers).cuda()
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(ROWS, WIDTH, device="cuda")
    stop = torch.zeros(1, device="cuda")
    steps = 0
    while True:
        for _ in range(5):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        stop.fill_(1.0 if time.time_ns() >= until_ns else 0.0)
        if world > 1:
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        done = stop.item() > 0  # synchronizes: the 5 steps have completed
        steps += 5
        if rank == 0:
            print(f"steps {steps} at {time.time_ns()}", flush=True)
        if done:
            break
    if rank == 0:
        print(f"done steps={steps}", flush=True)


if sys.argv[1] == "--quota":
    check_quota(int(sys.argv[2]))
else:
    train(int(sys.argv[1]))
if world > 1:
    dist.destroy_process_group()
