"""As whoever runs it: NVML's process list, /proc/<pid>/cgroup and environ, and what the
collector's JobAttributor makes of them (job, user, name)."""
import os

import pynvml as n

from collectors.attribution import JobAttributor
from collectors.attribution.metadata import Scontrol
from collectors.attribution.slurm_gpus import SlurmGpuIndex

print("uid", os.getuid(), "caps", [line.split()[1] for line in open("/proc/self/status") if line.startswith("CapEff")])
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
uuid = n.nvmlDeviceGetUUID(h)
try:
    procs = n.nvmlDeviceGetComputeRunningProcesses(h)
    pids = [p.pid for p in procs]
    print("NVML pids", pids, "memory", [p.usedGpuMemory for p in procs])
except n.NVMLError as e:
    pids = []
    print("NVML process list:", repr(e))
for pid in pids:
    for name in ("cgroup", "environ"):
        try:
            data = open(f"/proc/{pid}/{name}", "rb").read()
            print(" ", pid, name, "readable,", len(data), "bytes")
        except OSError as e:
            print(" ", pid, name, "not readable:", e.strerror)
att = JobAttributor("/proc", "/sys/fs/cgroup", "/tmp/emptymap", Scontrol(executable=""),
                    SlurmGpuIndex(executable=""))
owners, _ = att.attribute(0.0, [(0, uuid, pids)])
job = owners[uuid]
print("attributed:", None if job is None else job.as_dict([0]))
print("usage:", att.usage(0.0))
n.nvmlShutdown()
