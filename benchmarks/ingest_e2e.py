#!/usr/bin/env python
"""End-to-end ingest throughput: batches queued in Redis -> one consumer process ->
PostgreSQL, for both consumers of the ``ingest`` queue (the bulk consumer,
``manage.py ingest_worker``, and the Celery task), next to the no-op Celery ceiling and the
raw COPY ceiling measured in the same run (this machine is noisy: compare ratios within one
run). Each consumer's CPU time per batch is printed too: it does not depend on what else
the machine is doing.

    python benchmarks/ingest_e2e.py [--batches 8000] [--celery-batches 1500] [--large 200]
    python benchmarks/ingest_e2e.py --bulk-only --samples 1 6 [--batches 2000]
    python benchmarks/ingest_e2e.py --bulk-only --nodes 2000 --processes 2

It uses its own database (``clusterui_bench``, or ``BENCH_DATABASE``) and Redis database 8
(or ``BENCH_REDIS_DB``), and prints its figures. ``--signed`` signs every batch with a node
key as a collector does (``collectors.signing``: what this checkout's collector sends), so
that the server's signature check is part of the measurement. ``--bulk-only`` measures
only the bulk consumer, on node batches of each ``--samples`` count of rows per GPU (1: 8
GPU rows, 6: 48), with the load average: quick before/after comparisons of the writer (run
this file against the old tree too, in the same session). ``--processes N`` runs
``ingest_worker --processes N``; ``--nodes`` sets how many nodes the batches come from (at
the default 500 every 500-message flush holds one batch of each, so concurrent consumers
flush the same nodes; at 2,000 successive flushes hold different ones).
``BENCH_WORKER_LOG=FILE`` appends the consumer's log there.
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
BENCH_NAME = os.environ.get("BENCH_DATABASE", "clusterui_bench")
BENCH_DB = BASE_DB.rsplit("/", 1)[0] + "/" + BENCH_NAME
BROKER = (os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
          + "/" + os.environ.get("BENCH_REDIS_DB", "8"))
os.environ.update(DATABASE_URL=BENCH_DB, CELERY_BROKER_URL=BROKER, DEBUG="1",
                  DJANGO_SETTINGS_MODULE="clusterui.settings")


def setup_database() -> None:
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_NAME}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)


def worker(extra: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "clusterui", "worker", "-Q", "ingest", "-c", "1",
         "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel", "WARNING",
         "-n", f"bench{time.time_ns()}@%h", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def bulk_worker(extra) -> subprocess.Popen:
    # BENCH_WORKER_LOG: a file to append the consumer's log to (retries, lock waits).
    log = open(os.environ["BENCH_WORKER_LOG"], "ab") if os.environ.get("BENCH_WORKER_LOG") \
        else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "manage.py", "ingest_worker", *extra], cwd=ROOT,
        stdout=log, stderr=log, start_new_session=True,
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children so far (Linux /proc)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(c) for c in children.read_text().split()]
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def drain(task: str, envelopes: list[dict], done, *, warm: int = 0, extra=(), start=worker
          ) -> tuple[float, float]:
    """Time one consumer process draining ``envelopes[warm:]``: (wall seconds, the
    consumer's CPU seconds) from the moment they are all in the queue at once to the last
    one stored (``done(n)``: have n been stored?).

    The first ``warm`` envelopes (one per node) are stored first, untimed: the steady state
    of a running cluster, where the consumer already knows every node's inventory. The
    measured ones are queued on a side list and renamed onto the queue in one step, so the
    producer's work is never inside the timing.
    """
    import redis

    from clusterui.celery import app

    r = redis.Redis.from_url(BROKER)
    r.flushdb()

    def send(items, queue):
        with app.producer_or_acquire() as producer:
            for env in items:
                app.send_task(task, args=[env], queue=queue, producer=producer)

    send(envelopes[:warm], "ingest")
    proc = start(list(extra))
    try:
        while not done(warm):
            time.sleep(0.02)
        send(envelopes[warm:], "ingest_staging")
        began, cpu0 = time.perf_counter(), cpu_seconds(proc.pid)
        r.rename("ingest_staging", "ingest")
        while not done(len(envelopes)):
            time.sleep(0.02)
        return time.perf_counter() - began, cpu_seconds(proc.pid) - cpu0
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


def batches(n: int, samples: int, gpus: int = 8, prefix: str = "n", nodes: int = 500
            ) -> list[dict]:
    """Node-shaped batches as a collector sends them: 8 GPUs, 4 InfiniBand ports, one job
    (its start time fixed, as a scheduler reports it), ``samples`` rows per device."""
    from tests.factories import node_batch

    start = time.time() - 3 * 3600
    made = [
        node_batch(node=f"{prefix}{i % nodes:04d}", seq=i // nodes + 1, boot_id=prefix,
                   samples=samples, gpus=gpus, nics=4, job=f"{prefix}{i % nodes}",
                   start=start + (i // nodes) * samples * 10, job_started=start - 600)
        for i in range(n)
    ]
    return [SIGNER(e) for e in made] if SIGNER else made


SIGNER = None  # --signed: each batch as the collector signs it (``signing.node_signer``)


def copy_ceiling(rows: int) -> float:
    """Raw psycopg binary COPY of GPU-sample rows into the partitioned table (no Python
    object per row beyond the tuple), in rows/s."""
    import psycopg

    from clusterui.telemetry.metrics import GPU_SAMPLE_COLUMNS

    url = BENCH_DB.replace("postgres://", "postgresql://", 1)
    from clusterui.telemetry import partitions

    # Rows one second apart per GPU (25,000 s for 200,000 rows), all inside today's
    # partition: the ceiling must not depend on the time of day it runs at.
    now = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    partitions.ensure_partitions([now.date()])
    data = [(now + dt.timedelta(seconds=i // 8), 1e6, 0, i % 8 + 1, None, 50.0, 40.0, 1000,
             300.0, 60.0, 1980.0, 50.0, 20.0, 30.0, 1e9, 1e9, 1e10, 1e10) for i in range(rows)]
    types = ["timestamptz", "float8", "int8", "int4", "int4"] + ["float4"] * 2 + ["int4"] + \
        ["float4"] * 6 + ["float8"] * 4  # the byte rates are double precision (0008)
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
    parser.add_argument("--batches", type=int, default=8000,
                        help="node-sized batches for the bulk consumer")
    parser.add_argument("--celery-batches", type=int, default=1500,
                        help="node-sized batches for the Celery task and the no-op ceiling")
    parser.add_argument("--large", type=int, default=200, help="large batches (1,000 rows)")
    parser.add_argument("--signed", action="store_true",
                        help="sign every batch with its node's key, as collectors do")
    parser.add_argument("--bulk-only", action="store_true",
                        help="only the bulk consumer, on node batches of each --samples")
    parser.add_argument("--samples", type=int, nargs="+", default=[1],
                        help="with --bulk-only: rows per GPU of a node batch (8 GPUs)")
    parser.add_argument("--processes", type=int, default=1,
                        help="with --bulk-only: consumer processes (ingest_worker -c N)")
    parser.add_argument("--nodes", type=int, default=500,
                        help="with --bulk-only: nodes the batches come from (one warm-up "
                             "batch each; at 500, every flush of 500 messages holds one "
                             "batch of every node)")
    args = parser.parse_args()
    setup_database()
    import django

    django.setup()
    from clusterui.ingest.models import IngestBatch, IngestKey

    if args.signed:
        global SIGNER
        from collectors import signing

        secret = "bench-cluster-secret"
        IngestKey.objects.create(cluster="test", key_id="bench-1", secret=secret)
        SIGNER = signing.node_signer("bench-1", secret)

    def stored(n):
        return IngestBatch.objects.count() >= n

    def fresh():
        IngestBatch.objects.all().delete()

    def empty(_n):
        return _queue_empty()

    if args.bulk_only:
        return bulk_only(args.batches, args.samples, stored, fresh, args.processes,
                         args.nodes)
    rows = []
    # Node-sized: 500 nodes, one warm-up batch each, then n measured batches.
    n, nodes = args.celery_batches, 500
    small = batches(nodes + n, samples=1, prefix="c", nodes=nodes)
    noop_s, noop_cpu = drain("clusterui.bench.noop", small, empty, warm=nodes,
                             extra=["-I", "benchmarks.noop_tasks"])
    rows.append(("no-op Celery task, node-sized messages", n, noop_s, noop_cpu, None))
    wall, cpu = drain("clusterui.ingest", small, stored, warm=nodes)
    rows.append(("Celery task, node-sized batches", n, wall, cpu, 8))
    fresh()
    m = args.large // 4
    large = batches(50 + m, samples=125, prefix="cL", nodes=50)
    wall, cpu = drain("clusterui.ingest", large, stored, warm=50)
    rows.append(("Celery task, large batches (1,000 GPU rows)", m, wall, cpu, 1000))
    fresh()
    n = args.batches
    wall, cpu = drain("clusterui.ingest", batches(nodes + n, samples=1, prefix="b", nodes=nodes),
                      stored, warm=nodes, start=bulk_worker)
    rows.append(("bulk consumer, node-sized batches", n, wall, cpu, 8))
    fresh()
    m = args.large
    large = batches(50 + m, samples=125, prefix="bL", nodes=50)
    wall, cpu = drain("clusterui.ingest", large, stored, warm=50, start=bulk_worker)
    rows.append(("bulk consumer, large batches (1,000 GPU rows)", m, wall, cpu, 1000))
    ceiling = statistics.median(copy_ceiling(200_000) for _ in range(3))

    print("ingest end to end, one consumer process, steady state (each node's inventory "
          "already seen), the measured batches queued at once; 8 GPUs + 4 IB ports + 1 job "
          "per node batch")
    print(f"  {'':46} {'batches/s':>10} {'GPU-samples/s':>14} {'CPU ms/batch':>13}")
    for label, count, wall, cpu, per in rows:
        samples = f"{count * per / wall:14.0f}" if per else f"{'':>14}"
        print(f"  {label:46} {count / wall:10.0f} {samples} {cpu / count * 1000:13.3f}")
    print(f"  raw binary COPY ceiling (same run, rows/s)   {ceiling:25.0f}")
    bulk_large = rows[-1][1] * 1000 / rows[-1][2]
    print(f"  bulk large-batch ingest / COPY ceiling       {bulk_large / ceiling:25.2f}")
    print(f"  bulk / no-op Celery ceiling (node batches)   "
          f"{rows[3][1] / rows[3][2] / (rows[0][1] / rows[0][2]):25.2f}")
    print("  (targets: >= 2,000 node batches/s and >= 100,000 GPU-samples/s per process, "
          ">= 0.5 of the COPY ceiling)")


def bulk_only(n: int, samples: list[int], stored, fresh, processes: int = 1,
              nodes: int = 500) -> None:
    """The bulk consumer alone: 500 nodes (one warm-up batch each), then n batches of each
    size; CPU ms per batch does not depend on the machine's load, batches/s does. With
    ``processes`` above 1, ``ingest_worker --processes N`` (its CPU: the supervisor and
    every consumer)."""
    extra = ["--processes", str(processes)] if processes > 1 else []
    print(f"bulk consumer, {processes} process(es), {n} node batches per size after {nodes} "
          f"warm-up ones (8 GPUs + 4 IB ports + 1 job; {ROOT})")
    print(f"  {'GPU rows/batch':>14} {'batches/s':>10} {'CPU ms/batch':>13} {'load avg 1m':>12}")
    for k in samples:
        fresh()
        made = batches(nodes + n, samples=k, prefix=f"s{k}x", nodes=nodes)
        wall, cpu = drain("clusterui.ingest", made, stored, warm=nodes, start=bulk_worker,
                          extra=extra)
        print(f"  {8 * k:14d} {n / wall:10.0f} {cpu / n * 1000:13.3f} "
              f"{os.getloadavg()[0]:12.2f}", flush=True)


def _queue_empty() -> bool:
    import redis

    r = redis.Redis.from_url(BROKER)
    return r.llen("ingest") == 0 and r.hlen("unacked") == 0


if __name__ == "__main__":
    main()
