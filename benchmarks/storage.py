#!/usr/bin/env python
"""Storage per GPU sample at the raw resolution, indexes included.

Writes a realistic day-partitioned sample set (1,000 GPUs x 2,000 samples at 10 s, with
values that vary like real telemetry, some nulls) into a scratch database, then reports
heap, index and total bytes per GPU sample from PostgreSQL's own sizes.

    python benchmarks/storage.py [--gpus 1000] [--samples 2000]
"""

import argparse
import datetime as dt
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
DB = BASE_DB.rsplit("/", 1)[0] + "/clusterui_bench_storage"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS clusterui_bench_storage WITH (FORCE)")
        conn.execute("CREATE DATABASE clusterui_bench_storage")
    env = {**os.environ, "DATABASE_URL": DB, "DEBUG": "1",
           "DJANGO_SETTINGS_MODULE": "clusterui.settings"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env,
                   check=True)
    url = DB.replace("postgres://", "postgresql://", 1)
    start = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
    with psycopg.connect(url, autocommit=True) as conn:
        days = {(start + dt.timedelta(seconds=10 * i)).date() for i in range(args.samples)}
        for day in sorted(days):
            nxt = day + dt.timedelta(days=1)
            conn.execute(f"CREATE TABLE telemetry_gpusample_p{day:%Y%m%d} PARTITION OF "
                         f"telemetry_gpusample FOR VALUES FROM ('{day}') TO ('{nxt}')")
    rng = random.Random(7)
    cols = ("ts", "energy_j", "throttle_reasons", "gpu_id", "job_id", "util_pct",
            "mem_util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz",
            "sm_active_pct", "tensor_active_pct", "dram_active_pct", "pcie_tx_bytes_per_s",
            "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
    types = ["timestamptz", "float8", "int8", "int4", "int4", "float4", "float4", "int4"] + \
        ["float4"] * 10
    began = time.perf_counter()
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY telemetry_gpusample ({', '.join(cols)}) FROM STDIN "
                      "(FORMAT BINARY)") as copy:
            copy.set_types(types)
            for k in range(args.samples):
                ts = start + dt.timedelta(seconds=10 * k)
                for g in range(1, args.gpus + 1):
                    util = min(100.0, max(0.0, rng.gauss(70, 25)))
                    copy.write_row((
                        ts, 1e6 + k * 6500.0 + g, 0 if util > 5 else 1, g, g // 8 + 1, util,
                        util * 0.4, 40000 + g, 300 + util * 4, 40 + util / 4, 1980.0,
                        util * 0.8, util * 0.4, util * 0.5, 1e9 * rng.random(),
                        1e9 * rng.random(), None if g % 10 == 0 else 5e10 * rng.random(),
                        None if g % 10 == 0 else 5e10 * rng.random()))
        conn.commit()
    rows = args.gpus * args.samples
    copy_s = time.perf_counter() - began
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE telemetry_gpusample")
        heap, index = conn.execute(
            """
            SELECT sum(pg_table_size(c.oid)), sum(pg_indexes_size(c.oid))
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'telemetry_gpusample'
            """).fetchone()
    print(f"storage of raw GPU samples ({rows:,} rows, 18 columns, 1 btree (gpu_id, ts))")
    print(f"  heap                 : {heap / rows:6.1f} bytes per GPU sample")
    print(f"  index                : {index / rows:6.1f} bytes per GPU sample")
    print(f"  total                : {(heap + index) / rows:6.1f} bytes per GPU sample "
          "(target <= 40)")
    print(f"  binary COPY          : {rows / copy_s:9.0f} rows/s (generation included)")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS clusterui_bench_storage WITH (FORCE)")


if __name__ == "__main__":
    main()
