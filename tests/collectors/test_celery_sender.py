"""CelerySender against the real Redis on 127.0.0.1:6379 (db 15, a private queue)."""

import base64
import json
import time
import uuid

import pytest
import redis

from collectors.transport import CelerySender, Shipper, Spool

REDIS_URL = "redis://127.0.0.1:6379/15"


@pytest.fixture
def queue():
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis at {REDIS_URL} is needed for this test: {exc}")
    name = f"test-ingest-{uuid.uuid4().hex[:8]}"
    yield client, name
    client.delete(name)
    client.close()


def decode(raw):
    message = json.loads(raw)
    assert message["headers"]["task"] == "clusterui.ingest"
    assert message["content-type"] == "application/json"
    args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    return args


def test_send_puts_one_json_task_on_the_queue(queue):
    client, name = queue
    sender = CelerySender(REDIS_URL, name)
    batch = {"schema": 1, "agent": {"seq": 7}, "gpus": []}
    sender.send(batch)
    sender.close()
    assert client.llen(name) == 1
    assert decode(client.rpop(name)) == [batch]


def test_configured_url_wins_over_celery_env(queue, monkeypatch):
    client, name = queue
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:6379/9")
    sender = CelerySender(REDIS_URL, name)
    sender.send({"schema": 1})
    sender.close()
    assert client.llen(name) == 1


def test_unreachable_broker_fails_fast_then_spool_replays(queue, tmp_path):
    client, name = queue
    dead = CelerySender("redis://127.0.0.1:1/15", name)
    start = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - kombu's OperationalError or a socket error
        dead.send({"schema": 1})
    assert time.monotonic() - start < 5
    spool = Spool(str(tmp_path), 1_000_000)
    assert Shipper(dead, spool).ship({"schema": 1, "sent_at": 1.0, "agent": {"seq": 1}}) is False
    live = CelerySender(REDIS_URL, name)
    Shipper(live, spool).ship({"schema": 1, "sent_at": 2.0, "agent": {"seq": 2}})
    live.close()
    got = [decode(client.rpop(name))[0]["agent"]["seq"] for _ in range(client.llen(name))]
    assert got == [1, 2]
