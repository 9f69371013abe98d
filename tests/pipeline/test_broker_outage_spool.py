"""The collector's disk spool across a broker outage (issue 3's acceptance test).

Redis is down while a simulated cluster runs for 60 s of real time through the real
``clusterui-simcluster`` command; then Redis comes up. Every batch then arrives in the
database, in order, exactly once.
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from clusterui.ingest.health import gaps_by_node
from clusterui.ingest.models import IngestBatch
from tests.services import PrivateRedis, Worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_batches_spooled_during_an_outage_all_arrive_in_order_once(clean_samples, tmp_path):
    redis = PrivateRedis(tmp_path / "redis")  # chosen port, not started: the broker is down
    spool = tmp_path / "spool"
    log = open(tmp_path / "sim.log", "w")
    sim = subprocess.Popen(
        [sys.executable, "-m", "collectors.sim.cluster", "--nodes", "2", "--gpus", "8",
         "--interval", "1", "--flush", "2", "--broker-url", redis.url, "--cluster", "outage",
         "--root", str(tmp_path / "sim"), "--spool-dir", str(spool), "--duration", "90"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )
    worker = None
    try:
        time.sleep(60)
        spooled = sorted(p.name for p in spool.rglob("*.json"))
        assert len(spooled) >= 2 * 20, f"expected a minute of batches in the spool: {spooled}"
        assert IngestBatch.objects.count() == 0

        redis.start()
        worker = Worker(redis.url).start()
        wait_for(lambda: not list(spool.rglob("*.json")), timeout=60,
                 what="the spool to be replayed")
        sim.terminate()  # SIGTERM: a final flush, then exit 0
        assert sim.wait(60) == 0

        def all_stored():
            seqs = IngestBatch.objects.values_list("node__name", "seq")
            by_node: dict[str, list[int]] = {}
            for node, seq in seqs:
                by_node.setdefault(node, []).append(seq)
            return len(by_node) == 2 and gaps_by_node() == [] and by_node

        # Nothing is left in the queue once every batch is stored.
        wait_for(lambda: all_stored() and redis_queue_empty(redis), timeout=90,
                 what="every batch to be stored")
    finally:
        if sim.poll() is None:
            sim.kill()
        if worker:
            worker.stop()
        redis.stop()

    batches = list(IngestBatch.objects.order_by("id").values("node__name", "seq", "gpu_samples"))
    for node in {b["node__name"] for b in batches}:
        seqs = [b["seq"] for b in batches if b["node__name"] == node]
        # In order (one worker, FIFO replay) and exactly once: 1, 2, ..., n.
        assert seqs == list(range(1, len(seqs) + 1)), seqs
        assert len(seqs) >= 30
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(DISTINCT (gpu_id, ts)) FROM telemetry_gpusample")
        rows, distinct = cur.fetchone()
    assert rows == distinct == sum(b["gpu_samples"] for b in batches)
    assert rows >= 2 * 8 * 60
    assert sum(IngestBatch.objects.values_list("spool_dropped", flat=True)) == 0


def redis_queue_empty(redis: PrivateRedis) -> bool:
    import redis as redis_lib

    client = redis_lib.Redis(port=redis.port)
    return client.llen("ingest") == 0 and client.hlen("unacked") == 0
