"""Messages that must not poison the queue, and workers that must not double-store.

Real Redis, real worker processes, real PostgreSQL."""

import json
import time

import pytest
from django.db import connection
from kombu import Producer

from clusterui.celery import app
from clusterui.ingest import deadletter
from clusterui.ingest.models import IngestBatch, RejectedBatch
from tests.factories import node_batch, recent_start
from tests.faults.harness import held, record
from tests.services import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
START = recent_start()  # inside raw retention: older samples are refused


def gpu_rows() -> tuple[int, int]:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(DISTINCT (gpu_id, ts)) FROM telemetry_gpusample")
        return cur.fetchone()


def publish_raw(body: bytes, task_id: str) -> None:
    """A message that claims to be a clusterui.ingest task, with any body at all."""
    with app.connection_for_write() as conn:
        Producer(conn).publish(
            body, routing_key="ingest", exchange="", content_type="application/json",
            content_encoding="utf-8", serializer=None,
            headers={"lang": "py", "task": "clusterui.ingest", "id": task_id,
                     "argsrepr": "", "kwargsrepr": ""},
        )


def test_undecodable_and_absurd_messages_do_not_poison_the_queue(worker, broker):
    publish_raw(b"{this is not json", "poison-1")
    publish_raw(b"[" * 200_000 + b"]" * 200_000, "poison-2")  # nesting past any parser
    publish_raw(json.dumps([[["not", "an", "envelope"]], {}, {}]).encode(), "poison-3")
    publish_raw(json.dumps([[], {"unexpected": 1}, {}]).encode(), "poison-4")
    app.send_task("clusterui.ingest", args=[node_batch(samples=2)], queue="ingest")

    wait_for(lambda: IngestBatch.objects.exists(), timeout=60, what="the good batch behind them")
    wait_for(lambda: broker.llen("ingest") == 0 and broker.hlen("unacked") == 0, timeout=60,
             what="every message to be consumed")
    assert gpu_rows() == (16, 16)
    assert worker.proc.poll() is None  # still alive
    # The well-formed message with a bad envelope is refused with its reason.
    assert RejectedBatch.objects.filter(
        reason="envelope must be a JSON object, got list").count() == 1
    # A message that cannot even be called is set aside with its reason, not dropped.
    (entry,) = deadletter.entries()
    assert entry["reason"] == "TypeError: ingest() got an unexpected keyword argument 'unexpected'"


def test_list_items_that_are_not_messages_are_set_aside_and_the_worker_goes_on(worker, broker):
    """Items pushed onto the queue list by something other than a producer: kombu cannot
    decode them, and Celery alone would stop the worker (clusterui/broker.py)."""
    broker.lpush("ingest", b"not json at all")
    broker.lpush("ingest", b"[1, 2]")
    broker.lpush("ingest", json.dumps({"body": "e30=", "properties": {}}).encode())
    bad_body = json.dumps({"body": "e30", "properties": {  # base64 without its padding
        "delivery_tag": "x", "delivery_info": {}, "body_encoding": "base64"}})
    broker.lpush("ingest", bad_body.encode())
    app.send_task("clusterui.ingest", args=[node_batch(samples=2)], queue="ingest")

    wait_for(lambda: IngestBatch.objects.exists(), timeout=60, what="the good batch behind them")
    wait_for(lambda: broker.llen("ingest") == 0 and broker.hlen("unacked") == 0, timeout=60,
             what="every item to be consumed")
    assert gpu_rows() == (16, 16)
    assert worker.proc.poll() is None  # still alive
    kept = {e["reason"]: e["args"] for e in deadletter.entries()}
    assert kept == {
        "not a message: not JSON (Expecting value)": ["not json at all"],
        "not a message: a JSON list, not an object": ["[1, 2]"],
        "not a message: no properties with a delivery tag":
            [json.dumps({"body": "e30=", "properties": {}})],
        "not a message: its body is not base64 (Incorrect padding)": [bad_body],
    }


def test_two_workers_racing_on_the_same_batches_store_each_once(make_worker, broker):
    # Both kinds of consumer share the queue: two bulk consumer processes and a Celery worker.
    make_worker(concurrency=2, kind="bulk")
    make_worker(concurrency=2)
    batches = [node_batch(node=f"gpu-r{n:02d}", seq=s, samples=3, start=START + s * 30)
               for n in range(6) for s in range(1, 6)]
    # Every batch is delivered three times (redeliveries, a replayed spool, a retry).
    with app.producer_or_acquire() as producer:
        for _ in range(3):
            for batch in batches:
                app.send_task("clusterui.ingest", args=[batch], queue="ingest",
                              producer=producer)
    began = time.monotonic()
    peak = broker.llen("ingest")
    wait_for(lambda: held(broker) == 0, timeout=120,
             what="the queue to drain")
    rows, distinct = gpu_rows()
    record("two_workers_racing", {
        "produced": len(batches) * 24, "deliveries": 3 * len(batches), "stored": rows,
        "lost": len(batches) * 24 - distinct, "duplicated": rows - distinct,
        "drain_s": round(time.monotonic() - began, 1), "queue_depth_after_send": peak})
    assert IngestBatch.objects.count() == len(batches)
    assert (rows, distinct) == (len(batches) * 24, len(batches) * 24)
