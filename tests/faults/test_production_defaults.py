"""Fault figures under the PRODUCTION defaults (issue 14): the other fault tests shorten the
consumer's lease (INGEST_CONSUMER_TTL_S 4 s) and backoff (INGEST_RETRY_BACKOFF_MAX 5 s);
here the consumer process runs with the values a deployment gets when it sets nothing
(read from clusterui.settings in a clean environment, not written down here), a single
consumer, and a poison message in the queue. These tests take a minute or two: bounded,
never shortened by the settings.
"""

import json
import os
import subprocess
import sys
import time

import pytest
import redis as redis_lib

from clusterui.celery import app
from clusterui.ingest import deadletter
from clusterui.ingest.models import IngestBatch
from tests.factories import node_batch, recent_start
from tests.faults.harness import QueueWatch, held, record
from tests.services import ROOT, PrivateRedis, Worker, connect, publish, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

START = recent_start()
TUNED = ("INGEST_CONSUMER_TTL_S", "INGEST_RETRY_BACKOFF_MAX", "CELERY_VISIBILITY_TIMEOUT",
         "CELERY_TASK_TIME_LIMIT", "CELERY_UNACKED_RESTORE_INTERVAL", "INGEST_MAX_DELIVERIES")
POISON = {"DJANGO_SETTINGS_MODULE": "tests.faults.writerfault.settings",
          "CLUSTERUI_TEST_WRITER_FAULT_NODE": "gpu-poison"}


