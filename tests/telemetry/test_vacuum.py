"""Where PostgreSQL's autovacuum is off (as on this project's machines: the test asserts it),
the product vacuums what it churns: the hot partition compaction deletes from reuses that
space for the next hour instead of growing by it. Real PostgreSQL, samples through the real
ingest writer, compaction and the beat task's own function."""

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.telemetry import compaction, partitions, vacuum
from clusterui.telemetry.metrics import (
    GPU_SAMPLE_TABLE,
    NIC_ROLLUP_DUE_TABLE,
    NIC_ROLLUP_TABLES,
    PACKED_TABLES,
)
from tests.factories import node_batch

# VACUUM cannot run inside a transaction block: the test commits, and cleans up after.
pytestmark = pytest.mark.django_db(transaction=True)
NOW = timezone.now()
DAY = (NOW - dt.timedelta(days=2)).astimezone(dt.UTC).date()
DAY_START = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.UTC)
HOT = partitions.partition_name(GPU_SAMPLE_TABLE, DAY)
HOUR_SAMPLES = 360  # one hour at 10 s


@pytest.fixture(autouse=True)
def clean_packed(clean_samples):
    """The test commits samples, chunks and rollups: not Django's tables, emptied here."""
    yield
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {', '.join((*PACKED_TABLES, *NIC_ROLLUP_TABLES.values()))}, "
                    f"{NIC_ROLLUP_DUE_TABLE}")


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def heap_pages() -> int:
    return fetch("SELECT pg_relation_size(%s::regclass, 'main')", [HOT])[0][0] // 8192


def store_hour(hour: int, seq: int) -> None:
    start = DAY_START + dt.timedelta(hours=hour)
    result = store_batch(validate_batch(node_batch(
        seq=seq, gpus=8, samples=HOUR_SAMPLES, start=start.timestamp(), job=None, nics=0)))
    assert result.gpu_samples == 8 * HOUR_SAMPLES


def flush_stats() -> None:
    """Make this session's row counts visible in pg_stat_user_tables now (PostgreSQL 15
    publishes them at most once a second otherwise)."""
    fetch("SELECT pg_stat_force_next_flush()")
    fetch("SELECT 1")
    fetch("SELECT pg_stat_clear_snapshot()")


def test_a_hot_partition_compaction_deleted_from_reuses_its_space():
    assert not vacuum.autovacuum_on(), "this test is about servers with autovacuum off"
    store_hour(0, seq=1)
    store_hour(1, seq=2)
    # Half past one: hour 0 is packed (deleted from the hot partition), hour 1 stays hot,
    # so the day's partition is not truncated.
    result = compaction.compact(now=DAY_START + dt.timedelta(hours=1, minutes=30))
    assert result.rows == 8 * HOUR_SAMPLES and result.truncated == 0
    pages = heap_pages()
    flush_stats()
    assert HOT in dict(vacuum.due_tables())  # 2,880 dead rows against 2,880 live ones

    done = vacuum.vacuum_due()
    assert HOT in dict(done.tables)
    flush_stats()
    assert HOT not in dict(vacuum.due_tables())
    # The next hour fills the space the packed hour left: the partition does not grow by an
    # hour of samples (without the vacuum it grows by as many pages as it had).
    store_hour(2, seq=3)
    assert heap_pages() <= pages * 1.1, (pages, heap_pages())


def test_a_table_with_few_dead_rows_is_left_alone():
    store_hour(0, seq=1)
    store_hour(1, seq=2)
    flush_stats()
    assert HOT not in dict(vacuum.due_tables())  # inserted, nothing deleted
    assert HOT not in dict(vacuum.vacuum_due().tables)


def test_beat_runs_it_every_five_minutes_as_a_registered_task():
    from clusterui.celery import app

    entry = app.conf.beat_schedule["vacuum-tables"]
    assert entry["task"] == "clusterui.telemetry.vacuum" and entry["schedule"] == 300
    app.loader.import_default_modules()  # what a worker does at start: autodiscovery
    assert "clusterui.telemetry.vacuum" in app.tasks
