"""What the collector's process attribution sees from this process's namespaces: NVML's
pids, whether /proc has them, their cgroup text, and the collector's JobAttributor result."""
import os

import pynvml as n

from collectors.attribution import JobAttributor
from collectors.attribution.metadata import Scontrol
from collectors.attribution.slurm_gpus import SlurmGpuIndex

n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
uuid = n.nvmlDeviceGetUUID(h)
pids = [p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(h)]
print("my pid", os.getpid(), "my cgroup", open("/proc/self/cgroup").read().strip())
print("NVML pids", pids)
for pid in pids:
    path = f"/proc/{pid}/cgroup"
    print(" ", pid, "in /proc:", os.path.exists(path),
          "cgroup:", open(path).read().strip() if os.path.exists(path) else "-")
att = JobAttributor("/proc", "/sys/fs/cgroup", "/tmp/emptymap", Scontrol(executable=""),
                    SlurmGpuIndex(executable=""))
owners, _ = att.attribute(0.0, [(0, uuid, pids)])
job = owners[uuid]
print("attributed:", None if job is None else (job.ref.scheduler, job.ref.id, job.cgroup_dirs))
n.nvmlShutdown()
