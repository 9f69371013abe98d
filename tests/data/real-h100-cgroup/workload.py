"""A Slurm-job-like GPU workload: bf16 matrix products on the GPU, a CPU 'data loader'
(torch CPU matrix products on 3 threads) and 1 GiB of touched host memory.

``python3 workload.py SECONDS`` (needs PyTorch and a CUDA GPU)."""

import sys
import threading
import time

import torch

seconds = float(sys.argv[1])
host = torch.ones(256 * 1024 * 1024, dtype=torch.float32)  # 1 GiB host, touched
stop = time.time() + seconds


def loader():
    torch.set_num_threads(3)
    x = torch.randn(1024, 1024)
    while time.time() < stop:
        x = (x @ x).clamp_(-1, 1)


threading.Thread(target=loader, daemon=True).start()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
n = 0
while time.time() < stop:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"workload: {n} products, host buffer {host.numel() * 4 >> 20} MiB", flush=True)
