"""RedisSender against the real Redis (the test broker, private queues): what it queues is
the item Celery itself would queue, kombu reads it back as that task call, and the server's
bulk consumer stores it in PostgreSQL. Real Celery workers take it in
``tests/pipeline/test_collector_to_database.py`` and ``tests/ingest/test_signatures.py``."""

import base64
import json
import time
import uuid

import pytest
import redis
from celery import Celery
from kombu import Connection

from clusterui.ingest import messages
from clusterui.ingest.consumer import Consumer
from clusterui.ingest.models import IngestBatch
from clusterui.ingest.queue import ReliableQueue
from collectors.transport import RedisSender, Shipper, Spool
from tests.factories import node_batch


@pytest.fixture
def queue(broker):
    name = f"test-ingest-{uuid.uuid4().hex[:8]}"
    yield broker, name
    broker.delete(name)


def decode(raw):
    message = json.loads(raw)
    assert message["headers"]["task"] == "clusterui.ingest"
    assert message["content-type"] == "application/json"
    args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    assert kwargs == {}
    return args


def test_send_puts_one_json_task_on_the_queue(queue, broker_url):
    client, name = queue
    sender = RedisSender(broker_url, name)
    batch = {"schema": 1, "agent": {"seq": 7}, "gpus": [], "x": [1.5, None, "é"]}
    sender.send(batch)
    sender.close()
    assert client.llen(name) == 1
    raw = client.rpop(name)
    assert decode(raw) == [batch]
    assert messages.envelope_of(raw) == batch  # the bulk consumer's own decoder


def test_the_item_has_the_shape_celery_itself_publishes(queue, broker_url):
    """Celery 5 (protocol 2) through kombu's Redis transport, as the server's workers run it:
    every header and property Celery writes is there with the same value, bar the ids, the
    origin and the argument's repr, which are per call."""
    client, name = queue
    batch = {"schema": 1, "node": "gpu-a017", "agent": {"seq": 3}}
    app = Celery("reference", broker=broker_url, set_as_current=False)
    app.conf.update(task_serializer="json", task_ignore_result=True)
    with app.connection_for_write() as conn:
        app.send_task("clusterui.ingest", args=[batch], queue=name, connection=conn,
                      ignore_result=True)
    app.close()
    celery_item = json.loads(client.rpop(name))
    RedisSender(broker_url, name).send(batch)
    ours = json.loads(client.rpop(name))

    per_call = {"id", "root_id", "origin", "argsrepr"}
    assert set(ours["headers"]) == set(celery_item["headers"])
    for key in set(celery_item["headers"]) - per_call:
        assert ours["headers"][key] == celery_item["headers"][key], key
    assert ours["headers"]["root_id"] == ours["headers"]["id"]
    # reply_to names the publishing app, which has no reply queue: left out.
    assert set(ours["properties"]) == set(celery_item["properties"]) - {"reply_to"}
    for key in ("delivery_mode", "delivery_info", "priority", "body_encoding"):
        assert ours["properties"][key] == celery_item["properties"][key], key
    assert ours["properties"]["correlation_id"] == ours["headers"]["id"]
    for key in ("content-type", "content-encoding"):
        assert ours[key] == celery_item[key]
    assert json.loads(base64.b64decode(ours["body"])) == json.loads(
        base64.b64decode(celery_item["body"]))


def test_kombu_reads_it_back_as_the_task_call(queue, broker_url):
    _client, name = queue
    batch = node_batch(seq=5, samples=1)
    RedisSender(broker_url, name).send(batch)
    with Connection(broker_url) as conn:
        simple = conn.SimpleQueue(name)
        message = simple.get(timeout=5)
        assert message.headers["task"] == "clusterui.ingest"
        args, kwargs, embed = message.decode()
        assert args == [batch] and kwargs == {} and embed["chain"] is None
        message.ack()
        simple.close()


@pytest.mark.django_db(transaction=True)
def test_the_bulk_consumer_stores_what_it_sends(queue, broker_url, clean_samples):
    client, name = queue
    sender = RedisSender(broker_url, name)
    sender.send(node_batch(node="gpu-rs1", seq=1, samples=2))
    sender.close()
    consumer = Consumer(queue=ReliableQueue(client, name, ttl_s=60))
    result = consumer.flush(consumer.queue.take(10, block_s=0))
    consumer.queue.ack()
    assert (result.stored, result.refused, result.dead_lettered) == (1, 0, 0)
    assert IngestBatch.objects.get(node__name="gpu-rs1").gpu_samples == 2 * 8


def test_only_redis_urls_are_taken():
    with pytest.raises(ValueError, match=r"broker_url: the collector speaks Redis only .* amqp"):
        RedisSender("amqp://guest@127.0.0.1//")


def test_unreachable_broker_fails_fast_then_spool_replays(queue, broker_url, tmp_path):
    client, name = queue
    dead = RedisSender("redis://127.0.0.1:1/15", name)
    start = time.monotonic()
    with pytest.raises(redis.exceptions.ConnectionError):
        dead.send({"schema": 1})
    assert time.monotonic() - start < 5
    spool = Spool(str(tmp_path), 1_000_000)
    assert Shipper(dead, spool).ship({"schema": 1, "sent_at": 1.0, "agent": {"seq": 1}}) is False
    live = RedisSender(broker_url, name)
    assert Shipper(live, spool).ship({"schema": 1, "sent_at": 2.0, "agent": {"seq": 2}})
    live.close()
    got = [decode(client.rpop(name))[0]["agent"]["seq"] for _ in range(client.llen(name))]
    assert got == [1, 2]
