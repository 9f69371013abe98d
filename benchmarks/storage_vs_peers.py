#!/usr/bin/env python
"""Storage side by side: ClusterUI, Prometheus' TSDB and VictoriaMetrics, from the same
GPU samples, each read back and checked for exactness.

1. A realistic, simulated mix of GPUs (``benchmarks/peers/workload.py``: busy, idle, spiky
   and communication-bound nodes, noisy floats at the collector's own resolution; numpy,
   seeded), 100 GPUs x 12 h at 10 s by default: 432,000 GPU samples of 15 values. With
   ``--nics-per-node N``, each node also has N InfiniBand ports sampled with its GPUs (two
   byte rates each, and the fabric fields the collector sends; a DGX H100 has 8 compute
   ports for its 8 GPUs, many clusters one port per two GPUs): every figure is still given
   per GPU sample, the ports' share included, and the ports' own cost per port sample.
2. ClusterUI: contract-1 batches (one per node and 10 s tick, as the collector sends them)
   are queued in Redis and stored by the bulk consumer (``manage.py ingest_worker
   --exit-when-empty``) into a scratch database; then the product's own compaction
   (``compaction.compact``, as beat runs it) and its vacuum task
   (``clusterui.telemetry.vacuum``: it vacuums the tables due only where PostgreSQL's
   autovacuum is off; whether it is on is printed), never a manual VACUUM. Every
   ``telemetry_*`` and ``fabric_*`` relation is measured (``pg_total_relation_size``: heap, TOAST, indexes,
   each partition summed into its table), so a new or repacked table is counted without a
   change here. Every value is read back through ``packed.raw_samples`` and compared with
   what went in: bit for bit, or within the metric's stated step (``codec.PRECISION``);
   the ports' byte rates through ``telemetry_nic_samples`` (hot and packed).
3. Prometheus (Debian's 2.42): the same samples as OpenMetrics text, blocks by ``promtool
   tsdb create-blocks-from openmetrics``, the block directory measured, read back with
   ``promtool tsdb dump``.
4. VictoriaMetrics (Debian's 1.79): started on a scratch directory, the same samples
   imported (``/api/v1/import/prometheus``), flushed and force-merged, stopped, its
   ``data`` and ``indexdb`` measured, read back with ``/api/v1/export``.

The peers are installed with apt-get where missing and possible (``scripts/devstack.py``);
where not, their rows say so and ClusterUI's figures still print. Ingest speeds (GPU
samples per second into each store, this run, this machine) are printed too; the machine
may be shared, so compare them within one run. Exit status 1 when ClusterUI reads back
anything but what went in.

    python benchmarks/storage_vs_peers.py [--small] [--nodes 25] [--gpus-per-node 4]
                                          [--hours 12] [--nics-per-node 0] [--no-peers]

It uses its own database (``clusterui_bench_peers``, or ``STORAGE_PEERS_BENCH_DB``) and
Redis database 10 (``STORAGE_PEERS_BENCH_REDIS_DB``), both emptied first.
"""

import argparse
import datetime as dt
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
DB_NAME = os.environ.get("STORAGE_PEERS_BENCH_DB", "clusterui_bench_peers")
DB = BASE_DB.rsplit("/", 1)[0] + "/" + DB_NAME
BROKER = (os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
          + "/" + os.environ.get("STORAGE_PEERS_BENCH_REDIS_DB", "10"))
ADMIN = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"

# Every telemetry and fabric relation with storage (tables, partitions, materialised views),
# summed into its partitioned root: heap, TOAST and indexes (pg_total_relation_size). The
# fabric tables hold what ClusterUI keeps of the ports' fabric fields.
_SIZES_SQL = r"""
SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text,
       sum(pg_total_relation_size(c.oid))::bigint, count(*)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')
  AND (c.relname LIKE 'telemetry\_%' OR c.relname LIKE 'fabric\_%')
GROUP BY 1 ORDER BY 2 DESC
"""


