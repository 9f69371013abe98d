"""Flushes of different nodes do not wait on each other: a flush locks its nodes' rows (and
its GPUs' and jobs' rows) to serialize with flushes of the same node, but rows of other
tables that only *refer* to a locked row (a job whose origin is that node) must not wait for
it. CI saw a flush of one node of a multi-node job held at its COMMIT until a flush of the
job's origin node ended: the foreign-key check takes FOR KEY SHARE on the referenced row,
which FOR UPDATE blocks and FOR NO KEY UPDATE does not. Two consumers flushing two nodes of
one job, each waiting on the other's lock, would deadlock.

Real PostgreSQL, the real writer, two database sessions.
"""

import threading

import pytest
from django.db import connection

from clusterui.ingest import inventory_cache
from clusterui.ingest.models import IngestBatch
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from clusterui.telemetry import partitions
from tests.factories import node_batch, recent_start
from tests.services import connect, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

START = recent_start()


@pytest.fixture(autouse=True)
def _forget_caches(clean_samples):
    inventory_cache.forget()
    yield
    inventory_cache.forget()
    partitions.forget_known()


def _waiting_on_gpus() -> bool:
    with connect(autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE '%FROM inventory_gpu g%'").fetchone()[0] == 1


def _stored(node: str) -> set[int]:
    return set(IngestBatch.objects.filter(node__name=node).values_list("seq", flat=True))


def test_a_flush_of_another_node_of_the_job_does_not_wait_for_the_origin_nodes_flush():
    # The job's origin is gpu-origin (it reported the job first).
    store_batches([validate_batch(node_batch(node="gpu-origin", seq=1, samples=2,
                                             start=START))])
    # A flush of gpu-origin, stalled after it locked its node: the test holds its GPU rows,
    # which the flush locks next.
    gpus = connect()
    gpus.execute("SELECT g.id FROM inventory_gpu g JOIN inventory_node n ON n.id = g.node_id "
                 "WHERE n.name = 'gpu-origin' FOR UPDATE OF g")
    errors: list[BaseException] = []

    def origin_flush():
        try:
            inventory_cache.forget()  # its GPU upsert runs (and waits on the test's lock)
            store_batches([validate_batch(node_batch(node="gpu-origin", seq=2, samples=2,
                                                     start=START + 20))])
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    origin = threading.Thread(target=origin_flush)
    origin.start()
    try:
        wait_for(_waiting_on_gpus, timeout=30, what="the origin node's flush to hold its node")
        # Meanwhile a flush of two batches of another node of the same job, minutes of data
        # later (the job's row is written more than once in it): it must not wait.
        with connection.cursor() as cur:
            # Waiting would raise LockNotAvailable after this (instead of hanging).
            cur.execute("SET lock_timeout = '10s'")
        try:
            results = store_batches([
                validate_batch(node_batch(node="gpu-other", seq=seq, samples=2,
                                          start=START + 300 * seq))
                for seq in (1, 2)])
        finally:
            with connection.cursor() as cur:
                cur.execute("RESET lock_timeout")
        assert [r.duplicate for r in results] == [False, False]
        assert _stored("gpu-other") == {1, 2}
        assert origin.is_alive()  # the origin's flush really was in progress all along
    finally:
        gpus.close()  # the origin's flush goes on
        origin.join(timeout=60)
    assert not errors, errors
    assert _stored("gpu-origin") == {1, 2}
