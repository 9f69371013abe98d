"""Small factories for the API tests: inventory, jobs, efficiency and findings rows made
directly (the detectors fill the last two in production)."""

import datetime as dt
import itertools

from django.utils import timezone

from clusterui.findings.models import Finding, JobEfficiency
from clusterui.inventory.models import Cluster, Gpu, Nic, Node
from clusterui.jobs.models import Job, JobGpu
from clusterui.telemetry.models import GpuLatest, NicLatest

_ids = itertools.count(1000)


def cluster(name="test") -> Cluster:
    return Cluster.objects.get_or_create(name=name)[0]


def node(name="gpu-a001", *, gpus=2, nics=1, cluster_name="test", last_seen=None,
         latest=True, sample_interval_s=10.0) -> Node:
    now = timezone.now()
    seen = last_seen or now
    n = Node.objects.create(cluster=cluster(cluster_name), name=name, first_seen=seen,
                            last_seen=seen, sample_interval_s=sample_interval_s)
    for i in range(gpus):
        g = Gpu.objects.create(node=n, uuid=f"GPU-{name}-{i}", index=i,
                               model="NVIDIA H100 80GB HBM3", memory_total_mib=81559,
                               power_limit_w=700.0, first_seen=seen, last_seen=seen)
        if latest:
            GpuLatest.objects.create(gpu=g, ts=seen, util_pct=10.0 * (i + 1), power_w=300.0 + i,
                                     mem_used_mib=1000 * (i + 1), temp_c=60.0)
    for i in range(nics):
        nic = Nic.objects.create(node=n, name=f"mlx5_{i}:1", kind="infiniband",
                                 link_bytes_per_s=50e9, first_seen=seen, last_seen=seen)
        if latest:
            NicLatest.objects.create(nic=nic, ts=seen, rx_bytes_per_s=1e9, tx_bytes_per_s=2e9)
    return n


def job(user="alice", *, account="nlp", gpus=(), state="running", started_at=None,
        ended_at=None, name="train", external_id=None, efficiency=None) -> Job:
    """A job holding ``gpus`` (Gpu rows); ``efficiency``: JobEfficiency figures
    ``{"allocated": h, "used": h}`` (wasted = allocated - used)."""
    now = timezone.now()
    started_at = started_at or now - dt.timedelta(hours=2)
    j = Job.objects.create(
        cluster=cluster(), scheduler="slurm", external_id=external_id or str(next(_ids)),
        user=user, account=account, partition="gpu", name=name, state=state,
        started_at=started_at, ended_at=ended_at, cpus=16, first_seen=started_at,
        last_seen=ended_at or now)
    for g in gpus:
        JobGpu.objects.create(job=j, gpu=g, first_seen=started_at, last_seen=ended_at or now)
        GpuLatest.objects.filter(gpu=g).update(job=j)
    if efficiency is not None:
        allocated, used = efficiency["allocated"], efficiency["used"]
        JobEfficiency.objects.create(
            job=j, computed_at=now, window_start=started_at, window_end=ended_at or now,
            gpus=len(gpus), gpu_hours_allocated=allocated, gpu_hours_used=used,
            gpu_hours_wasted=allocated - used, util_source="nvml_util",
            util_mean_pct=100.0 * used / allocated if allocated else None)
    return j


def finding(j: Job | None, kind="low_utilization", *, severity="warning", state="open",
            node=None, wasted=1.5) -> Finding:
    now = timezone.now()
    return Finding.objects.create(
        kind=kind, severity=severity, state=state, job=j, node=node,
        window_start=now - dt.timedelta(hours=1), window_end=now, first_seen=now,
        last_seen=now, closed_at=None if state == "open" else now,
        evidence={"mean_util_pct": 7.9}, wasted_gpu_hours=wasted,
        title=f"{kind} on {j or node}", explanation="The GPUs were mostly idle.",
        suggestion="Use fewer GPUs.")
