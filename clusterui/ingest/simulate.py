"""Feeding a simulated cluster straight into the database, on a virtual clock.

The batches come from the real collector code (``collectors.sim.cluster.ClusterSim``) and
go through the real validation and writer; only Celery is skipped, so hours of history
for tests, benchmarks and the detectors' scenario suite take seconds, not hours.
"""

import math

from clusterui.ingest.tasks import ingest_envelope
from collectors.sim.cluster import ClusterSim


def feed(sim: ClusterSim, end: float, *, flush: float = 60.0, on_batch=None) -> dict:
    """Step ``sim`` from its current time to ``end`` at its interval, storing a batch per
    node every ``flush`` seconds. Returns counts of what was produced and stored."""
    counts = {"batches": 0, "gpu_samples": 0, "rejected": 0}
    t = sim.now
    next_flush = t + flush
    while True:
        t += sim.interval
        if t > end:
            break
        sim.step(t)
        if t >= next_flush:
            _store(sim.flush(), counts, on_batch)
            next_flush = t + flush
    _store(sim.flush(), counts, on_batch)
    return counts


def _store(batches, counts, on_batch) -> None:
    for batch in batches:
        if not batch["gpu_samples"]["rows"] and not batch["nic_samples"]["rows"]:
            continue
        result = ingest_envelope(batch)
        counts["batches"] += 1
        if result is not None:
            counts["gpu_samples"] += result.gpu_samples
            counts["rejected"] += result.rejected
        if on_batch:
            on_batch(batch)


def simulated_cluster(*, nodes: int, gpus: int = 8, hours: float, end: float, seed: int = 1,
                      interval: float = 10.0, cluster: str = "demo", root_dir: str | None = None,
                      flush: float = 60.0) -> tuple[ClusterSim, dict]:
    """A cluster that has run for ``hours`` up to ``end``, with its history stored."""
    start = math.floor((end - hours * 3600) / interval) * interval
    sim = ClusterSim(nodes=nodes, gpus_per_node=gpus, seed=seed, start=start,
                     root_dir=root_dir, cluster=cluster, interval=interval)
    try:
        counts = feed(sim, end, flush=flush)
    finally:
        sim.close()
    return sim, counts
