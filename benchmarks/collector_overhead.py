"""CPU time the collector spends per sampling tick on an 8-GPU node with 4 InfiniBand ports.

The node is the simulator's (``collectors.sim``): a ``SimNode`` rewrites kernel-shaped
sysfs / procfs / cgroup / job-map trees and ``SimNVML`` answers pynvml's calls, so the
measured code is the real collector (NVML readings, field values, GPM, NIC sysfs reads,
cgroup attribution, job usage). Only ``Agent.sample()`` is timed, with
``time.process_time`` (this process's CPU time, all threads); the simulator's own
``advance()`` is excluded. Note: SimNVML answers in Python, the real NVML in C plus driver
ioctls, so this measures the collector's Python-side cost, not the driver's.

    python benchmarks/collector_overhead.py [--ticks 300] [--gpus 8] [--ports 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectors.agent import Agent  # noqa: E402
from collectors.sim.node import SimJob, SimNode  # noqa: E402
from collectors.sim.nvml import SimNVML  # noqa: E402
from collectors.sim.scenarios import Scenario  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--ports", type=int, default=4)
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="clusterui-bench-") as root:
        node = SimNode(root, "bench-node", gpus=args.gpus, ib_ports=args.ports, seed=1)
        t0 = 1_763_790_000.0
        job = SimJob(
            id="100001", scenario=Scenario.HEALTHY, user="alice", uid=1000, account="nlp",
            partition="gpu", name="bench", start=t0, end=None, nodes=(node.name,),
            gpus_per_node=args.gpus, cpus_per_node=64, seed=7,
        )  # fmt: skip
        node.place(job, range(args.gpus))
        node.advance(t0)
        clock = {"t": t0}
        config = node.collector_config(interval=args.interval, flush=args.interval)
        agent = Agent(config, nvml=SimNVML(node), clock=lambda: clock["t"])
        per_tick = []
        rows = 0
        for i in range(args.ticks + 2):
            clock["t"] = t0 + (i + 1) * args.interval
            node.advance(clock["t"])
            start = time.process_time()
            agent.sample()
            elapsed = time.process_time() - start
            if i >= 2:  # the first two ticks discover and prime the counters
                per_tick.append(elapsed * 1000)
            if i % 30 == 0:
                rows += len(agent.build_batch()["gpu_samples"]["rows"])
        rows += len(agent.build_batch()["gpu_samples"]["rows"])
        agent.close()

    per_tick.sort()
    p95 = per_tick[min(len(per_tick) - 1, int(round(0.95 * (len(per_tick) - 1))))]
    print(f"collector overhead: {args.gpus} GPUs, {args.ports} IB ports, {len(per_tick)} ticks "
          f"(simulated NVML), {rows} GPU rows")  # fmt: skip
    print(f"  CPU per tick: median {statistics.median(per_tick):.2f} ms, p95 {p95:.2f} ms, "
          f"max {per_tick[-1]:.2f} ms")  # fmt: skip
    print(f"  at a {args.interval:g} s interval: {statistics.median(per_tick) / args.interval / 10:.4f} % "
          "of one core")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
