#!/usr/bin/env python
"""The detector pass over 1,000 running jobs: the first pass (an hour of history to catch up
on) and the routine pass beat runs every minute (one more minute of samples).

    python benchmarks/detector_pass.py [--jobs 1000] [--hours 1] [--interval 10] [--passes 3]

It seeds its own database (``clusterui_bench_detectors``, dropped and recreated) with a
synthetic cluster written by COPY, the way ingest writes: 2 jobs of 4 GPUs per 8-GPU node
(H100s with GPM and NVLink, every 8th node an A100 without), 4 InfiniBand ports and an
Ethernet port per node, samples every ``--interval`` seconds with a mix of healthy, idle,
communication-bound and input-bound behaviours, and a few Xid events.
"""

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
BENCH_NAME = "clusterui_bench_detectors"
BENCH_DB = BASE_DB.rsplit("/", 1)[0] + "/" + BENCH_NAME
os.environ.update(DATABASE_URL=BENCH_DB, DEBUG="1", DJANGO_SETTINGS_MODULE="clusterui.settings",
                  LOG_LEVEL="WARNING")

GPUS_PER_NODE = 8
JOB_GPUS = 4
H100 = ("NVIDIA H100 80GB HBM3", 81559, 700.0, 450e9)
A100 = ("NVIDIA A100-PCIE-40GB", 40960, 250.0, None)
IB = 50e9


def setup_database() -> None:
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_NAME}")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)


def drop_database() -> None:
    import psycopg
    from django.db import connection

    connection.close()
    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_NAME} WITH (FORCE)")


