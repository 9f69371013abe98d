"""What the real NVML lists on GPU 0: compute, MPS-compute and graphics processes, each pid
with its command name, cgroup and GPU memory (MiB)."""

import pynvml as n


def read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def show(label, fn, h):
    try:
        procs = fn(h)
    except n.NVMLError as e:
        print(f"{label}: {e!r}")
        return
    out = [(p.pid, read(f"/proc/{p.pid}/comm"), read(f"/proc/{p.pid}/cgroup"),
            (p.usedGpuMemory or 0) >> 20) for p in procs]
    print(f"{label}: {out}")


n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
print("driver", n.nvmlSystemGetDriverVersion(), "nvml", n.nvmlSystemGetNVMLVersion())
show("compute", n.nvmlDeviceGetComputeRunningProcesses, h)
show("mps-compute", n.nvmlDeviceGetMPSComputeRunningProcesses, h)
show("graphics", n.nvmlDeviceGetGraphicsRunningProcesses, h)
try:
    print("compute mode", n.nvmlDeviceGetComputeMode(h))
except n.NVMLError as e:
    print("compute mode", e)
n.nvmlShutdown()
