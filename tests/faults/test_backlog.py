"""A backlog: ten minutes of a 1,000-node cluster's batches (flushing every 60 s) are
queued while no worker runs, then drained. Everything is stored, and the worker's memory
stays bounded: it holds only its prefetch window, not the backlog."""

import time
from pathlib import Path

import pytest
from django.db import connection

from clusterui.celery import app
from clusterui.ingest.models import IngestBatch
from tests.factories import node_batch
from tests.faults.harness import QueueWatch, record, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

NODES, MINUTES = 1000, 10


def rss_mib(pid: int) -> float:
    """Resident memory of a process and its children (the prefork pool), in MiB."""
    total = 0
    for proc in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{proc}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total / 1024


def _children(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    out = [int(k) for k in kids]
    for k in list(out):
        out.extend(_children(k))
    return out


def test_ten_minutes_of_a_thousand_nodes_drain_completely_in_bounded_memory(make_worker,
                                                                          broker_url):
    start = time.time() - 3600
    produced = 0
    with app.producer_or_acquire() as producer:
        for minute in range(MINUTES):
            for n in range(NODES):
                batch = node_batch(node=f"gpu-{n:04d}", seq=minute + 1, samples=6,
                                   start=start + minute * 60, cluster="big")
                produced += len(batch["gpu_samples"]["rows"])
                app.send_task("clusterui.ingest", args=[batch], queue="ingest",
                              producer=producer)
    watch = QueueWatch(broker_url)
    queued = watch.depth()
    assert queued == NODES * MINUTES

    worker = make_worker(concurrency=2, kind="bulk")
    began = time.monotonic()
    peak_rss = 0.0

    def drained():
        nonlocal peak_rss
        peak_rss = max(peak_rss, rss_mib(worker.proc.pid))
        return watch.depth() == 0 and IngestBatch.objects.count() == NODES * MINUTES

    wait_until(drained, 900, "the backlog to drain", interval=2)
    elapsed = time.monotonic() - began
    watch.stop()
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(DISTINCT (gpu_id, ts)) FROM telemetry_gpusample")
        rows, distinct = cur.fetchone()
    record("backlog", {"batches": NODES * MINUTES, "produced": produced, "stored": rows,
                       "lost": produced - distinct, "duplicated": rows - distinct,
                       "drain_s": round(elapsed, 1), "batches_per_s": round(NODES * MINUTES / elapsed),
                       "peak_queue_depth": queued, "peak_worker_rss_mib": round(peak_rss)})
    assert rows == distinct == produced == NODES * MINUTES * 48
    # Two pool processes and the main one: a few hundred MiB, whatever the backlog's size.
    assert peak_rss < 600, f"worker memory grew to {peak_rss:.0f} MiB"
