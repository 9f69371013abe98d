"""A consumer SIGKILLed in the middle of a batch loses nothing and stores nothing twice: the
Celery worker (kombu's unacked restore brings the message back) and the bulk consumer (its
in-flight list is requeued by the next consumer's sweep).

The batch is caught mid-ingest deterministically: the test holds a row lock on the node, so
the worker's transaction is blocked inside the task when the worker is killed.
"""

import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from clusterui.celery import app
from clusterui.ingest.models import IngestBatch
from tests.factories import node_batch
from tests.faults.harness import QueueWatch, record
from tests.services import database_url, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def gpu_samples() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM telemetry_gpusample")
        return cur.fetchone()[0]


def blocked_ingests() -> int:
    # A connection of its own: pg_stat_activity is a snapshot per transaction.
    with psycopg.connect(database_url(), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            # The flush locks its nodes' rows first (SELECT ... FOR UPDATE, the dedupe
            # high-water mark), then upserts them: either statement waits here.
            "AND query LIKE '%inventory_node%'"
        ).fetchone()[0]


def held(broker, kind: str) -> int:
    """Messages taken from the queue and not yet acknowledged."""
    if kind == "celery":
        return broker.hlen("unacked")
    return sum(broker.llen(k) for k in broker.scan_iter("clusterui:ingest:consumer:*:inflight:*"))


@pytest.mark.parametrize("kind", ["celery", "bulk"])
def test_a_worker_killed_mid_batch_loses_nothing(make_worker, broker, kind):
    first = node_batch(seq=1, samples=4)
    second = node_batch(seq=2, samples=4, start=first["sent_at"])
    doomed = make_worker(kind=kind)
    watch = QueueWatch(settings.CELERY_BROKER_URL)
    app.send_task("clusterui.ingest", args=[first], queue="ingest")
    wait_for(lambda: IngestBatch.objects.count() == 1, timeout=30, what="the first batch")

    with psycopg.connect(database_url()) as lock:
        lock.execute("SELECT id FROM inventory_node WHERE name = %s FOR UPDATE", [first["node"]])
        app.send_task("clusterui.ingest", args=[second], queue="ingest")
        wait_for(lambda: blocked_ingests() == 1, timeout=30,
                 what="the worker to be inside the second batch")
        assert held(broker, kind) == 1  # taken from the queue, not yet acknowledged
        doomed.kill()
        lock.rollback()

    assert IngestBatch.objects.count() == 1  # the killed transaction committed nothing
    killed = time.monotonic()
    survivor = make_worker(kind=kind)
    wait_for(lambda: IngestBatch.objects.count() == 2, timeout=60,
             what="the killed batch to be redelivered and stored")
    # From the SIGKILL to the batch stored by the next worker (kombu's visibility timeout,
    # or the bulk consumer's liveness TTL plus a sweep: the test settings shorten both).
    recovery = time.monotonic() - killed
    assert sorted(IngestBatch.objects.values_list("seq", flat=True)) == [1, 2]
    assert gpu_samples() == 2 * 4 * 8
    if kind == "celery":
        assert "clusterui.ingest" in survivor.log()
    else:
        assert "requeued 1 in-flight messages of dead consumer" in survivor.log()
    wait_for(lambda: held(broker, kind) == 0, timeout=30, what="the redelivery to be acked")
    with connection.cursor() as cur:
        cur.execute("SELECT count(DISTINCT (gpu_id, ts)) FROM telemetry_gpusample")
        distinct = cur.fetchone()[0]
    peak = watch.stop()
    record(f"worker_sigkill_{kind}", {
        "produced": 2 * 4 * 8, "stored": gpu_samples(), "lost": 2 * 4 * 8 - distinct,
        "duplicated": gpu_samples() - distinct,
        "redelivery_after_kill_s": round(recovery, 1), "peak_queue_depth": peak,
        # Not measured: the shortened test settings the figures above were measured under.
        "settings": {"INGEST_CONSUMER_TTL_S": settings.INGEST_CONSUMER_TTL_S,
                     "CELERY_VISIBILITY_TIMEOUT":
                         settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]}})
    assert peak >= 1  # the watch saw the held message
