"""train_loop.py - PyTorch training-loop throughput (caching allocator).

    python3 train_loop.py SECONDS

A small convolutional network on random data, forward + backward + SGD
step, bf16 autocast. Prints steps_per_s=<n> after a warm-up. Run natively
and under libnvshare with a memory quota (bench/run.sh does) to check that
quota accounting leaves the training loop's speed unchanged.
"""
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
model = nn.Sequential(
    nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(),
    nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(256, 1000),
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(128, 3, 64, 64, device="cuda")
y = torch.randint(0, 1000, (128,), device="cuda")
loss_fn = nn.CrossEntropyLoss()


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


for _ in range(20):
    step()
torch.cuda.synchronize()
steps, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    steps += 10
print(f"steps_per_s={steps / (time.perf_counter() - start):.2f}")
