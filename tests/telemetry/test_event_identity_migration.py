"""Migration telemetry 0013 on a database that already holds copies of events (stored
before events were deduplicated): one of each is kept, distinct events all are, and the
constraint the writer relies on is in place afterwards. Real PostgreSQL, Django's own
migration executor."""

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from clusterui.inventory.models import Cluster, Gpu, Node

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("telemetry", "0012_latest_fillfactor")
AFTER = ("telemetry", "0013_gpuevent_identity")
T = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)


def migrate(target) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


def latest() -> tuple[str, str]:
    """The newest telemetry migration: the tests after this one expect the whole schema."""
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes("telemetry")[0]


def insert(gpu_id: int, seconds: float, kind: str, code, message: str) -> None:
    with connection.cursor() as cur:
        cur.execute("INSERT INTO telemetry_gpuevent (gpu_id, ts, kind, code, message) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (gpu_id, T + dt.timedelta(seconds=seconds), kind, code, message))


def stored() -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute("SELECT gpu_id, extract(epoch FROM ts - %s), kind, code, message "
                    "FROM telemetry_gpuevent ORDER BY id", (T,))
        return [(g, float(s), k, c, m) for g, s, k, c, m in cur.fetchall()]


def test_the_migration_keeps_one_copy_of_each_event_and_every_distinct_one():
    node = Node.objects.create(cluster=Cluster.objects.create(name="mig"), name="gpu-m1",
                               first_seen=T, last_seen=T)
    a, b = (Gpu.objects.create(node=node, uuid=f"GPU-m-{i}", index=i, first_seen=T,
                               last_seen=T).id for i in range(2))
    migrate(BEFORE)
    try:
        for _copy in range(3):  # a spool resent twice
            insert(a, 5, "xid", 79, "GPU has fallen off the bus")
            insert(a, 9, "gpu_lost", None, "")
        insert(b, 5, "xid", 79, "GPU has fallen off the bus")  # another GPU
        insert(a, 5, "xid", 48, "Double Bit ECC Error")  # another code at the same time
        insert(a, 5, "xid", 79, "")  # another message
        insert(a, 6, "xid", 79, "GPU has fallen off the bus")  # another time
    finally:
        migrate(AFTER)
        migrate(latest())
    assert stored() == [
        (a, 5.0, "xid", 79, "GPU has fallen off the bus"), (a, 9.0, "gpu_lost", None, ""),
        (b, 5.0, "xid", 79, "GPU has fallen off the bus"), (a, 5.0, "xid", 48,
                                                            "Double Bit ECC Error"),
        (a, 5.0, "xid", 79, ""), (a, 6.0, "xid", 79, "GPU has fallen off the bus")]
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(a, 9, "gpu_lost", None, "")  # NULL codes are equal for the constraint
