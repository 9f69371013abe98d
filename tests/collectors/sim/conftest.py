"""Running one simulated job through the real collector agent, for the simulator's tests."""

from __future__ import annotations

import pytest

from collectors.agent import Agent
from collectors.sim.node import SimJob, SimNode
from collectors.sim.nvml import SimNVML
from collectors.sim.scenarios import MULTINODE, NEEDS_FULL_NODE, Scenario

T0 = 1_763_800_000.0


class Run:
    """The batch of one node after sampling a job every `interval` s for `duration` s."""

    def __init__(self, batch: dict, job: SimJob) -> None:
        self.batch = batch
        self.job = job
        gf = batch["gpu_samples"]["fields"]
        self.gpu_rows = [dict(zip(gf, r, strict=True)) for r in batch["gpu_samples"]["rows"]]
        nf = batch["nic_samples"]["fields"]
        self.nic_rows = [dict(zip(nf, r, strict=True)) for r in batch["nic_samples"]["rows"]]
        jf = batch["job_samples"]["fields"]
        self.job_rows = [dict(zip(jf, r, strict=True)) for r in batch["job_samples"]["rows"]]

    def times(self) -> list[float]:
        """Sample times after the first (rates need two readings)."""
        return sorted({r["ts"] for r in self.gpu_rows if r["util_pct"] is not None})[1:]

    def job_gpus(self) -> list[int]:
        return sorted({r["gpu"] for r in self.gpu_rows if r["job"] == self.job.id})

    def series(self, name: str, gpus=None) -> list[float]:
        """Per sample time: the mean of `name` over the job's GPUs (or `gpus`)."""
        gpus = set(self.job_gpus() if gpus is None else gpus)
        out = []
        for ts in self.times():
            vals = [
                r[name]
                for r in self.gpu_rows
                if r["ts"] == ts and r["gpu"] in gpus and r[name] is not None
            ]
            if vals:
                out.append(sum(vals) / len(vals))
        return out

    def ib_fraction(self) -> list[float]:
        """Per sample time: mean tx rate over the IB ports, as a fraction of capacity."""
        ports = [i for i, n in enumerate(self.batch["nics"]) if n["kind"] == "infiniband"]
        cap = self.batch["nics"][ports[0]]["link_bytes_per_s"]
        out = []
        for ts in self.times():
            vals = [
                r["tx_bytes_per_s"] for r in self.nic_rows if r["ts"] == ts and r["nic"] in ports
            ]
            if vals:
                out.append(sum(vals) / len(vals) / cap)
        return out


@pytest.fixture
def run_job(tmp_path):
    """run_job(scenario, interval, duration, gpus=None) -> Run, through the real Agent."""

    def run(scenario: Scenario, interval: float, duration: float, gpus: int | None = None):
        full = scenario in NEEDS_FULL_NODE
        size = 8 if full or gpus is None and scenario is not Scenario.IDLE else (gpus or 2)
        names = ("gpu-t001", "gpu-t002") if scenario in MULTINODE else ("gpu-t001",)
        job = SimJob(
            id="900001", scenario=scenario, user="alice", uid=61001, account="nlp",
            partition="gpu", name="llama-ft", start=T0 - 600.0, end=None, nodes=names,
            gpus_per_node=size, cpus_per_node=12 * size, seed=4242,
        )  # fmt: skip
        nodes = [SimNode(str(tmp_path / n), n, seed=7 + i) for i, n in enumerate(names)]
        for rank, node in enumerate(nodes):
            node.place(job, range(size), node_rank=rank)
            node.advance(T0)
        nvml = SimNVML(nodes[0])
        clock = {"t": T0}
        agent = Agent(nodes[0].collector_config(cluster="t"), nvml=nvml, clock=lambda: clock["t"])
        try:
            steps = int(duration / interval)
            for k in range(steps + 1):
                clock["t"] = T0 + k * interval
                for node in nodes:
                    node.advance(clock["t"])
                nvml.settle_events()
                agent.sample()
            return Run(agent.build_batch(), job)
        finally:
            agent.close()

    return run