def production_defaults() -> dict:
    """The defaults of clusterui.settings for the lease and backoff settings, read in a
    subprocess whose environment sets none of them."""
    env = {k: v for k, v in os.environ.items() if k not in TUNED}
    env.update(DJANGO_SETTINGS_MODULE="clusterui.settings", SECRET_KEY="x")
    code = ("import json; from clusterui import settings as s; print(json.dumps({"
            "'INGEST_CONSUMER_TTL_S': s.INGEST_CONSUMER_TTL_S, "
            "'INGEST_RETRY_BACKOFF_MAX': s.INGEST_RETRY_BACKOFF_MAX, "
            "'INGEST_MAX_DELIVERIES': s.INGEST_MAX_DELIVERIES, "
            "'CELERY_VISIBILITY_TIMEOUT': s.CELERY_BROKER_TRANSPORT_OPTIONS"
            "['visibility_timeout'], 'CELERY_TASK_TIME_LIMIT': s.CELERY_TASK_TIME_LIMIT, "
            "'CELERY_UNACKED_RESTORE_INTERVAL': s.CELERY_BROKER_TRANSPORT_OPTIONS"
            "['unacked_restore_interval']}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    values = json.loads(out.strip().splitlines()[-1])
    assert values["INGEST_CONSUMER_TTL_S"] >= 30  # the shortened test value is not in force
    return {k: str(v) for k, v in values.items()}


def blocked_ingests() -> int:
    with connect(autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            # The flush locks its nodes' rows first (SELECT ... FOR UPDATE, the dedupe
            # high-water mark), then upserts them: either statement waits here.
            "AND query LIKE '%inventory_node%'").fetchone()[0]


def sessions() -> list[tuple]:
    """The database's other sessions: state, what they wait on, their statement."""
    with connect(autocommit=True) as conn:
        return conn.execute(
            "SELECT state, wait_event_type, wait_event, left(query, 120) "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()").fetchall()


def stored(node: str) -> set[int]:
    return set(IngestBatch.objects.filter(node__name=node).values_list("seq", flat=True))


def test_a_killed_single_consumer_recovers_its_own_messages_with_default_settings(
        make_worker, broker, broker_url):
    """One consumer, SIGKILLed mid-flush, restarted at once (as systemd or the supervisor
    would): nothing else sweeps. The new one recovers its predecessor's in-flight messages
    once the predecessor's liveness key expires (TTL) at its next periodic sweep."""
    defaults = production_defaults()
    env = {**defaults, **POISON}
    ttl = int(defaults["INGEST_CONSUMER_TTL_S"])
    watch = QueueWatch(broker_url)
    first = make_worker(kind="bulk", extra_env=env)
    publish(node_batch(node="gpu-held", seq=1, samples=2, start=START))
    wait_for(lambda: stored("gpu-held") == {1}, timeout=60, what="the first batch")
    lock = connect()
    try:
        # The lock a flush of gpu-held holds (flushes of the other nodes of its job do not
        # wait on it: tests/ingest/test_flush_locks.py).
        lock.execute("SELECT id FROM inventory_node WHERE name = 'gpu-held' "
                     "FOR NO KEY UPDATE")
        # In flight together: good batches, the poison (its storing raises OverflowError),
        # and the held node's batch that blocks the flush until the kill.
        publish(*[node_batch(node=f"gpu-g{n}", seq=1, samples=2, start=START)
                  for n in range(5)],
                node_batch(node="gpu-poison", seq=1, samples=2, start=START),
                node_batch(node="gpu-held", seq=2, samples=2, start=START + 20))
        try:
            wait_for(lambda: blocked_ingests() == 1, timeout=60, what="the flush to block")
        except AssertionError as exc:  # say what the sessions were doing (CI saw this once)
            raise AssertionError(f"{exc}; sessions: {sessions()}") from None
        in_flight = held(broker)
        first.kill()
        killed = time.monotonic()
    finally:
        lock.close()
    second = make_worker(kind="bulk", extra_env=env)
    # Good batches published after the restart land at once: the new consumer is not stuck.
    publish(*[node_batch(node=f"gpu-g{n}", seq=2, samples=2, start=START + 20)
              for n in range(5)])
    wait_for(lambda: all(stored(f"gpu-g{n}") >= {2} for n in range(5)), timeout=60,
             what="the batches published after the restart")
    new_stored_after = time.monotonic() - killed
    wait_for(lambda: stored("gpu-held") == {1, 2}, timeout=ttl + 60, interval=0.5,
             what="the killed consumer's messages to come back")
    redelivery = time.monotonic() - killed
    wait_for(lambda: held(broker) == 0 and len(deadletter.entries()) == 1, timeout=60,
             what="the queue to drain and the poison to be set aside")
    peak = watch.stop()
    (entry,) = deadletter.entries()
    assert entry["reason"] == "OverflowError: int too big to convert (injected by the test)"
    assert all(stored(f"gpu-g{n}") == {1, 2} for n in range(5))
    assert second.proc.poll() is None
    assert f"requeued {in_flight} in-flight messages of dead consumer" in second.log()
    record("single_consumer_sigkill_default_settings", {
        "messages_in_flight_at_kill": in_flight,
        "new_batches_stored_after_restart_s": round(new_stored_after, 1),
        "redelivery_after_kill_s": round(redelivery, 1),
        "peak_queue_depth": peak, "dead_lettered": len(deadletter.entries()),
        "settings": {k: int(v) for k, v in defaults.items()}})
    assert redelivery >= ttl - 10  # the lease really was the production one


def test_redis_away_with_the_default_backoff(clean_samples, tmp_path):
    """The broker's Redis stopped for 20 s under a single consumer with the default backoff
    cap: measured from Redis's return to the first batch published after it stored."""
    defaults = production_defaults()
    server = PrivateRedis(tmp_path / "redis").start()
    client = redis_lib.Redis.from_url(server.url)
    worker = Worker(server.url, kind="bulk", extra_env={**defaults, **POISON}).start()
    watch = QueueWatch(server.url)
    raw = _raw_messages([node_batch(node="gpu-r", seq=s, samples=2, start=START + s * 20)
                         for s in (1, 2)] +
                        [node_batch(node="gpu-poison", seq=1, samples=2, start=START)])
    try:
        client.lpush("ingest", raw[0], raw[2])
        wait_for(lambda: stored("gpu-r") == {1}, timeout=60, what="the first batch")
        server.stop()
        down = time.monotonic()
        time.sleep(20)
        server.start()
        back = time.monotonic()
        client.lpush("ingest", raw[1])
        wait_for(lambda: stored("gpu-r") == {1, 2}, timeout=120, interval=0.2,
                 what="the consumer to come back")
        recovery = time.monotonic() - back
        assert worker.proc.poll() is None
        reasons = [json.loads(e)["reason"] for e in client.lrange(deadletter.KEY, 0, -1)]
    finally:
        peak = watch.stop()
        worker.stop()
        server.stop()
    assert reasons == ["OverflowError: int too big to convert (injected by the test)"]
    assert "Redis unreachable" in worker.log()
    record("redis_away_20s_default_backoff", {
        "outage_s": round(back - down, 1), "stored_after_redis_back_s": round(recovery, 1),
        "peak_queue_depth": peak,
        "settings": {k: int(v) for k, v in defaults.items()}})


def _raw_messages(envelopes) -> list[bytes]:
    """The queue items a collector's publish makes (via the test broker, then taken)."""
    conn = redis_lib.Redis.from_url(app.conf.broker_url)
    conn.delete("ingest")
    publish(*envelopes)
    items = conn.lrange("ingest", 0, -1)[::-1]  # oldest first
    conn.delete("ingest")
    return items
