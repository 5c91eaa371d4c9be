#!/usr/bin/env python3
"""How an idle GPU distorts a timing: a 2048^3 f16 product (torch.matmul, i.e. cuBLAS) timed with
CUDA events after an L2 flush, back to back, after idle gaps, and after an idle gap followed by
steady work of several kinds. Needs PyTorch with CUDA. Results of a run on an H200:
assets/results/grade-timing-h200-2026-11-22.txt. The grader's timing (common::timing::time_rounds)
primes the tensor cores before every round because of what this shows."""
import time
import torch

n = 2048
a = torch.randn(n, n, device="cuda", dtype=torch.float16)
b = torch.randn(n, n, device="cuda", dtype=torch.float16)
x = torch.randn(n, n, device="cuda", dtype=torch.float16)
flush = torch.empty(120 * 2**20, dtype=torch.uint8, device="cuda")


def timed():
    flush.fill_(0x5A)
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    a @ b
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3


def med(v):
    v = sorted(v)
    return round(v[len(v) // 2], 1)


def busy_memsets(ms):
    t = time.time()
    while (time.time() - t) * 1e3 < ms:
        flush.fill_(1)
        torch.cuda.synchronize()


for _ in range(5):
    timed()
print("GPU", torch.cuda.get_device_name(), "torch", torch.__version__)
print("back to back: median us", med([timed() for _ in range(21)]))
for idle in [1, 5, 20, 50, 200]:
    r = []
    for _ in range(11):
        time.sleep(idle / 1e3)
        r.append(timed())
    print(f"after {idle} ms idle: median us", med(r))
def after_idle(what, work, reps=7):
    r = []
    for _ in range(reps):
        time.sleep(0.05)
        work()
        r.append(timed())
    print(f"50 ms idle, then {what}: median us", med(r))


def products(k):
    for _ in range(k):
        x @ x


for ms in [0.5, 1, 2, 5, 10, 20]:
    after_idle(f"{ms} ms of memsets", lambda: busy_memsets(ms))
for k in [1, 4, 16, 64, 256, 1024]:
    after_idle(f"{k} untimed products queued back to back", lambda: products(k))
