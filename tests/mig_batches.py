"""A node's batch from the real collector on the NVML simulator, for the MIG tests
(``tests/ingest/test_mig_ingest.py``, ``tests/web/test_mig_counts.py``): with
``SimMigNVML`` a node GPU of a placement is a MIG instance."""

from __future__ import annotations

from collectors.agent import Agent
from collectors.sim.node import SimJob, SimNode
from tests.factories import recent_start


def collect_node(tmp_path, name, gpus, placements, nvml_class, ticks):
    """``ticks`` samples 10 s apart of node ``name``; ``placements``: (job id, scenario,
    node GPUs), each job started 10 minutes before. Returns (start, batch)."""
    start = recent_start()
    node = SimNode(str(tmp_path / name), name, gpus=gpus, seed=5)
    for k, (job_id, scenario, held) in enumerate(placements):
        job = SimJob(job_id, scenario, "alice", 61001, "nlp", "gpu", "train", start - 600,
                     None, (name,), len(held), 8, 7 + k)  # fmt: skip
        node.place(job, held)
    now = [start]
    agent = Agent(node.collector_config(cluster="mig", interval=10, flush=60),
                  nvml=nvml_class(node), clock=lambda: now[0])
    node.advance(start)
    try:
        for tick in range(1, ticks + 1):
            now[0] = start + 10 * tick
            node.advance(now[0])
            agent.sample()
        return start, agent.build_batch()
    finally:
        agent.close()
