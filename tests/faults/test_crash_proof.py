"""No input can stop ingestion (issue 14), with real consumer processes, Redis, PostgreSQL.

1. A batch whose storing raises a non-database exception inside the transaction (the
   tester's throttle_reasons = 2**63 made COPY raise OverflowError; here the test-only app
   ``tests.faults.writerfault`` raises it for one node) is dead-lettered alone, by the bulk
   consumer and by a Celery worker; the good batches around it land; the process lives on.
2. A message that kills every consumer holding it (the harness SIGKILLs any consumer whose
   in-flight list holds it) is dead-lettered after INGEST_MAX_DELIVERIES deaths; every good
   batch before and after it is stored; the supervisor restarts the dead children with
   backoff; nothing crash-loops.
"""

import os
import signal
import threading
import time

import pytest

from clusterui.ingest import deadletter
from clusterui.ingest.messages import envelope_of
from clusterui.ingest.models import IngestBatch
from clusterui.ingest.queue import PREFIX
from tests.factories import node_batch, recent_start
from tests.faults.harness import held, record
from tests.services import publish, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

START = recent_start()


@pytest.mark.parametrize("kind", ["bulk", "celery"])
def test_a_batch_that_breaks_the_writer_is_dead_lettered_and_the_worker_goes_on(
        make_worker, broker, kind):
    worker = make_worker(kind=kind, extra_env={
        "DJANGO_SETTINGS_MODULE": "tests.faults.writerfault.settings",
        "CLUSTERUI_TEST_WRITER_FAULT_NODE": "gpu-overflow"})
    before = [node_batch(node=f"gpu-a{n}", samples=2, start=START) for n in range(5)]
    after = [node_batch(node=f"gpu-b{n}", samples=2, start=START) for n in range(5)]
    publish(*before, node_batch(node="gpu-overflow", samples=2, start=START), *after)
    wait_for(lambda: IngestBatch.objects.count() == 10 and held(broker) == 0, timeout=60,
             what="the good batches around the bad one")
    (entry,) = deadletter.entries()
    assert entry["reason"] == "OverflowError: int too big to convert (injected by the test)"
    assert entry["args"][0]["node"] == "gpu-overflow"
    # Alive, and still consuming: the same bad batch again, then a good one.
    publish(node_batch(node="gpu-overflow", seq=2, samples=2, start=START + 60),
            node_batch(node="gpu-c0", samples=2, start=START))
    wait_for(lambda: IngestBatch.objects.count() == 11 and len(deadletter.entries()) == 2,
             timeout=60, what="the worker to go on")
    assert worker.proc.poll() is None
    assert "gpu-overflow" not in set(IngestBatch.objects.values_list("node__name", flat=True))


class Assassin:
    """SIGKILLs any bulk consumer process whose in-flight list has held ``poison`` for a
    second, i.e. while it stores it (the test app makes that take a minute): a crash on that
    message, as a segfault or the OOM killer would do. Holding it only to set it aside
    takes milliseconds and is no crash. Counts its kills."""

    def __init__(self, client, poison: bytes):
        self.client = client
        self.poison = poison
        self.kills: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        seen: dict[bytes, float] = {}
        while not self._stop.wait(0.05):
            for key in self.client.scan_iter(f"{PREFIX}:ingest:inflight:*"):
                if self.poison not in self.client.lrange(key, 0, -1):
                    continue
                if time.monotonic() - seen.setdefault(key, time.monotonic()) >= 1.0:
                    pid = int(key.decode().rsplit(":", 2)[-2])
                    try:
                        os.kill(pid, signal.SIGKILL)
                        self.kills.append(time.monotonic())
                    except ProcessLookupError:
                        pass  # killed already; the key waits for its sweep
                    # One kill per death: wait until that list is gone (restored).
                    while self.client.exists(key) and not self._stop.is_set():
                        time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return len(self.kills)


def test_a_message_that_kills_its_consumers_is_dead_lettered_after_max_deliveries(
        make_worker, broker):
    before = [node_batch(node=f"gpu-p{n:02d}", seq=1, samples=2, start=START) for n in range(20)]
    after = [node_batch(node=f"gpu-p{n:02d}", seq=2, samples=2, start=START + 20)
             for n in range(20)]
    publish(*before, node_batch(node="gpu-poison", seq=2, samples=1, start=START + 20))
    (poison,) = [m for m in broker.lrange("ingest", 0, -1)
                 if envelope_of(m)["node"] == "gpu-poison"]
    assassin = Assassin(broker, poison)
    began = time.monotonic()
    worker = make_worker(kind="bulk", concurrency=2, extra_env={
        "INGEST_MAX_DELIVERIES": "3", "DJANGO_SETTINGS_MODULE": "tests.faults.writerfault.settings",
        "CLUSTERUI_TEST_WRITER_SLOW_NODE": "gpu-poison"})
    try:
        wait_for(lambda: len(assassin.kills) >= 1, timeout=60, what="the first crash")
        publish(*after)
        wait_for(lambda: any(e["reason"].startswith("took down") for e in deadletter.entries()),
                 timeout=120, what="the poison to be dead-lettered")
        dead_lettered_after = time.monotonic() - began
        wait_for(lambda: IngestBatch.objects.count() == 40 and held(broker) == 0, timeout=60,
                 what="every good batch")
        kills_then = len(assassin.kills)
        time.sleep(5)  # nothing crash-loops: no further kill, no restart
    finally:
        kills = assassin.stop()
    assert kills == kills_then == 3
    (entry,) = deadletter.entries()
    assert entry["reason"] == "took down a consumer 3 times"
    assert entry["args"][0]["node"] == "gpu-poison" and entry["args"][0]["agent"]["seq"] == 2
    stored = set(IngestBatch.objects.values_list("node__name", "seq"))
    assert stored == {(f"gpu-p{n:02d}", s) for n in range(20) for s in (1, 2)}
    assert worker.proc.poll() is None  # the supervisor never exits because a child died
    log = worker.log()
    assert log.count("exited with code -9") == 3
    assert "restarting in 1 s" in log
    assert broker.llen("ingest:suspect") == 0
    assert broker.hlen(f"{PREFIX}:ingest:deliveries") == 0
    record("poison_kills_consumers", {
        "good_batches": 40, "stored_good_batches": len(stored), "consumer_deaths": kills,
        "dead_lettered_after_s": round(dead_lettered_after, 1),
        "restarts_logged": log.count("restarting in")})
