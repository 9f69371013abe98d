#!/usr/bin/env python
"""End-to-end ingest throughput: batches queued in Redis -> one Celery worker process ->
PostgreSQL, next to the no-op Celery ceiling and the raw COPY ceiling measured in the same
run (this machine is noisy: compare ratios within one run).

    python benchmarks/ingest_e2e.py [--batches 2000] [--large 40]

It uses its own database (``clusterui_bench``) and Redis database 8, and prints its figures.
"""

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
BENCH_DB = BASE_DB.rsplit("/", 1)[0] + "/clusterui_bench"
BROKER = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0] + "/8"
os.environ.update(DATABASE_URL=BENCH_DB, CELERY_BROKER_URL=BROKER, DEBUG="1",
                  DJANGO_SETTINGS_MODULE="clusterui.settings")


def setup_database() -> None:
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS clusterui_bench WITH (FORCE)")
        conn.execute("CREATE DATABASE clusterui_bench")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)


def worker(extra: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "clusterui", "worker", "-Q", "ingest", "-c", "1",
         "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel", "WARNING",
         "-n", f"bench{time.time_ns()}@%h", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def drain(task: str, envelopes: list[dict], done, extra=()) -> float:
    """Queue every envelope, then time one worker process draining them."""
    import redis

    from clusterui.celery import app

    r = redis.Redis.from_url(BROKER)
    r.flushdb()
    with app.producer_or_acquire() as producer:
        for env in envelopes:
            app.send_task(task, args=[env], queue="ingest", producer=producer)
    proc = worker(list(extra))
    try:
        # Time from the first message taken to the last one finished.
        while r.llen("ingest") == len(envelopes):
            time.sleep(0.005)
        start = time.perf_counter()
        while not done():
            time.sleep(0.01)
        return time.perf_counter() - start
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


def batches(n: int, samples: int, gpus: int = 8, prefix: str = "n") -> list[dict]:
    from tests.factories import node_batch

    start = time.time() - 3 * 3600
    nodes = 100
    return [
        node_batch(node=f"{prefix}{i % nodes:04d}", seq=i // nodes + 1, boot_id=prefix,
                   samples=samples, gpus=gpus, start=start + (i // nodes) * samples * 10)
        for i in range(n)
    ]


def copy_ceiling(rows: int) -> float:
    """Raw psycopg binary COPY of GPU-sample rows into the partitioned table (no Python
    object per row beyond the tuple), in rows/s."""
    import psycopg

    from clusterui.telemetry.metrics import GPU_SAMPLE_COLUMNS

    url = BENCH_DB.replace("postgres://", "postgresql://", 1)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    data = [(now + dt.timedelta(seconds=i // 8), 1e6, 0, i % 8 + 1, None, 50.0, 40.0, 1000,
             300.0, 60.0, 1980.0, 50.0, 20.0, 30.0, 1e9, 1e9, 1e10, 1e10) for i in range(rows)]
    types = ["timestamptz", "float8", "int8", "int4", "int4"] + ["float4"] * 2 + ["int4"] + \
        ["float4"] * 10
    cols = ("ts", "energy_j", "throttle_reasons", "gpu_id", "job_id", "util_pct",
            "mem_util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz",
            "sm_active_pct", "tensor_active_pct", "dram_active_pct", "pcie_tx_bytes_per_s",
            "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
    assert set(cols) == set(GPU_SAMPLE_COLUMNS)
    with psycopg.connect(url) as conn:
        start = time.perf_counter()
        with conn.cursor() as cur, cur.copy(
                f"COPY telemetry_gpusample ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(types)
            for row in data:
                cp.write_row(row)
        conn.commit()
        return rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=1500, help="node-sized batches")
    parser.add_argument("--large", type=int, default=30, help="large batches (1,000 rows)")
    args = parser.parse_args()
    setup_database()
    import django

    django.setup()
    from clusterui.ingest.models import IngestBatch

    small = batches(args.batches, samples=1)
    noop_s = drain("clusterui.bench.noop", small, lambda: _queue_empty(), ["-I", "benchmarks.noop_tasks"])
    small_s = drain("clusterui.ingest", small,
                    lambda: IngestBatch.objects.count() >= args.batches)
    large = batches(args.large, samples=125, prefix="L")  # 8 GPUs x 125 = 1,000 rows
    IngestBatch.objects.all().delete()
    large_s = drain("clusterui.ingest", large, lambda: IngestBatch.objects.count() >= args.large)
    ceiling = statistics.median(copy_ceiling(200_000) for _ in range(3))

    n_small = args.batches
    print("ingest end to end, one worker process (prefork, concurrency 1)")
    print(f"  no-op Celery task, node-sized messages : {n_small / noop_s:8.0f} messages/s")
    print(f"  node-sized batches (8 GPUs x 1 sample) : {n_small / small_s:8.0f} batches/s  "
          f"{n_small * 8 / small_s:9.0f} GPU-samples/s")
    print(f"  large batches (8 GPUs x 125 samples)  : {args.large / large_s:8.1f} batches/s  "
          f"{args.large * 1000 / large_s:9.0f} GPU-samples/s")
    print(f"  raw binary COPY ceiling (same run)     : {ceiling:9.0f} rows/s")
    print(f"  large-batch ingest / COPY ceiling      : {args.large * 1000 / large_s / ceiling:8.2f}")


def _queue_empty() -> bool:
    import redis

    r = redis.Redis.from_url(BROKER)
    return r.llen("ingest") == 0 and r.hlen("unacked") == 0


if __name__ == "__main__":
    main()