def table_sizes(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {name: size for name, size, _ in conn.execute(_SIZES_SQL).fetchall()}


def live_sizes(url: str, tables) -> dict[str, int]:
    """Each table's live rows (pg_column_size of every row, its blob included) plus its
    indexes: what a table rewritten in place (a day's 1-hour blob, once per packed hour)
    keeps once the vacuum task has made its dead versions reusable."""
    import psycopg

    from benchmarks.storage import sizes  # (heap, TOAST, indexes) over the partitions

    out = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for table in tables:
            rows = conn.execute(
                f"SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM {table} r").fetchone()[0]
            out[table] = int(rows) + sizes(conn, table)[2]
    return out


def steady_state(sizes: dict[str, int], live: dict[str, int], samples: int, hours: float,
                 settings) -> list[tuple[str, float, float]]:
    """(table, bytes per GPU sample measured, days kept) for every table, at the default
    retentions as ``clusterui.telemetry.tasks.maintain_partitions`` drops partitions: a
    table kept D days costs its bytes per sample x D / RAW_RETENTION_DAYS per sample the
    raw tier keeps. A table whose size does not grow with time (the latest values, the
    hot table emptied by compaction, the due marks) costs its size once over the raw
    retention's samples."""
    from clusterui.telemetry.metrics import (
        GPU_CHUNK_TABLE,
        GPU_ROLLUP_TABLES,
        JOB_ROLLUP_TABLES,
        NIC_PACK_TABLE,
        NIC_ROLLUP_TABLES,
        NODE_ROLLUP_TABLES,
    )

    raw = settings.RAW_RETENTION_DAYS
    # The packed NIC samples and the error increases are kept as long as the raw GPU tier
    # (``maintain_partitions``; ``fabric.health`` deletes errors older than that).
    keep = {GPU_CHUNK_TABLE: raw, NIC_PACK_TABLE: raw, "fabric_porterrors": raw}
    for width, days in ((60, settings.ROLLUP_1M_RETENTION_DAYS),
                        (300, settings.ROLLUP_5M_RETENTION_DAYS),
                        (3600, settings.ROLLUP_1H_RETENTION_DAYS)):
        for tables in (GPU_ROLLUP_TABLES, JOB_ROLLUP_TABLES, NIC_ROLLUP_TABLES,
                       NODE_ROLLUP_TABLES):
            if width in tables:
                keep[tables[width]] = days
    out = []
    for table, size in sizes.items():
        size = live.get(table, size)
        if table in keep:
            out.append((table, size / samples, keep[table]))
        else:  # fixed size: spread over the raw retention's samples (days = hours / 24)
            out.append((table, size / samples, hours / 24))
    return sorted(out, key=lambda t: -t[1] * t[2])


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def fresh_database() -> None:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT,
                   env=os.environ, check=True)


