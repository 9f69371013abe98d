"""The collector's own Agent over a few ticks of a simulated node: one job placed on some of
its GPUs, NVML answered by the NVML class under test (the simulator or a subclass that
behaves as a real driver was seen to)."""

from __future__ import annotations

from collectors.agent import Agent
from collectors.sim.node import SimJob, SimNode
from collectors.sim.scenarios import Scenario

T0 = 1_763_800_000.0


def run_agent(tmp_path, nvml_class, *, gpus=7, job_gpus=(0, 1), mapping=True, ticks=3,
              **kwargs):
    """(node, nvml, batch, GPU rows as dicts) after ``ticks`` samples 10 s apart; with
    ``mapping=False`` no mapping file names the job, only its processes can."""
    node = SimNode(str(tmp_path / "n"), "mig-n0", gpus=gpus, seed=3)
    job = SimJob("77", Scenario.HEALTHY, "bob", 61002, "vision", "gpu", "vit", T0 - 100, None,
                 ("mig-n0",), len(job_gpus), 8, 11)  # fmt: skip
    node.place(job, job_gpus)
    nvml = nvml_class(node, **kwargs)
    overrides = {} if mapping else {"job_map_dir": str(tmp_path / "no-mapping-files")}
    now = [T0]
    agent = Agent(node.collector_config(cluster="c", interval=10, flush=60, **overrides),
                  nvml=nvml, clock=lambda: now[0])
    try:
        node.advance(T0)
        for tick in range(1, ticks + 1):
            now[0] = T0 + 10 * tick
            node.advance(now[0])
            agent.sample()
        batch = agent.build_batch()
    finally:
        agent.close()
    fields = batch["gpu_samples"]["fields"]
    rows = [dict(zip(fields, r, strict=True)) for r in batch["gpu_samples"]["rows"]]
    return node, nvml, batch, rows