class Cluster:
    """The synthetic cluster's inventory and its sample generator."""

    def __init__(self, jobs: int, start: dt.datetime, interval: float) -> None:
        from clusterui.inventory.models import Cluster as ClusterRow
        from clusterui.inventory.models import Gpu, Nic, Node
        from clusterui.jobs.models import Job, JobGpu

        self.interval = interval
        nodes = -(-jobs * JOB_GPUS // GPUS_PER_NODE)
        cluster = ClusterRow.objects.create(name="bench")
        node_rows = Node.objects.bulk_create(
            Node(cluster=cluster, name=f"b{i:04d}", sample_interval_s=interval,
                 first_seen=start, last_seen=start) for i in range(nodes))
        gpu_rows = []
        for i, node in enumerate(node_rows):
            model = A100 if i % 8 == 7 else H100
            for g in range(GPUS_PER_NODE):
                gpu_rows.append(Gpu(node=node, uuid=f"GPU-bench-{i}-{g}", index=g,
                                    model=model[0], memory_total_mib=model[1],
                                    power_limit_w=model[2], nvlink_bytes_per_s=model[3],
                                    first_seen=start, last_seen=start))
        gpu_rows = Gpu.objects.bulk_create(gpu_rows)
        nic_rows = []
        for node in node_rows:
            nic_rows += [Nic(node=node, name=f"mlx5_{p}:1", kind="infiniband",
                             link_bytes_per_s=IB, first_seen=start, last_seen=start)
                         for p in range(4)]
            nic_rows.append(Nic(node=node, name="eth0", kind="ethernet",
                                link_bytes_per_s=25e9 / 8, first_seen=start, last_seen=start))
        self.nics = [(n.id, k // 5) for k, n in enumerate(Nic.objects.bulk_create(nic_rows))]
        job_rows = Job.objects.bulk_create(
            Job(cluster=cluster, scheduler="slurm", external_id=str(900000 + k), user="alice",
                name="bench", state="running", started_at=start - dt.timedelta(minutes=30),
                cpus=JOB_GPUS * 12, first_seen=start, last_seen=start) for k in range(jobs))
        self.jobs = [(j.id, k // 2) for k, j in enumerate(job_rows)]  # (job id, node index)
        allocations = []
        for k, (job_id, node) in enumerate(self.jobs):
            first = node * GPUS_PER_NODE + (k % 2) * JOB_GPUS
            for g in range(first, first + JOB_GPUS):
                allocations.append(JobGpu(job_id=job_id, gpu=gpu_rows[g], first_seen=start,
                                          last_seen=start))
        JobGpu.objects.bulk_create(allocations)
        owner = {}
        for k, (job_id, node) in enumerate(self.jobs):
            first = node * GPUS_PER_NODE + (k % 2) * JOB_GPUS
            for g in range(first, first + JOB_GPUS):
                owner[g] = (job_id, k)
        self.node_ids = [node.id for node in node_rows]
        # (gpu id, (job id, job index), H100?)
        self.gpus = [(row.id, owner[n], (n // GPUS_PER_NODE) % 8 != 7)
                     for n, row in enumerate(gpu_rows)]
        self.energy = np.random.default_rng(1).uniform(1e8, 1e9, len(self.gpus))

    def write(self, t0: float, t1: float) -> int:
        """COPY the samples in (t0, t1] into the raw tables; return the GPU rows written."""
        from django.db import connection

        from clusterui.telemetry import partitions
        from clusterui.telemetry.metrics import (
            GPU_SAMPLE_COLUMNS,
            GPU_SAMPLE_TABLE,
            JOB_SAMPLE_COLUMNS,
            JOB_SAMPLE_TABLE,
            NIC_SAMPLE_COLUMNS,
            NIC_SAMPLE_TABLE,
        )
        from clusterui.telemetry.models import GpuEvent

        times = np.arange(t0 + self.interval, t1 + 1e-6, self.interval)
        partitions.ensure_partitions({dt.datetime.fromtimestamp(t, dt.UTC).date()
                                      for t in (times[0], times[-1])})
        rng = np.random.default_rng(int(t0))
        stamps = [dt.datetime.fromtimestamp(t, dt.UTC) for t in times]
        rows = 0
        with connection.cursor() as wrapper:
            cur = wrapper.cursor
            with cur.copy(f"COPY {GPU_SAMPLE_TABLE} ({', '.join(GPU_SAMPLE_COLUMNS)}) "
                          "FROM STDIN") as copy:
                for gpu_id, owner, h100 in self.gpus:
                    job_id, k = owner
                    kind = k % 10  # 0-5 healthy, 6 idle, 7 comm-bound, 8 input-bound, 9 moderate
                    level = {6: 0.0, 7: 30.0, 8: 15.0, 9: 55.0}.get(kind, 92.0)
                    util = np.clip(level + rng.normal(0, 4, len(times)), 0, 100).round()
                    nvl = (60 + rng.normal(0, 8, len(times)) if kind == 7 else
                           rng.uniform(5, 25, len(times)))
                    e = self.energy[gpu_id % len(self.energy)]
                    for i, ts in enumerate(stamps):
                        e += 500 * self.interval
                        sm = util[i] * 0.8 if h100 else None
                        link = nvl[i] / 100 * 450e9 if h100 else None
                        copy.write_row((ts, gpu_id, job_id, util[i], 30.0, 40000, 500.0, 60.0,
                                        1980.0, sm, None if sm is None else sm / 2, 20.0, 1e9,
                                        1e9, link, link, 0, e))
                        rows += 1
            with cur.copy(f"COPY {NIC_SAMPLE_TABLE} ({', '.join(NIC_SAMPLE_COLUMNS)}) "
                          "FROM STDIN") as copy:
                for nic_id, _node in self.nics:
                    rate = rng.uniform(0.01, 0.7, len(times)) * IB
                    for i, ts in enumerate(stamps):
                        copy.write_row((ts, nic_id, rate[i], rate[i]))
            with cur.copy(f"COPY {JOB_SAMPLE_TABLE} ({', '.join(JOB_SAMPLE_COLUMNS)}) "
                          "FROM STDIN") as copy:
                for k, (job_id, node) in enumerate(self.jobs):
                    node_id = self.node_ids[node]
                    cores = (46.0 if k % 10 == 8 else 12.0) + rng.normal(0, 1, len(times))
                    for i, ts in enumerate(stamps):
                        copy.write_row((ts, job_id, node_id, cores[i],
                                        10**11))
        end = stamps[-1]
        from clusterui.inventory.models import Node
        from clusterui.jobs.models import Job

        Node.objects.filter(cluster__name="bench").update(last_seen=end)
        Job.objects.filter(cluster__name="bench").update(last_seen=end)
        GpuEvent.objects.bulk_create(
            GpuEvent(gpu_id=self.gpus[g][0], ts=stamps[len(stamps) // 2], kind="xid", code=79,
                     message="GPU has fallen off the bus")
            for g in range(0, len(self.gpus), 997))
        return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--passes", type=int, default=3, help="routine passes to time")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args(argv)
    if args.jobs < 2 or args.jobs % 2 or not 1 <= args.interval <= 60:
        parser.error("--jobs must be even and >= 2, --interval between 1 and 60")

    setup_database()
    import django

    django.setup()
    from clusterui.findings.models import Finding
    from clusterui.findings.runner import run_pass

    now = time.time() // 60 * 60
    start = now - args.hours * 3600
    began = time.perf_counter()
    cluster = Cluster(args.jobs, dt.datetime.fromtimestamp(start, dt.UTC), args.interval)
    rows = cluster.write(start, now)
    print(f"seeded {args.jobs} running jobs on {len(cluster.gpus)} GPUs: {rows:,} GPU samples "
          f"over {args.hours:g} h at {args.interval:g} s, in {time.perf_counter() - began:.1f} s")
    try:
        first = run_pass(now=dt.datetime.fromtimestamp(now + 30, dt.UTC))
        print(f"first pass (catching up on {args.hours:g} h): {first.seconds:.2f} s "
              f"({first.jobs} jobs, {first.judged} judged, {first.opened} findings opened)")
        times = []
        for k in range(1, args.passes + 1):
            cluster.write(now + (k - 1) * 60, now + k * 60)
            r = run_pass(now=dt.datetime.fromtimestamp(now + k * 60 + 30, dt.UTC))
            times.append(r.seconds)
            print(f"routine pass {k} (one more minute of samples): {r.seconds:.2f} s "
                  f"({r.jobs} jobs, {r.judged} judged; findings {r.opened} opened, "
                  f"{r.updated} updated, {r.closed} closed)")
        print(f"detector pass over {args.jobs} running jobs: routine {statistics.median(times):.2f} s "
              f"(median of {len(times)}), first {first.seconds:.2f} s; "
              f"{Finding.objects.filter(state='open').count()} open findings")
    finally:
        if not args.keep:
            drop_database()
    return 0


if __name__ == "__main__":
    sys.exit(main())