def ingest(w) -> tuple[int, float]:
    """Queue every batch, then drain the queue with one bulk consumer process; returns
    (batches, seconds the consumer ran, its start included)."""
    import redis

    from benchmarks.peers.workload import batches
    from clusterui.celery import app

    redis.Redis.from_url(BROKER).flushdb()
    from django.conf import settings

    count = 0
    with app.producer_or_acquire() as producer:
        for batch in batches(w):
            app.send_task("clusterui.ingest", args=[batch], queue=settings.INGEST_QUEUE,
                          producer=producer)
            count += 1
    began = time.perf_counter()
    subprocess.run([sys.executable, "manage.py", "ingest_worker", "--exit-when-empty"],
                   cwd=ROOT, env=os.environ, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return count, time.perf_counter() - began


def clusterui_read_back(w):
    """Every sample through ``packed.raw_samples``: (ReadBack, samples whose job differs)."""
    import numpy as np

    from clusterui.inventory.models import Gpu
    from clusterui.jobs.models import Job
    from clusterui.telemetry import packed
    from clusterui.telemetry.metrics import GPU_METRIC_NAMES

    gpus = {g.id: (g.node.name, str(g.index)) for g in Gpu.objects.select_related("node")}
    jobs = dict(Job.objects.values_list("external_id", "id"))
    start = packed.ms_to_dt(int(w.ts_ms.min()))
    end = packed.ms_to_dt(int(w.ts_ms.max()) + 1)
    parts: dict = {}
    for gpu_id, block in packed.raw_samples(list(gpus), start, end):
        parts.setdefault(gpus[gpu_id], []).append(block)
    got = {m: {} for m in GPU_METRIC_NAMES}
    wrong_job = 0
    names = {w.node_name(i): i for i in range(w.nodes)}
    for key, blocks in parts.items():
        ts = np.concatenate([b.ts for b in blocks])
        job = np.concatenate([b.job for b in blocks])
        node = names.get(key[0])
        want = 0 if node is None or w.job_id(node) is None else jobs[w.job_id(node)]
        wrong_job += int((job != want).sum())
        for m in GPU_METRIC_NAMES:
            null = np.concatenate([b.nulls[m] for b in blocks])
            v = np.concatenate([b.values[m] for b in blocks]).astype(np.float64)
            got[m][key] = (ts[~null], v[~null])
    if w.nics_per_node:
        got.update(nic_read_back())
    return got, wrong_job


def nic_read_back():
    """Every port's byte rates as stored, hot and packed (``telemetry_nic_samples``)."""
    import numpy as np
    from django.db import connection

    from benchmarks.peers.exposition import NIC_PREFIX, series_key
    from clusterui.telemetry.metrics import NIC_METRIC_NAMES

    rows: dict = {}
    with connection.cursor() as cur:
        cur.execute(f"""
            SELECT node.name, nic.name, (extract(epoch FROM s.ts) * 1000)::int8,
                   {", ".join(f"s.{m}" for m in NIC_METRIC_NAMES)}
            FROM telemetry_nic_samples(ARRAY(SELECT id FROM inventory_nic)::int[],
                                       '-infinity', 'infinity') s
            JOIN inventory_nic nic ON nic.id = s.nic_id
            JOIN inventory_node node ON node.id = nic.node_id ORDER BY 1, 2, 3""")
        for node, nic, ts, *values in cur.fetchall():
            rows.setdefault(series_key(node, nic), []).append((ts, *values))
    got = {NIC_PREFIX + m: {} for m in NIC_METRIC_NAMES}
    for key, series in rows.items():
        ts = np.array([r[0] for r in series], np.int64)
        for i, m in enumerate(NIC_METRIC_NAMES):
            v = np.array([np.nan if r[1 + i] is None else r[1 + i] for r in series])
            got[NIC_PREFIX + m][key] = (ts[~np.isnan(v)], v[~np.isnan(v)])
    return got


def stated_steps() -> dict[str, float]:
    """Half the codec's step for each quantised metric: the most its rounding may move a
    value that is finer than the step (none of the workload's is)."""
    from clusterui.telemetry import codec

    return {m: 0.5 / scale for m, (kind, scale) in codec.PRECISION.items() if kind == "scale"}


def run_peers(w, work: Path) -> list[dict]:
    """Each peer's row: label, bytes, seconds, read-back summary, ok; or why it is missing."""
    from benchmarks.peers import exposition, prometheus, victoriametrics

    sys.path.insert(0, str(ROOT / "scripts"))
    import devstack

    try:
        devstack.ensure_peer_stores()
    except SystemExit as exc:
        print(f"peers not measured: {exc}")
    rows = []
    for label, module, binary in (
            ("Prometheus {v} TSDB blocks (promtool create-blocks)", prometheus,
             prometheus.PROMTOOL),
            ("VictoriaMetrics {v} after force merge", victoriametrics,
             victoriametrics.BINARY)):
        if not os.path.exists(binary):
            rows.append({"label": label.format(v="?"), "missing": f"{binary} not installed"})
            continue
        name = label.format(v=module.version())
        try:
            built = module.build(w, work)
            checks = exposition.check(w, module.read_back(built["dir"]))
        except (OSError, RuntimeError, ValueError, subprocess.CalledProcessError) as exc:
            # One peer failing (a port, a disk, a changed output format) loses only its row.
            rows.append({"label": name, "missing": f"failed: {exc}"})
            continue
        rows.append({"label": name, "bytes": built["bytes"], "seconds": built["seconds"],
                     "check": exposition.summary(checks),
                     "exact": all(c.exact for c in checks), "extra": built})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=25)
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--hours", type=float, default=12.0)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--nics-per-node", type=int, default=0,
                        help="InfiniBand ports per node, sampled with its GPUs (default none)")
    parser.add_argument("--small", action="store_true",
                        help="a quick run: 4 nodes x 2 GPUs x 2 h (5,760 GPU samples)")
    parser.add_argument("--no-peers", action="store_true", help="ClusterUI only")
    args = parser.parse_args()
    if args.small:
        args.nodes, args.gpus_per_node, args.hours = 4, 2, 2.0
    os.environ.update(DATABASE_URL=DB, CELERY_BROKER_URL=BROKER, DEBUG="1",
                      DJANGO_SETTINGS_MODULE="clusterui.settings", LOG_LEVEL="WARNING")
    load_before = load_average()
    fresh_database()
    import django

    django.setup()
    logging.getLogger("clusterui").setLevel(logging.WARNING)
    from django.conf import settings
    from django.utils import timezone

    from benchmarks.peers import exposition
    from benchmarks.peers.workload import generate
    from clusterui.jobs.tasks import close_stale_jobs
    from clusterui.telemetry import compaction, vacuum
    from clusterui.telemetry.metrics import GPU_CHUNK_TABLE, NIC_PACK_TABLE

    # The window ends at midnight two days ago: every hour of it is closed, inside the raw
    # retention, and its jobs end before the detectors' final lookback (nothing holds
    # compaction back).
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    end = today - dt.timedelta(days=2)
    start = end - dt.timedelta(hours=args.hours)
    w = generate(args.nodes, args.gpus_per_node, args.hours, args.interval,
                 round(start.timestamp() * 1000), seed=args.seed,
                 nics_per_node=args.nics_per_node)
    url = DB.replace("postgres://", "postgresql://", 1)
    print(f"simulated workload: {w.nodes} nodes x {w.gpus_per_node} GPUs = {w.gpus} GPUs "
          f"({', '.join(f'{w.profiles.count(p)} {p}' for p in dict.fromkeys(w.profiles))} "
          f"nodes), {args.hours:g} h at {args.interval:g} s: {w.samples:,} GPU samples of "
          f"15 values, seed {args.seed}")
    if w.nics_per_node:
        print(f"  and {w.nics_per_node} InfiniBand ports per node: {w.nic_samples:,} port "
              "samples of 2 byte rates and the fabric fields")
    print(f"load average before: {load_before} (this machine may be shared: figures of "
          "speed vary with it, sizes do not)")

    n_batches, ingest_s = ingest(w)
    close_stale_jobs(timezone.now() + dt.timedelta(seconds=settings.JOB_STALE_AFTER_S + 1))
    after_ingest = table_sizes(url)
    began = time.perf_counter()
    result = compaction.compact(timezone.now(), budget_s=10**9)
    compact_s = time.perf_counter() - began
    if result.rows != w.samples or result.nic_rows != w.nic_samples or result.held_back:
        print(f"compaction did not pack every sample: {result}")
        return 1
    after_compaction = table_sizes(url)
    # The beat task's work (``telemetry.tasks.vacuum_tables``), as it runs after compaction.
    vacuumed = vacuum.vacuum_due(budget_s=settings.CELERY_TASK_TIME_LIMIT * 0.5)
    after_vacuum = table_sizes(url)
    got, wrong_job = clusterui_read_back(w)
    checks = exposition.check(w, got, stated_steps())
    clusterui_ok = all(c.ok for c in checks) and not wrong_job

    peers = []
    if not args.no_peers:
        with tempfile.TemporaryDirectory(prefix="clusterui-peers-") as work:
            peers = run_peers(w, Path(work))

    per = w.samples
    print()
    print("ClusterUI, every telemetry_* and fabric_* table (heap + TOAST + indexes, partitions summed), "
          "bytes per GPU sample")
    if vacuumed.skipped_autovacuum_on:
        print("  autovacuum is on: the vacuum task leaves the tables to PostgreSQL")
    else:
        print(f"  autovacuum is off: the vacuum task vacuumed {len(vacuumed.tables)} tables "
              f"({sum(d for _, d in vacuumed.tables):,} dead rows)")
    print(f"  {'table':28} {'after ingest':>13} {'compacted':>10} {'+ vacuum task':>14}")
    for table in sorted(set(after_ingest) | set(after_vacuum),
                        key=lambda t: -after_vacuum.get(t, 0)):
        sizes = [s.get(table, 0) / per for s in (after_ingest, after_compaction, after_vacuum)]
        if any(sizes):
            print(f"  {table:28} {sizes[0]:13.2f} {sizes[1]:10.2f} {sizes[2]:14.2f}")
    totals = [sum(s.values()) / per for s in (after_ingest, after_compaction, after_vacuum)]
    print(f"  {'all telemetry tables':28} {totals[0]:13.2f} {totals[1]:10.2f} {totals[2]:14.2f}")
    if w.nics_per_node:
        ports = [t for t in after_vacuum if t.startswith(("telemetry_nic", "fabric_"))]
        print(f"  of which the ports' tables ({', '.join(sorted(ports))}): "
              f"{sum(after_vacuum[t] for t in ports) / w.nic_samples:.1f} B per port sample, "
              f"{sum(after_vacuum[t] for t in ports) / per:.1f} per GPU sample")

    from clusterui.telemetry.metrics import GPU_ROLLUP_TABLES

    live = live_sizes(url, [GPU_ROLLUP_TABLES[3600]])
    steady = steady_state(after_vacuum, live, per, args.hours, settings)
    raw_days = settings.RAW_RETENTION_DAYS
    steady_total = sum(p * d / raw_days for _, p, d in steady)
    print()
    print(f"ClusterUI at steady state, the default retentions (per GPU sample of the {raw_days} "
          "days the raw tier keeps: bytes per sample x days kept / raw days; the 1-hour day "
          "blobs at their live size)")
    for table, p, d in steady:
        if p * d / raw_days >= 0.005:
            print(f"  {table:28} {p * d / raw_days:8.2f}  ({p:.2f} B x {d:g} d / {raw_days} d)")
    print(f"  {'all telemetry tables':28} {steady_total:8.2f}")

    read = exposition.summary(checks) if clusterui_ok else "FAILED (see below)"
    raw_tier = [GPU_CHUNK_TABLE] + ([NIC_PACK_TABLE] if w.nics_per_node else [])
    rows = [(f"ClusterUI packed tier ({GPU_CHUNK_TABLE})" if len(raw_tier) == 1 else
             f"ClusterUI packed tiers ({GPU_CHUNK_TABLE} + {NIC_PACK_TABLE})",
             sum(after_vacuum.get(t, 0) for t in raw_tier), read),
            ("ClusterUI all telemetry tables, after the vacuum task",
             sum(after_vacuum.values()), "(the packed tier's samples, + rollups)"),
            ("ClusterUI all telemetry tables, compacted, not vacuumed",
             sum(after_compaction.values()), "(the same, before the vacuum task)"),
            ("ClusterUI all tables, steady state at default retentions",
             steady_total * per, "(above: rollups kept longer than the raw tier count more)")]
    rows += [(p["label"], p["bytes"], p["check"]) for p in peers if "bytes" in p]
    print()
    print(f"storage side by side, the same {w.samples:,} GPU samples "
          f"({w.gpus} GPUs x {args.hours:g} h at {args.interval:g} s, 15 values each)"
          + (f" and {w.nic_samples:,} port samples (2 byte rates each), per GPU sample"
             if w.nics_per_node else ""))
    print(f"  {'store':58} {'B/GPU-sample':>12}  read back")
    for label, size, how in sorted(rows, key=lambda r: r[1]):
        print(f"  {label:58} {size / per:12.1f}  {how}")
    for p in peers:
        if "extra" in p:
            print(f"  {p['label']}: " + ", ".join(
                f"{name} {size / per:.1f}" for name, size in p["extra"]["parts"].items()))
        else:
            print(f"  {p['label']}: not measured ({p['missing']})")
    print()
    print("exactness, ClusterUI (every value through packed.raw_samples against what went in"
          + ("; the ports' through telemetry_nic_samples)" if w.nics_per_node else ")"))
    for c in checks:
        kind = "bit for bit" if c.exact else (
            f"{c.differ:,} within the stated step (max {c.max_error:.3g})" if c.ok
            else "WRONG")
        print(f"  {c.metric:22}: {c.expected:9,} values, {kind}"
              + (f", {c.missing:,} missing" if c.missing else "")
              + (f", {c.extra:,} extra" if c.extra else ""))
    print(f"  {'job attribution':22}: {w.samples:9,} samples, "
          + ("every one right" if not wrong_job else f"{wrong_job:,} WRONG"))
    print(f"  ClusterUI: {exposition.summary(checks) if clusterui_ok else 'FAILED'}")
    for p in peers:
        if "check" in p:
            print(f"  {p['label']}: {p['check']}")
    print()
    print("ingest, GPU samples per second into each store (this run, this machine)")
    print(f"  ClusterUI bulk consumer, {n_batches:,} node batches via Redis, one process "
          f"(its start included): {w.samples / ingest_s:10,.0f}  ({ingest_s:.1f} s)")
    print(f"  ClusterUI compaction (hot rows into chunks and rollups, one run): "
          f"{w.samples / compact_s:10,.0f}  ({compact_s:.1f} s)")
    for p in peers:
        if "seconds" in p:
            blocks = p["extra"].get("blocks")
            print(f"  {p['label']}: {w.samples / p['seconds']:10,.0f}  "
                  f"({p['seconds']:.1f} s" + (f", {blocks} blocks)" if blocks else ")"))
            print(f"    ClusterUI's speed / this peer's: {p['seconds'] / ingest_s:.2f}")
    print(f"load average after: {load_average()}")
    from django.db import connections

    connections.close_all()
    return 0 if clusterui_ok else 1


def drop_database() -> None:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        drop_database()
