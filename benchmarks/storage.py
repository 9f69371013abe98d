#!/usr/bin/env python
"""Storage per GPU sample: the hot table, the packed hour chunks and the rollups.

A simulated cluster (``collectors/sim``: the real collector code on simulated GPUs, jobs
of every scenario coming and going, idle GPUs between them) runs for one day at 10 s
sampling (16 GPUs by default: the figures are per sample and per (GPU, hour) chunk, so more
GPUs change them little and the simulator takes about 10 s per GPU-day on 2 cores); its batches go through the real ingest writer into a scratch database. Then:

1. the hot tier (``telemetry_gpusample``): heap and btree bytes per GPU sample;
2. compaction (``clusterui.telemetry.compaction``) packs the whole day into (GPU, hour)
   chunks and rollups, as beat does once each hour closed ``RAW_HOT_MINUTES`` ago, and
   truncates the day's hot partition; the hot table's size before and after that run;
3. the packed tier (``telemetry_gpuchunk``): heap + TOAST + indexes per GPU sample, and the
   rollups' bytes (per GPU sample, and per row: a packed rollup's row is a (GPU, hour) or
   (GPU, day) blob);
4. every GPU telemetry table at steady state at the default retentions: its bytes per
   sample x the days it is kept / ``RAW_RETENTION_DAYS``.

All sizes are PostgreSQL's own (``pg_relation_size``/``pg_table_size``/``pg_indexes_size``),
summed over the partitions, as the product leaves them: after ingest, compaction and the
product's own vacuum task (``clusterui.telemetry.vacuum``, which vacuums the tables due
only where PostgreSQL's autovacuum is off; whether it is on is printed), never a manual
VACUUM.

    python benchmarks/storage.py [--nodes 2] [--gpus-per-node 8] [--hours 24]
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
BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
# The scratch database (dropped and made again): STORAGE_BENCH_DB names another, so that
# two runs side by side (two worktrees) do not drop each other's.
DB_NAME = os.environ.get("STORAGE_BENCH_DB", "clusterui_bench_storage")
DB = BASE_DB.rsplit("/", 1)[0] + "/" + DB_NAME


def sizes(conn, table: str) -> tuple[int, int, int]:
    """(main heap, TOAST + free-space and visibility maps, indexes) of a partitioned table."""
    return conn.execute(
        """
        SELECT coalesce(sum(pg_relation_size(c.oid)), 0)::bigint,
               coalesce(sum(pg_table_size(c.oid) - pg_relation_size(c.oid)), 0)::bigint,
               coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s
        """, [table]).fetchone()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args()
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    os.environ.update({"DATABASE_URL": DB, "DEBUG": "1",
                       "DJANGO_SETTINGS_MODULE": "clusterui.settings"})
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT,
                   env=os.environ, check=True)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    logging.getLogger("collectors").setLevel(logging.WARNING)
    logging.getLogger("clusterui").setLevel(logging.WARNING)
    from django.conf import settings
    from django.utils import timezone

    from clusterui.ingest.simulate import simulated_cluster
    from clusterui.jobs.tasks import close_stale_jobs
    from clusterui.telemetry import codec, compaction, vacuum
    from clusterui.telemetry.metrics import (
        GPU_CHUNK_TABLE,
        GPU_ROLLUP_TABLES,
        GPU_SAMPLE_TABLE,
        JOB_ROLLUP_TABLES,
        NIC_PACK_TABLE,
        NIC_ROLLUP_TABLES,
        NIC_SAMPLE_TABLE,
        NODE_ROLLUP_TABLES,
    )

    # A whole day (midnight to midnight) three days ago: every hour of it is closed, and
    # the jobs it leaves running end long before the detectors' final lookback, so nothing
    # holds compaction back.
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    # The simulator samples in (end - hours, end]: the day's last sample is 23:59:50.
    end = today - dt.timedelta(days=2, seconds=1)
    began = time.perf_counter()
    # The simulated collectors' spool in memory where there is a tmpfs: on a disk mounted
    # with "discard" (this CI machine's), every spooled batch's unlink waits for the device,
    # which is the disk's time, not the storage this measures.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="clusterui-bench-storage-", dir=shm) as root:
        _, counts = simulated_cluster(nodes=args.nodes, gpus=args.gpus_per_node,
                                      hours=args.hours, end=end.timestamp(), seed=8,
                                      interval=args.interval, cluster="bench", root_dir=root)
    sim_s = time.perf_counter() - began
    # Jobs end by arrival time (JOB_STALE_AFTER_S without a report), and the whole day
    # arrived just now: end the jobs it leaves running as beat does once that has passed,
    # or the detectors, never run here, would hold compaction back from their samples.
    close_stale_jobs(timezone.now() + dt.timedelta(seconds=settings.JOB_STALE_AFTER_S + 1))
    url = DB.replace("postgres://", "postgresql://", 1)
    gpus = args.nodes * args.gpus_per_node
    with psycopg.connect(url, autocommit=True) as conn:
        autovacuum = conn.execute("SHOW autovacuum").fetchone()[0]
        samples = conn.execute(f"SELECT count(*) FROM {GPU_SAMPLE_TABLE}").fetchone()[0]
        null_share = conn.execute(
            f"SELECT avg((sm_active_pct IS NULL)::int) FROM {GPU_SAMPLE_TABLE}").fetchone()[0]
        hot = sizes(conn, GPU_SAMPLE_TABLE)
    print(f"a simulated day: {args.nodes} nodes x {args.gpus_per_node} GPUs = {gpus} GPUs, "
          f"{args.hours:g} h at {args.interval:g} s: {samples:,} GPU samples "
          f"({counts['batches']:,} batches through the ingest writer, {sim_s:.0f} s; "
          f"{float(null_share):.0%} of samples without GPM metrics)")
    print(f"sizes as ingest, compaction and the product's vacuum task leave them "
          f"(autovacuum {autovacuum})")
    print()
    print("hot tier, telemetry_gpusample (a row per sample, 1 btree (gpu_id, ts))")
    print(f"  heap                 : {hot[0] / samples:7.1f} bytes per GPU sample")
    print(f"  TOAST, maps          : {hot[1] / samples:7.1f}")
    print(f"  indexes              : {hot[2] / samples:7.1f}")
    print(f"  total                : {sum(hot) / samples:7.1f} bytes per GPU sample")

    began = time.perf_counter()
    result = compaction.compact(timezone.now(), budget_s=10**9)
    compact_s = time.perf_counter() - began
    vacuumed = vacuum.vacuum_due(budget_s=10**9)  # as beat runs it after compaction
    assert result.rows == samples and not result.held_back, result
    with psycopg.connect(url, autocommit=True) as conn:
        hot_after = sizes(conn, GPU_SAMPLE_TABLE)
        chunks, packed_n = conn.execute(
            f"SELECT count(*), sum(n) FROM {GPU_CHUNK_TABLE}").fetchone()
        assert packed_n == samples, (packed_n, samples)
        packed = sizes(conn, GPU_CHUNK_TABLE)
        blob = conn.execute(f"SELECT avg(octet_length(data)) FROM {GPU_CHUNK_TABLE}").fetchone()[0]
        rollups = []
        for table in (*GPU_ROLLUP_TABLES.values(), *JOB_ROLLUP_TABLES.values(),
                      *NODE_ROLLUP_TABLES.values()):
            n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            rollups.append((table, n, sum(sizes(conn, table))))
        # A day's 1-hour blob is rewritten as each of its hours is packed: the rewrites leave
        # dead versions (reusable once vacuumed, by the next day's blobs) that a single day
        # shows as the table's size. What stays is each live row (pg_column_size of the
        # whole row: its columns, the blob included; not TOAST's own chunk headers, about
        # 2 %) and the index.
        live = {}
        for table in GPU_ROLLUP_TABLES.values():
            rows_bytes = conn.execute(
                f"SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM {table} r").fetchone()[0]
            live[table] = int(rows_bytes) + sizes(conn, table)[2]
        # NIC samples (hot rows left, and those compaction packed) and their rollups (every
        # closed NIC hour recomputed): per NIC sample.
        nic_samples = conn.execute(
            "SELECT count(*) FROM telemetry_nic_samples(ARRAY(SELECT id FROM inventory_nic)"
            "::int[], '-infinity', 'infinity')").fetchone()[0]
        nic_tables = [(table, conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0],
                       sum(sizes(conn, table))) for table in (NIC_SAMPLE_TABLE, NIC_PACK_TABLE)]
        for table in NIC_ROLLUP_TABLES.values():
            n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            nic_tables.append((table, n, sum(sizes(conn, table))))
    print()
    print(f"compaction: {result.rows:,} hot rows into {result.chunks:,} (GPU, hour) chunks in "
          f"{result.transactions} transactions, {compact_s:.1f} s "
          f"({result.rows / compact_s:,.0f} samples/s, rollups included)")
    print(f"  hot table before     : {sum(hot):12,d} bytes (heap {hot[0]:,}, TOAST and maps "
          f"{hot[1]:,}, indexes {hot[2]:,})")
    print(f"  hot table after      : {sum(hot_after):12,d} bytes (heap {hot_after[0]:,}, TOAST "
          f"and maps {hot_after[1]:,}, indexes {hot_after[2]:,}): {result.truncated} day "
          f"partition(s) truncated, {result.freed_bytes:,} bytes freed")
    print(f"  vacuum task          : {len(vacuumed.tables)} tables vacuumed"
          + (" (none: autovacuum is on)" if vacuumed.skipped_autovacuum_on else ""))
    print()
    print("packed tier, telemetry_gpuchunk (a row per GPU and hour, 1 btree (gpu_id, start))")
    print(f"  heap                 : {packed[0] / samples:7.2f} bytes per GPU sample")
    print(f"  TOAST, maps          : {packed[1] / samples:7.2f}")
    print(f"  indexes              : {packed[2] / samples:7.2f}")
    print(f"  total                : {sum(packed) / samples:7.2f} bytes per GPU sample "
          f"(target <= 40; {sum(hot) / sum(packed):.1f}x smaller than the hot tier)")
    print(f"  chunk blob           : {float(blob):7.0f} bytes on average "
          f"({samples / chunks:.0f} samples per chunk)")
    print()
    print("rollups (heap + TOAST + indexes)")
    for table, n, size in rollups:
        print(f"  {table:26s}: {size / samples:7.2f} bytes per GPU sample "
              f"({n:,} rows, {size / max(n, 1):.0f} bytes per row"
              + (f"; live rows and index {live[table] / samples:.2f}" if table in live else "")
              + ")")
    total = sum(size for _, _, size in rollups)
    print(f"  all rollups          : {total / samples:7.2f} bytes per GPU sample")
    # At steady state each table holds its retention's worth of data: per GPU sample that
    # the raw tier keeps (RAW_RETENTION_DAYS of them), a table costs its bytes per sample x
    # its retention / the raw retention. The hot table holds the hour being written and the
    # one waiting RAW_HOT_MINUTES, at most (compaction deletes, the vacuum task or autovacuum
    # makes the room reusable): counted as 2 hours of its measured bytes.
    raw_days = settings.RAW_RETENTION_DAYS
    keep = {GPU_CHUNK_TABLE: raw_days}
    for width, days in ((60, settings.ROLLUP_1M_RETENTION_DAYS),
                        (300, settings.ROLLUP_5M_RETENTION_DAYS),
                        (3600, settings.ROLLUP_1H_RETENTION_DAYS)):
        for tables in (GPU_ROLLUP_TABLES, JOB_ROLLUP_TABLES, NODE_ROLLUP_TABLES):
            if width in tables:
                keep[tables[width]] = days
    steady = [(GPU_SAMPLE_TABLE, sum(hot) / samples, 2 / 24)]
    steady.append((GPU_CHUNK_TABLE, sum(packed) / samples, raw_days))
    # The day-blob table at its live size (above): at steady state the dead versions of the
    # day being written are all it holds besides.
    steady += [(table, (live[GPU_ROLLUP_TABLES[3600]] if table == GPU_ROLLUP_TABLES[3600]
                        else size) / samples, keep[table]) for table, _, size in rollups]
    print()
    print(f"steady state at the default retentions (per GPU sample of the {raw_days} days "
          "raw retention keeps: bytes per sample x days kept / raw days)")
    for table, per_sample, days in steady:
        print(f"  {table:26s}: {per_sample * days / raw_days:7.2f}  ({per_sample:.2f} B x "
              f"{days:g} d / {raw_days} d)")
    print(f"  all GPU telemetry tables  : "
          f"{sum(p * d / raw_days for _, p, d in steady):7.2f} bytes per GPU sample "
          "(issue 17's target: no more than Prometheus on the same samples, which "
          "benchmarks/storage_vs_peers.py measures beside it)")
    print()
    print(f"NIC samples ({nic_samples:,}: hot rows left, packed per NIC and hour) and their "
          "rollups "
          "(heap + TOAST + indexes)")
    for table, n, size in nic_tables:
        print(f"  {table:22s}: {size / max(nic_samples, 1):7.2f} bytes per NIC sample "
              f"({n:,} rows, {size / max(n, 1):.0f} bytes per row)")
    print()
    print("quantisation of the packed tier and the packed rollups (codec.PRECISION; a "
          "rollup's sums are exact at it)")
    for metric, what in codec.describe_precision().items():
        print(f"  {metric:22s}: {what}")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


if __name__ == "__main__":
    main()
