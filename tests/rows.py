"""The tests' shared cast of rows: inventory, jobs, samples, efficiency and findings made
directly (ingest and the detectors fill them in production). Used by the web and API tests;
``tests/factories.py`` builds contract-1 batches instead."""

import datetime as dt
import itertools

from django.db import connection
from django.utils import timezone

from clusterui.findings.models import Finding, JobEfficiency
from clusterui.inventory.models import Cluster, Gpu, Nic, Node
from clusterui.jobs.models import Job, JobGpu
from clusterui.telemetry import partitions
from clusterui.telemetry.models import GpuLatest, NicLatest

_ids = itertools.count(5000)


def cluster(name="test") -> Cluster:
    return Cluster.objects.get_or_create(name=name)[0]


def node(name="gpu-a001", *, gpus=4, nics=1, last_seen=None, latest=True, util=50.0,
         simulated=False, model="NVIDIA H100 80GB HBM3", cluster_name="test",
         latest_values=None) -> Node:
    """A node with GPUs and NICs; ``latest_values(i)`` gives GPU i's "now" row (default:
    ``util`` busy, the same figures on every GPU)."""
    seen = last_seen or timezone.now()
    n = Node.objects.create(cluster=cluster(cluster_name), name=name, first_seen=seen,
                            last_seen=seen, sample_interval_s=10.0, simulated=simulated,
                            agent_version="0.1.0")
    latest_values = latest_values or (lambda i: {
        "util_pct": util, "sm_active_pct": util * 0.8, "power_w": 300.0, "mem_used_mib": 1000,
        "temp_c": 60.0})
    for i in range(gpus):
        g = Gpu.objects.create(node=n, uuid=f"GPU-{name}-{i}", index=i, model=model,
                               memory_total_mib=81559, power_limit_w=700.0,
                               nvlink_bytes_per_s=450e9, first_seen=seen, last_seen=seen)
        if latest:
            GpuLatest.objects.create(gpu=g, ts=seen, **latest_values(i))
    for i in range(nics):
        nic = Nic.objects.create(node=n, name=f"mlx5_{i}:1", kind="infiniband",
                                 link_bytes_per_s=50e9, first_seen=seen, last_seen=seen)
        if latest:
            NicLatest.objects.create(nic=nic, ts=seen, rx_bytes_per_s=1e9, tx_bytes_per_s=2e9)
    return n


def job(user="alice", *, gpus=(), state="running", started_at=None, ended_at=None,
        account="nlp", name="train", external_id=None, efficiency=None, cpus=32,
        cluster_name="test") -> Job:
    """A job holding ``gpus``; ``efficiency``: ``{"allocated": h, "used": h}``."""
    now = timezone.now()
    started_at = started_at or now - dt.timedelta(hours=2)
    j = Job.objects.create(
        cluster=cluster(cluster_name), scheduler="slurm",
        external_id=external_id or str(next(_ids)),
        user=user, account=account, partition="gpu", name=name, state=state,
        started_at=started_at, ended_at=ended_at, cpus=cpus, first_seen=started_at,
        last_seen=ended_at or now)
    for g in gpus:
        JobGpu.objects.create(job=j, gpu=g, first_seen=started_at, last_seen=ended_at or now)
        GpuLatest.objects.filter(gpu=g).update(job=j)
    if efficiency is not None:
        allocated, used = efficiency["allocated"], efficiency["used"]
        JobEfficiency.objects.create(
            job=j, computed_at=now, window_start=started_at, window_end=ended_at or now,
            gpus=len(gpus), gpu_hours_allocated=allocated, gpu_hours_used=used,
            gpu_hours_wasted=allocated - used, util_source="sm_active",
            util_mean_pct=100.0 * used / allocated if allocated else None,
            mem_peak_mib=61234, mem_capacity_mib=81559, energy_j=7.2e6, cpu_cores_mean=11.5,
            cpus_allocated=cpus, nic_util_mean_pct=64.0, nic_util_peak_pct=92.0)
    return j


def finding(j: Job | None, kind="low_utilization", *, severity="warning", state="open",
            node=None, wasted=1.5, evidence=None, title=None) -> Finding:
    now = timezone.now()
    return Finding.objects.create(
        kind=kind, severity=severity, state=state, job=j, node=node,
        window_start=now - dt.timedelta(minutes=30), window_end=now,
        first_seen=now - dt.timedelta(minutes=40), last_seen=now,
        closed_at=None if state == "open" else now,
        evidence=evidence if evidence is not None else {"util_mean_pct": 7.9, "gpus": 4},
        wasted_gpu_hours=wasted, title=title or f"{kind} on {j or node}",
        explanation="Over the last 30 min the job's GPUs averaged 7.9 % utilization.",
        suggestion="Request fewer GPUs.")


def _partitions(start: dt.datetime, end: dt.datetime) -> None:
    partitions.forget_known()  # a rolled-back test may have taken a partition with it
    partitions.ensure_partitions({(start + dt.timedelta(days=d)).date()
                                  for d in range((end - start).days + 2)})


def gpu_samples(gpus, start: dt.datetime, end: dt.datetime, *, every_s=10, job=None,
                util=lambda gpu, k: 50.0, nvlink=0.0) -> int:
    """Write one sample per GPU every ``every_s`` seconds in [start, end); return the count."""
    ts, ids, util_v, nvl = [], [], [], []
    t, k = start, 0
    while t < end:
        for g in gpus:
            ts.append(t)
            ids.append(g.id)
            util_v.append(util(g, k))
            nvl.append(nvlink)
        t += dt.timedelta(seconds=every_s)
        k += 1
    _partitions(start, end)
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO telemetry_gpusample (ts, gpu_id, job_id, util_pct, sm_active_pct,
                mem_used_mib, power_w, temp_c, nvlink_tx_bytes_per_s, nvlink_rx_bytes_per_s)
            SELECT u.ts, u.gpu, %s, u.util, u.util * 0.8, 40000, 250 + u.util * 4, 55, u.nvl,
                   u.nvl
            FROM unnest(%s::timestamptz[], %s::bigint[], %s::real[], %s::real[])
                 AS u(ts, gpu, util, nvl)
            """,
            [job.id if job else None, ts, ids, util_v, nvl],
        )
    return len(ts)


def nic_samples(nics, start: dt.datetime, end: dt.datetime, *, every_s=10, rate=1e9) -> None:
    ts, ids = [], []
    t = start
    while t < end:
        for n in nics:
            ts.append(t)
            ids.append(n.id)
        t += dt.timedelta(seconds=every_s)
    _partitions(start, end)
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO telemetry_nicsample (ts, nic_id, rx_bytes_per_s, tx_bytes_per_s) "
            "SELECT u.ts, u.nic, %s, %s FROM unnest(%s::timestamptz[], %s::bigint[]) AS u(ts, nic)",
            [rate, rate / 2, ts, ids],
        )
        # As ingest does: the (NIC, hour)s written into are due for their rollups.
        cur.execute(
            "INSERT INTO telemetry_nicrollupdue (nic_id, hour) SELECT DISTINCT u.nic, "
            "date_bin('1 hour', u.ts, '2000-01-01') FROM unnest(%s::timestamptz[], "
            "%s::bigint[]) AS u(ts, nic) ON CONFLICT DO NOTHING", [ts, ids])
