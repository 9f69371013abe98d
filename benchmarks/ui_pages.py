#!/usr/bin/env python
"""Server time of the web pages on a database holding 1,000 nodes' worth of data.

    python benchmarks/ui_pages.py [--nodes 1000] [--hours 3] [--runs 15] [--keep]

It seeds its own database (``clusterui_bench_ui``, dropped and re-created unless --keep
finds it already seeded) in a few minutes, server side: 1,000 nodes x 8 GPUs with 4
InfiniBand ports and an Ethernet port each, ``--hours`` of 10 s samples for every GPU, NIC
and job (about 3 million GPU rows an hour), two-hour 8-GPU jobs on every node with their
efficiency, findings on one job in five, a 4-node 32-GPU job and some Xid events, and a
week of hourly GPU rollups before those hours (the cluster history heatmap's 7 days). Then it
times each page through Django's test client (the whole request in-process: views,
queries, templates, figures; no network, no compression) and prints the median and p95
in ms, the number of SQL queries each page made and its size (as sent gzipped too).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
BENCH_NAME = "clusterui_bench_ui"
BENCH_DB = BASE_DB.rsplit("/", 1)[0] + "/" + BENCH_NAME
os.environ.update(DATABASE_URL=BENCH_DB, DEBUG="1", DJANGO_SETTINGS_MODULE="clusterui.settings",
                  ALLOWED_HOSTS="testserver,localhost", LOG_LEVEL="WARNING")

GPUS_PER_NODE = 8
SLOT_H = 2  # each node runs one 8-GPU job per two-hour slot
HISTORY_DAYS = 7  # hourly GPU rollups before the raw hours: the history heatmap's week
INTERVAL_S = 10


def admin_url() -> str:
    return BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"


def create_database() -> None:
    import psycopg

    with psycopg.connect(admin_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_NAME}")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)


def seeded() -> bool:
    import psycopg

    with psycopg.connect(admin_url()) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            [BENCH_NAME]).fetchone():
            return False
    from clusterui.inventory.models import Node

    return Node.objects.filter(cluster__name="bench").exists()


def step(what: str, sql: str, params=()) -> None:
    from django.db import connection

    began = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.rowcount
    print(f"  {what}: {rows:,} rows in {time.perf_counter() - began:.1f} s", flush=True)


def pack_hourly() -> None:
    """The scratch table ``hourly`` packed into ``telemetry_gpurollup1hpack``, one blob per
    (GPU, day) (``rollupcodec.pack_rows``: each mean x n as the sum)."""
    import datetime as dt

    import numpy as np
    from django.db import connection

    from clusterui.telemetry import rollupcodec
    from clusterui.telemetry.metrics import ROLLUP_GAUGES

    began = time.perf_counter()
    kept = ("util_pct", "sm_active_pct", "power_w", "temp_c", "mem_used_mib")
    cols = ", ".join(f"{m}_avg, {m}_max, {m}_min" for m in kept)
    with connection.cursor() as cur:
        cur.execute("SELECT gpu_id, (extract(epoch FROM bucket) * 1000)::bigint, n, "
                    f"{cols} FROM hourly ORDER BY gpu_id, bucket")
        table = np.array(cur.fetchall(), np.float64)
        gpu, bucket = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
        day = bucket - bucket % 86_400_000
        cuts = np.flatnonzero((gpu[1:] != gpu[:-1]) | (day[1:] != day[:-1])) + 1
        rows = []
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(gpu)], strict=True):
            n = table[a:b, 2].astype(np.int64)
            none = np.zeros(b - a, np.int64)
            k = {m: none for m, _ in rollupcodec.STATS}
            stats = {m: {agg: np.zeros(b - a) for agg in aggs} for m, aggs in rollupcodec.STATS}
            for j, m in enumerate(kept):
                avg, hi, lo = (table[a:b, 3 + 3 * j + i] for i in range(3))
                k[m] = n
                stats[m] = {"sum": avg * n, "max": hi, "min": lo}
            assert set(kept) <= set(ROLLUP_GAUGES)
            rows.append((int(gpu[a]), dt.datetime.fromtimestamp(day[a] / 1000, dt.UTC),
                         int(n.sum()), rollupcodec.pack_rows(int(day[a]), 3600, bucket[a:b],
                                                             none, n, k, stats)))
        cur.executemany("INSERT INTO telemetry_gpurollup1hpack (gpu_id, start, n, data) "
                        "VALUES (%s, %s, %s, %s)", rows)
        cur.execute("DROP TABLE hourly")
    print(f"  pack the hourly GPU rollups: {time.perf_counter() - began:.1f} s", flush=True)


def seed(nodes: int, hours: float) -> None:
    import datetime as dt

    from django.db import connection
    from django.utils import timezone

    from clusterui.telemetry import partitions

    now = timezone.now().replace(microsecond=0)
    t0 = now - dt.timedelta(hours=hours)
    slots = max(1, int(-(-hours // SLOT_H)))
    partitions.ensure_partitions({(t0 + dt.timedelta(days=d)).date()
                                  for d in range(int(hours // 24) + 2)})
    p = {"n": nodes, "g": GPUS_PER_NODE, "t0": t0, "now": now, "slots": slots,
         "slot": dt.timedelta(hours=SLOT_H), "iv": dt.timedelta(seconds=INTERVAL_S)}
    print(f"seeding {nodes} nodes x {GPUS_PER_NODE} GPUs, {hours:g} h at {INTERVAL_S} s",
          flush=True)
    step("cluster", "INSERT INTO inventory_cluster (id, name, created_at) "
         "VALUES (1, 'bench', %(now)s)", p)
    step("nodes", """
        INSERT INTO inventory_node (id, cluster_id, name, agent_version, simulated,
            sample_interval_s, first_seen, last_seen)
        SELECT i, 1, 'gpu-' || lpad(i::text, 4, '0'), '0.1.0', false, 10, %(t0)s, %(now)s
        FROM generate_series(1, %(n)s) i""", p)
    step("GPUs", """
        INSERT INTO inventory_gpu (id, node_id, uuid, index, model, memory_total_mib,
            power_limit_w, pci_bus_id, nvlink_bytes_per_s, first_seen, last_seen)
        SELECT (n - 1) * %(g)s + g + 1, n, 'GPU-bench-' || n || '-' || g, g,
               'NVIDIA H100 80GB HBM3', 81559, 700, '', 450e9, %(t0)s, %(now)s
        FROM generate_series(1, %(n)s) n, generate_series(0, %(g)s - 1) g""", p)
    step("NICs", """
        INSERT INTO inventory_nic (id, node_id, name, kind, link_bytes_per_s, first_seen,
            last_seen)
        SELECT (n - 1) * 5 + k + 1, n,
               CASE WHEN k < 4 THEN 'mlx5_' || k || ':1' ELSE 'eth0' END,
               CASE WHEN k < 4 THEN 'infiniband' ELSE 'ethernet' END,
               CASE WHEN k < 4 THEN 50e9 ELSE 3.125e9 END, %(t0)s, %(now)s
        FROM generate_series(1, %(n)s) n, generate_series(0, 4) k""", p)
    # Job (n, s): node n's job in slot s, id (n - 1) * slots + s + 1; the last slot runs.
    step("jobs", """
        INSERT INTO jobs_job (id, cluster_id, scheduler, external_id, "user", name, account,
            partition, state, started_at, ended_at, cpus, first_seen, last_seen)
        SELECT (n - 1) * %(slots)s + s + 1, 1, 'slurm', (900000 + (n - 1) * %(slots)s + s)::text,
               'user' || (n %% 40), 'train-' || (n %% 7), 'acct' || (n %% 9), 'gpu',
               CASE WHEN s = %(slots)s - 1 THEN 'running' ELSE 'ended' END,
               %(t0)s + s * %(slot)s,
               CASE WHEN s = %(slots)s - 1 THEN NULL ELSE %(t0)s + (s + 1) * %(slot)s END,
               96, %(t0)s + s * %(slot)s,
               LEAST(%(now)s, %(t0)s + (s + 1) * %(slot)s)
        FROM generate_series(1, %(n)s) n, generate_series(0, %(slots)s - 1) s""", p)
    step("allocations", """
        INSERT INTO jobs_jobgpu (job_id, gpu_id, first_seen, last_seen)
        SELECT j.id, (j.n - 1) * %(g)s + g + 1, j.started, j.seen
        FROM (SELECT id, (id - 1) / %(slots)s + 1 AS n, first_seen AS started,
                     last_seen AS seen FROM jobs_job) j, generate_series(0, %(g)s - 1) g""", p)
    step("a 4-node, 32-GPU job", """
        WITH j AS (
            INSERT INTO jobs_job (id, cluster_id, scheduler, external_id, "user", name,
                account, partition, state, started_at, cpus, first_seen, last_seen)
            VALUES (%(n)s * %(slots)s + 1, 1, 'slurm', '999999', 'user1', 'llama-70b-pretrain',
                    'acct1', 'gpu-long', 'running', %(now)s - interval '2 hours', 96,
                    %(now)s - interval '2 hours', %(now)s)
            RETURNING id)
        INSERT INTO jobs_jobgpu (job_id, gpu_id, first_seen, last_seen)
        SELECT j.id, g, %(now)s - interval '2 hours', %(now)s
        FROM j, generate_series(1, 4 * %(g)s) g""", p)
    step("efficiency", """
        INSERT INTO findings_jobefficiency (job_id, computed_at, window_start, window_end, gpus,
            gpu_hours_allocated, gpu_hours_used, gpu_hours_wasted, util_source, util_mean_pct,
            per_gpu, mem_peak_mib, mem_capacity_mib, energy_j, nic_util_mean_pct,
            nic_util_peak_pct, cpu_cores_mean, cpus_allocated, accum)
        SELECT id, %(now)s, first_seen, last_seen, 8, h * 8, h * 8 * u, h * 8 * (1 - u),
               'sm_active', u * 100, '{}', 60000, 81559, h * 8 * 2.2e6, 30, 70, 20, 96, '{}'
        FROM (SELECT id, first_seen, last_seen,
                     extract(epoch FROM last_seen - first_seen) / 3600 AS h,
                     ((id * 37) %% 100) / 100.0 AS u FROM jobs_job) j""", p)
    step("findings", """
        INSERT INTO findings_finding (kind, severity, state, job_id, node_id, window_start,
            window_end, first_seen, last_seen, evidence, wasted_gpu_hours, title, explanation,
            suggestion, emailed_severity)
        SELECT 'low_utilization', CASE WHEN j.id %% 3 = 0 THEN 'critical' ELSE 'warning' END,
               CASE WHEN j.state = 'running' THEN 'open' ELSE 'closed' END, j.id,
               (j.id - 1) / %(slots)s + 1, j.last_seen - interval '30 minutes', j.last_seen,
               j.first_seen, j.last_seen, '{"util_mean_pct": 12.0, "gpus": 8}',
               e.gpu_hours_wasted, 'Low GPU utilization: 12 %% on 8 GPUs',
               'The job''s GPUs averaged 12 %% utilization.', 'Request fewer GPUs.', ''
        FROM jobs_job j JOIN findings_jobefficiency e ON e.job_id = j.id
        WHERE j.id %% 5 = 0 AND j.external_id <> '999999'""", p)
    step("latest GPU samples", """
        INSERT INTO telemetry_gpulatest (gpu_id, ts, job_id, util_pct, sm_active_pct,
            mem_used_mib, power_w, temp_c)
        SELECT g.id, %(now)s, jg.job_id, (g.id * 53) %% 101, (g.id * 53) %% 101 * 0.8, 60000,
               400, 60
        FROM inventory_gpu g
        LEFT JOIN jobs_jobgpu jg ON jg.gpu_id = g.id
             AND jg.job_id IN (SELECT id FROM jobs_job WHERE state = 'running'
                               AND external_id <> '999999')""", p)
    step("latest NIC samples", """
        INSERT INTO telemetry_niclatest (nic_id, ts, rx_bytes_per_s, tx_bytes_per_s)
        SELECT id, %(now)s, 2e10, 1.9e10 FROM inventory_nic""", p)
    step("GPU samples", """
        INSERT INTO telemetry_gpusample (ts, gpu_id, job_id, util_pct, sm_active_pct,
            mem_used_mib, power_w, temp_c, sm_clock_mhz, nvlink_tx_bytes_per_s,
            nvlink_rx_bytes_per_s, energy_j)
        SELECT t, g, ((g - 1) / %(g)s) * %(slots)s
                     + LEAST(%(slots)s - 1, floor(extract(epoch FROM t - %(t0)s)
                                                  / extract(epoch FROM %(slot)s))::int) + 1,
               r * 100, r * 80, 60000, 100 + r * 550, 40 + r * 40, 1980, r * 2e11, r * 1.9e11,
               extract(epoch FROM t - %(t0)s) * 400
        FROM generate_series(%(t0)s, %(now)s - %(iv)s, %(iv)s) t,
             generate_series(1, %(n)s * %(g)s) g,
             -- varied per GPU and sample, as real data is (and as compressible)
             LATERAL (SELECT ((g * 7919 + extract(epoch FROM t)::bigint / 10 * 104729)
                              %% 1000) / 1000.0 AS r) x""", p)
    step("NIC samples", """
        INSERT INTO telemetry_nicsample (ts, nic_id, rx_bytes_per_s, tx_bytes_per_s)
        SELECT t, k, random() * 4e10, random() * 4e10
        FROM generate_series(%(t0)s, %(now)s - %(iv)s, %(iv)s) t,
             generate_series(1, %(n)s * 5) k""", p)
    step("job host samples", """
        INSERT INTO telemetry_jobsample (ts, job_id, node_id, cpu_cores_used, host_mem_used_bytes)
        SELECT t, (n - 1) * %(slots)s + LEAST(%(slots)s - 1,
                   floor(extract(epoch FROM t - %(t0)s) / extract(epoch FROM %(slot)s))::int) + 1,
               n, 10 + random() * 30, 2e11
        FROM generate_series(%(t0)s, %(now)s - %(iv)s, %(iv)s) t,
             generate_series(1, %(n)s) n""", p)
    # The history heatmap and the trends read the hourly rollups: a week of them for every
    # GPU before the raw hours (as compaction leaves them), and the seeded jobs' hours.
    hist = t0.replace(minute=0, second=0) - dt.timedelta(days=HISTORY_DAYS)
    from clusterui.telemetry.metrics import (
        GPU_ROLLUP_TABLES,
        JOB_ROLLUP_TABLES,
        NIC_ROLLUP_TABLES,
        NODE_ROLLUP_TABLES,
    )

    partitions.ensure_partitions({(hist + dt.timedelta(days=d)).date()
                                  for d in range(HISTORY_DAYS + 2)},
                                 tables=(GPU_ROLLUP_TABLES[3600], JOB_ROLLUP_TABLES[3600],
                                         NODE_ROLLUP_TABLES[3600]))
    p["hist"] = hist
    # Made as rows in a scratch table, then packed per (GPU, day) as compaction packs them
    # (``telemetry_gpurollup1hpack``, migration 0011).
    step("scratch table for the hourly GPU rollups", """
        CREATE TEMP TABLE hourly (bucket timestamptz, gpu_id int, n int, util_pct_avg float8,
            util_pct_max float8, util_pct_min float8, sm_active_pct_avg float8,
            sm_active_pct_max float8, sm_active_pct_min float8, power_w_avg float8,
            power_w_max float8, power_w_min float8, temp_c_avg float8, temp_c_max float8,
            temp_c_min float8, mem_used_mib_avg float8, mem_used_mib_max int,
            mem_used_mib_min int)""")
    step(f"hourly GPU rollups, {HISTORY_DAYS} days", """
        INSERT INTO hourly (bucket, gpu_id, n, util_pct_avg, util_pct_max,
            util_pct_min, sm_active_pct_avg, sm_active_pct_max, sm_active_pct_min,
            power_w_avg, power_w_max, power_w_min, temp_c_avg, temp_c_max, temp_c_min,
            mem_used_mib_avg, mem_used_mib_max, mem_used_mib_min)
        SELECT b, g, 360, r * 100, LEAST(100, r * 100 + 20), GREATEST(0, r * 100 - 20),
               r * 80, LEAST(100, r * 80 + 20), GREATEST(0, r * 80 - 20),
               100 + r * 550, 100 + r * 600, 90 + r * 500, 40 + r * 40, 45 + r * 40,
               35 + r * 40, 60000, 61000, 59000
        FROM generate_series(%(hist)s, %(t0)s - interval '1 hour', interval '1 hour') b,
             generate_series(1, %(n)s * %(g)s) g,
             LATERAL (SELECT ((g * 7919 + extract(epoch FROM b)::bigint / 3600 * 104729)
                              %% 1000) / 1000.0 AS r) x""", p)
    step("hourly node rollups (as compaction writes them)", """
        INSERT INTO telemetry_noderollup1h (node_id, bucket, gpus, util_pct_sum, util_pct_n,
            sm_active_pct_sum, sm_active_pct_n, power_w_sum, power_w_n)
        SELECT g.node_id, r.bucket, count(*), sum(r.util_pct_avg * r.n), sum(r.n),
               sum(r.sm_active_pct_avg * r.n), sum(r.n), sum(r.power_w_avg * r.n), sum(r.n)
        FROM hourly r JOIN inventory_gpu g ON g.id = r.gpu_id
        GROUP BY 1, 2""", p)
    pack_hourly()
    partitions.ensure_partitions({(t0 - dt.timedelta(days=d)).date() for d in range(3)},
                                 tables=(NODE_ROLLUP_TABLES[300],))
    step("5-minute node rollups, the day before the raw hours", """
        INSERT INTO telemetry_noderollup5m (node_id, bucket, gpus, util_pct_sum, util_pct_n,
            sm_active_pct_sum, sm_active_pct_n, power_w_sum, power_w_n)
        SELECT n, b, %(g)s, r * 100 * 240, 240, r * 80 * 240, 240, (100 + r * 550) * 240, 240
        FROM generate_series(date_trunc('hour', %(t0)s) - interval '1 day',
                             date_trunc('hour', %(t0)s) - interval '5 minutes',
                             interval '5 minutes') b,
             generate_series(1, %(n)s) n,
             LATERAL (SELECT ((n * 7919 + extract(epoch FROM b)::bigint / 300 * 104729)
                              %% 1000) / 1000.0 AS r) x""", p)
    partitions.ensure_partitions({(t0 - dt.timedelta(days=d)).date() for d in range(3)},
                                 tables=(NIC_ROLLUP_TABLES[300],))
    step("5-minute NIC rollups, the day before the raw hours", """
        INSERT INTO telemetry_nicrollup5m (nic_id, bucket, n, rx_bytes_per_s_avg,
            rx_bytes_per_s_max, rx_bytes_per_s_min, tx_bytes_per_s_avg, tx_bytes_per_s_max,
            tx_bytes_per_s_min)
        SELECT k, b, 30, r * 4e10, r * 4.5e10, r * 3e10, r * 3.8e10, r * 4e10, r * 3e10
        FROM generate_series(date_trunc('hour', %(t0)s) - interval '1 day',
                             date_trunc('hour', %(t0)s) - interval '5 minutes',
                             interval '5 minutes') b,
             generate_series(1, %(n)s * 5) k,
             LATERAL (SELECT ((k * 7919 + extract(epoch FROM b)::bigint / 300 * 104729)
                              %% 1000) / 1000.0 AS r) x""", p)
    step("the nodes' NIC traffic in their 5-minute rollups (as compaction writes it)", """
        INSERT INTO telemetry_noderollup5m (node_id, bucket, gpus, nics, nic_bytes_per_s)
        SELECT k.node_id, r.bucket, 0, count(*),
               sum(r.rx_bytes_per_s_avg + r.tx_bytes_per_s_avg)
        FROM telemetry_nicrollup5m r JOIN inventory_nic k ON k.id = r.nic_id
        GROUP BY 1, 2
        ON CONFLICT (bucket, node_id) DO UPDATE SET nics = EXCLUDED.nics,
            nic_bytes_per_s = EXCLUDED.nic_bytes_per_s""", p)
    step("... and their hourly means", """
        INSERT INTO telemetry_noderollup1h (node_id, bucket, gpus, nics, nic_bytes_per_s)
        SELECT node_id, date_trunc('hour', bucket, 'UTC'), 0, max(nics), avg(nic_bytes_per_s)
        FROM telemetry_noderollup5m WHERE nic_bytes_per_s IS NOT NULL GROUP BY 1, 2
        ON CONFLICT (bucket, node_id) DO UPDATE SET nics = EXCLUDED.nics,
            nic_bytes_per_s = EXCLUDED.nic_bytes_per_s""", p)
    step("hourly job rollups", """
        INSERT INTO telemetry_jobrollup1h (job_id, bucket, gpus, samples, gpu_s, util_pct,
            sm_active_pct, busy_pct, power_w, mem_used_max_mib)
        SELECT j.id, b, 8, 8 * 360, 8 * 3600, r * 100, r * 80, r * 80, 8 * (100 + r * 550),
               60000
        FROM jobs_job j,
             generate_series(date_trunc('hour', j.first_seen), j.last_seen, interval '1 hour') b,
             LATERAL (SELECT ((j.id * 37) %% 100) / 100.0 AS r) x""", p)
    step("Xid events", """
        INSERT INTO telemetry_gpuevent (gpu_id, ts, kind, code, message)
        SELECT g, %(now)s - (g %% 50) * interval '1 minute', 'xid', 79,
               'GPU has fallen off the bus'
        FROM generate_series(1, %(n)s * %(g)s, 97) g""", p)
    with connection.cursor() as cur:
        for table in ("inventory_cluster", "inventory_node", "inventory_gpu", "inventory_nic",
                      "jobs_job", "jobs_jobgpu", "findings_finding"):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))")
        began = time.perf_counter()
        cur.execute("ANALYZE")
        print(f"  ANALYZE in {time.perf_counter() - began:.1f} s", flush=True)


def timed(client, path: str, runs: int) -> tuple[list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(path)  # warm: first-request imports and caches
    assert response.status_code == 200, f"{path}: HTTP {response.status_code}"
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        client.get(path)
        times.append((time.perf_counter() - began) * 1000)
    with CaptureQueriesContext(connection) as queries:
        client.get(path)
    return times, len(queries)


def report(name: str, times: list[float], queries: int, size: int, gzipped: int) -> None:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(f"{name:<40} median {statistics.median(times):6.1f} ms   p95 {p95:6.1f} ms   "
          f"{queries:2d} queries   {size / 1024:4.0f} KiB ({gzipped / 1024:3.0f} KiB gzipped)",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--keep", action="store_true",
                        help="reuse the seeded database when it is there")
    args = parser.parse_args()

    import django

    django.setup()
    if not (args.keep and seeded()):
        create_database()
        began = time.perf_counter()
        seed(args.nodes, args.hours)
        print(f"seeded in {time.perf_counter() - began:.0f} s\n", flush=True)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from clusterui.jobs.models import Job

    User = get_user_model()
    staff = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})[0]
    researcher = User.objects.get_or_create(username="user7")[0]
    with connection.cursor() as cur:
        # The cluster is live: every node reported a moment ago (as ingest keeps it).
        cur.execute("UPDATE inventory_node SET last_seen = now()")
        cur.execute("UPDATE telemetry_gpulatest SET ts = now()")
        cur.execute("SELECT count(*) FROM telemetry_gpusample")
        rows = cur.fetchone()[0]
    print(f"{Job.objects.count():,} jobs, {rows:,} GPU sample rows\n")

    middle = Job.objects.filter(allocations__gpu__node_id=args.nodes // 2, state="running")
    node_job = middle.exclude(external_id="999999").first()
    big_job = Job.objects.get(external_id="999999")
    pages = [
        ("overview (staff)", "/", staff),
        ("overview (researcher)", "/", researcher),
        ("job page: 8 GPUs, whole job", f"/jobs/{node_job.pk}/", staff),
        ("job page: 4 nodes x 8 GPUs, whole job", f"/jobs/{big_job.pk}/", staff),
        ("node page: last 1 h", f"/nodes/{args.nodes // 2}/", staff),
        ("node page: last 24 h", f"/nodes/{args.nodes // 2}/?range=24h", staff),
        ("jobs list: most wasted first", "/jobs/?ordering=-wasted", staff),
        ("jobs list: search", "/jobs/?q=train-3&state=running", staff),
        ("findings list", "/findings/", staff),
        ("users page: last 7 d", "/users/", staff),
        ("nodes list", "/nodes/", staff),
        ("cluster history: utilization, 7 d", "/nodes/history/?range=7d", staff),
        ("cluster history: power, 24 h", "/nodes/history/?range=24h&metric=power", staff),
        ("cluster history: network, 24 h", "/nodes/history/?range=24h&metric=nic", staff),
        ("cluster history: network, 7 d", "/nodes/history/?range=7d&metric=nic", staff),
        ("trends: by account, 12 weeks", "/trends/?by=account&period=12w", staff),
        ("trends: by user, 30 days (researcher)", "/trends/?by=user&period=30d", researcher),
    ]
    clients = {}
    for name, path, user in pages:
        client = clients.get(user.pk)
        if client is None:
            client = clients[user.pk] = Client()
            client.force_login(user)
        times, queries = timed(client, path, args.runs)
        size = len(client.get(path).content)
        gzipped = len(client.get(path, headers={"accept-encoding": "gzip"}).content)
        report(name, times, queries, size, gzipped)


if __name__ == "__main__":
    main()
