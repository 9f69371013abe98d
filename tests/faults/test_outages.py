"""A service down for two minutes while a simulated cluster feeds in: no sample lost, none
duplicated (issue 9), and the collectors' spool replays in order (issue 3).

Each test counts exactly: GPU samples the collectors produced (the simulator's report) vs
rows stored and distinct (gpu, ts) rows stored. Figures go to test-output/faults/.
"""

import os
import time

import pytest

from tests.faults.harness import QueueWatch, SimFeed, all_stored, compare, record, wait_until
from tests.services import PrivatePostgres, PrivateRedis, Worker, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

OUTAGE_S = float(os.environ.get("FAULT_OUTAGE_S", "120"))


def test_redis_down_for_two_minutes(clean_samples, tmp_path):
    redis = PrivateRedis(tmp_path / "redis").start()  # append-only file: queued work survives
    worker = Worker(redis.url, kind="bulk").start()
    watch = QueueWatch(redis.url)
    feed = SimFeed(tmp_path, redis.url)
    try:
        time.sleep(10)
        redis.stop()
        down = time.monotonic()
        time.sleep(OUTAGE_S)
        assert feed.spooled() >= 2 * (OUTAGE_S / 2) * 0.8, "the collectors spooled the outage"
        redis.start()
        restarted = time.monotonic()
        outage = restarted - down
        wait_until(lambda: feed.spooled() == 0, 120, "the collectors to replay their spool")
        time.sleep(5)
        produced = feed.stop()
        wait_until(lambda: all_stored(produced, database_url()), 180, "every batch to land")
        recovery = time.monotonic() - restarted
        assert worker.proc.poll() is None, "the worker survived the outage"
    finally:
        feed.kill()
        peak = watch.stop()
        worker.stop()
        redis.stop()
    figures = compare(produced, database_url())
    record("redis_down", {**figures, "outage_s": round(outage, 1), "recovery_s": round(recovery, 1),
                          "peak_queue_depth": peak})
    assert figures["lost"] == 0 and figures["duplicated"] == 0
    assert figures["stored"] == figures["produced"] >= 2 * 8 * (OUTAGE_S + 10)
    for node, have in figures["nodes"].items():
        # Stored in the order the collector produced them, each batch once.
        assert have["seqs"] == sorted(have["seqs"]), node
        assert have["seqs"] == list(range(1, produced[node]["last_seq"] + 1)), node


def test_postgres_down_for_two_minutes(broker, broker_url, clean_samples, tmp_path):
    pg = PrivatePostgres(tmp_path / "pg").init()
    pg.migrate()
    # Transactions of at most 100 rows (a node batch here is 8 GPUs x a few samples): the
    # backlog after the outage is flushed in several, by the consumer's storing thread, on a
    # connection opened after the restart.
    worker = Worker(broker_url, kind="bulk", extra_env={
        "DATABASE_URL": pg.url, "INGEST_BULK_MAX_ROWS": "100"}).start()
    watch = QueueWatch(broker_url)
    feed = SimFeed(tmp_path, broker_url)
    try:
        time.sleep(10)
        pg.stop()
        down = time.monotonic()
        time.sleep(OUTAGE_S)
        pg.start()
        restarted = time.monotonic()
        outage = restarted - down
        time.sleep(5)
        produced = feed.stop()
        wait_until(lambda: all_stored(produced, pg.url), 240, "every batch to land")
        recovery = time.monotonic() - restarted
        assert worker.proc.poll() is None, "the worker survived the outage"
        figures = compare(produced, pg.url)
    finally:
        feed.kill()
        peak = watch.stop()
        worker.stop()
        pg.remove()
    record("postgres_down", {**figures, "outage_s": round(outage, 1),
                             "recovery_s": round(recovery, 1), "peak_queue_depth": peak})
    assert figures["lost"] == 0 and figures["duplicated"] == 0
    assert figures["stored"] == figures["produced"] >= 2 * 8 * (OUTAGE_S + 10)
    assert "database unavailable" in worker.log()  # it was retried, not dropped
