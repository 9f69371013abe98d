#!/usr/bin/env python
"""NIC series reads, hot and packed: what a chart of a node's ports (8) and of a multi-node
job's ports (64) costs at each step once compaction has packed the samples
(``telemetry_nicpack``, migration 0014), and before, from the hot rows. Minute steps read
the samples since migration 0015 dropped the 1-minute NIC rollup; 5-minute steps read the
5-minute rollup (recomputed by the same compaction run).

    python benchmarks/nic_reads.py [--hours 20] [--runs 7]

Its own scratch database (``clusterui_bench_nic``, or ``BENCH_DATABASE``): 64 InfiniBand
ports sampled every 10 s for ``--hours`` (simulated rates, numpy, seeded), written into the
hot table as ingest's COPY would, due marks included; each read is timed in process
(``series.nic_series``, the pages' and the API's reader), median of ``--runs`` after a
warm-up, first from the hot rows, then after ``compaction.compact``.
"""

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("BENCH_DATABASE", "clusterui_bench_nic")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import ingest_e2e as e2e  # noqa: E402 - after the database is chosen

PORTS = 64
CASES = (("node page, 8 ports", 8), ("multi-node job, 64 ports", PORTS))


def fill(hours: float, start: dt.datetime) -> list[int]:
    """64 ports on 8 nodes, a sample every 10 s: their ids."""
    import psycopg
    from django.db import connection, transaction

    from clusterui.inventory.models import Cluster, Nic, Node
    from clusterui.telemetry import nicrollup, packed, partitions, pgcopy

    cluster = Cluster.objects.create(name="bench")
    ids = []
    for n in range(PORTS // 8):
        node = Node.objects.create(cluster=cluster, name=f"nic{n:02d}", first_seen=start,
                                   last_seen=start)
        ids += [Nic.objects.create(node=node, name=f"mlx5_{p}:1", kind="infiniband",
                                   link_bytes_per_s=50e9, first_seen=start,
                                   last_seen=start).id for p in range(8)]
    rng = np.random.default_rng(3)
    n = int(hours * 360)
    ts_ms = (start.timestamp() * 1000 + np.arange(n) * 10_000).astype(np.int64)
    end = start + dt.timedelta(hours=hours)
    partitions.ensure_partitions({start.date() + dt.timedelta(days=d)
                                  for d in range((end.date() - start.date()).days + 1)})
    with transaction.atomic(), connection.cursor() as wrapper:
        # A server-binding psycopg cursor, as ingest's writer uses: COPY, binary parameters.
        cur = psycopg.Cursor(wrapper.cursor.connection)
        for nic in ids:
            rates = [rng.integers(0, 10**10, n) * 4 / (10 + rng.normal(0, 0.004, n))
                     for _ in range(2)]
            packed.copy_arrays(cur, "telemetry_nicsample", [
                ("ts", "timestamptz_ms", ts_ms, None), ("nic_id", "int4", np.full(n, nic), None),
                ("rx_bytes_per_s", "float8", rates[0], None),
                ("tx_bytes_per_s", "float8", rates[1], None)])
        # Each hour's start as PostgreSQL microseconds (``mark_due``'s unit), as ingest does.
        hours_us = {(t * 1000 - pgcopy.PG_EPOCH_US) // 3_600_000_000 * 3_600_000_000
                    for t in ts_ms[::360].tolist()}
        nicrollup.mark_due(cur, [(nic, h) for nic in ids for h in hours_us])
    return ids


def timed(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    e2e.setup_database()
    import django

    django.setup()
    from django.utils import timezone

    from clusterui.telemetry import compaction
    from clusterui.telemetry.series import nic_series

    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    start = now - dt.timedelta(hours=args.hours + 2)
    end = start + dt.timedelta(hours=args.hours)
    ids = fill(args.hours, start)
    print(f"{PORTS} ports x {args.hours:g} h at 10 s ({PORTS * int(args.hours * 360):,} "
          f"samples); median of {args.runs} reads of the whole range, ms; load average "
          f"{os.getloadavg()[0]:.2f}")
    steps = (60, 300)
    results = {}
    for tier in ("hot rows", "packed"):
        if tier == "packed":
            done = compaction.compact(now, budget_s=10**9)
            print(f"compaction: {done.nic_rows:,} hot NIC rows into {done.nic_packed:,} "
                  f"(NIC, hour) rows, {done.nic_hours:,} NIC hours rolled up, "
                  f"{done.seconds:.1f} s")
        for label, count in CASES:
            for step in steps:
                results[(tier, label, step)] = timed(
                    lambda c=count, s=step: nic_series(ids[:c], ["rx_bytes_per_s",
                                                                 "tx_bytes_per_s"],
                                                       start, end, step=s), args.runs)
    print(f"  {'read':28} {'step':>5} {'hot rows':>9} {'packed':>9}")
    for label, _count in CASES:
        for step in steps:
            print(f"  {label:28} {step:5d} {results[('hot rows', label, step)]:9.1f} "
                  f"{results[('packed', label, step)]:9.1f}")
    print("(before compaction the 5-minute rollup is not there yet: the hot rows' 5-minute "
          "reads aggregate the samples, as minute steps always do)")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
