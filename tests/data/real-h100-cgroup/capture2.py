"""``capture2.py N1 FILE1 JOB_CGROUP N2 FILE2``: the collector's own Agent with the real NVML,
one sample a second; a batch after N1 ticks, then, once the job's task cgroup is empty and its
cgroups are removed (as slurmstepd removes them), a second batch after N2 more ticks."""

import json
import os
import sys
import time

from collectors.agent import Agent
from collectors.backend import open_backend
from collectors.config import Config


def ticks(agent, n):
    for _ in range(n):
        t = time.perf_counter()
        agent.sample()
        print(f"tick {1e3 * (time.perf_counter() - t):.1f} ms", flush=True)
        time.sleep(1.0)


def main(n1, f1, job_dir, n2, f2):
    config = Config.load(None, os.environ, {})
    backend = open_backend(config)
    agent = Agent(config, nvml=backend.nvml, nvml_reason=backend.reason, ethtool=backend.ethtool)
    ticks(agent, n1)
    with open(f1, "w") as out:
        json.dump(agent.build_batch(), out)
    procs = os.path.join(job_dir, "step_0/user/task_0/cgroup.procs")
    while os.path.exists(procs) and open(procs).read().strip():
        time.sleep(0.5)
    for sub in ("step_0/user/task_0", "step_0/user", "step_0", ""):
        try:
            os.rmdir(os.path.join(job_dir, sub))
        except OSError as e:
            print("rmdir", sub, e)
    ticks(agent, n2)
    with open(f2, "w") as out:
        json.dump(agent.build_batch(), out)
    agent.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
