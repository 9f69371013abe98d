"""A packed day's hot partition is truncated back to its empty size by the compaction run that
packs its last hour: nothing is lost, late data for that day still lands and is merged, a
partition holding a row is never truncated, and a partition another transaction is using is
left for the next run. Real PostgreSQL, samples through the real ingest writer."""

import datetime as dt

import numpy as np
import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from clusterui.findings.runner import run_pass
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.inventory.models import Gpu
from clusterui.telemetry import codec, compaction, packed, partitions
from clusterui.telemetry.metrics import (
    GPU_METRIC_NAMES,
    GPU_SAMPLE_TABLE,
    NIC_ROLLUP_DUE_TABLE,
    NIC_ROLLUP_TABLES,
    PACKED_TABLES,
)
from tests.factories import node_batch

pytestmark = pytest.mark.django_db
NOW = timezone.now()
# Two days ago: wholly before the horizon, inside the raw retention ingest enforces.
DAY = (NOW - dt.timedelta(days=2)).astimezone(dt.UTC).date()
DAY_START = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.UTC)
HOT = partitions.partition_name(GPU_SAMPLE_TABLE, DAY)


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def size(name: str) -> int:
    return fetch("SELECT pg_total_relation_size(%s::regclass)", [name])[0][0]


def count(name: str) -> int:
    return fetch(f'SELECT count(*) FROM "{name}"')[0][0]


def store(start: dt.datetime, *, samples: int, seq: int, gpus: int = 2) -> None:
    """``samples`` samples 10 s apart from ``start`` for each of ``gpus`` GPUs, no job (so
    no detector holds compaction back), through validation and the ingest writer."""
    result = store_batch(validate_batch(node_batch(
        seq=seq, gpus=gpus, samples=samples, start=start.timestamp(), job=None, nics=0)))
    assert result.gpu_samples == gpus * samples


def store_late(start: dt.datetime, *, seq: int) -> None:
    """One GPU's sample at ``start``, after its node sent newer ones (a spool replayed late),
    and the detector pass that reads it: until then it holds compaction back."""
    store(start, samples=1, seq=seq, gpus=1)
    run_pass(NOW)


def gpu_ids() -> list[int]:
    return list(Gpu.objects.order_by("id").values_list("id", flat=True))


def day_samples() -> list[tuple[int, codec.Block]]:
    return packed.raw_samples(gpu_ids(), DAY_START, DAY_START + dt.timedelta(days=1))


def as_packed(blocks):
    """The blocks as a chunk stores them (each metric at its codec precision)."""
    return [(g, codec.unpack(codec.pack(b.start, b.ts, b.job, b.values, b.nulls)))
            for g, b in blocks]


def assert_same(got, want):
    assert [(g, b.start, len(b)) for g, b in got] == [(g, b.start, len(b)) for g, b in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert a.ts.tolist() == b.ts.tolist() and a.job.tolist() == b.job.tolist()
        for m in GPU_METRIC_NAMES:
            np.testing.assert_array_equal(a.nulls[m], b.nulls[m], err_msg=m)
            np.testing.assert_array_equal(a.values[m], b.values[m], err_msg=m)


@pytest.fixture
def empty_size():
    """The hot partition's size before anything is written to it."""
    partitions.ensure_partitions([DAY])
    assert count(HOT) == 0
    return size(HOT)


def test_a_packed_days_partition_is_truncated_and_every_sample_reads_back(empty_size):
    store(DAY_START + dt.timedelta(hours=1), samples=360, seq=1)
    store(DAY_START + dt.timedelta(hours=2), samples=360, seq=2)
    full = size(HOT)
    assert full > 10 * empty_size
    before = day_samples()
    assert sum(len(b) for _, b in before) == 2 * 2 * 360

    result = compaction.compact(NOW)
    assert (result.rows, result.truncated) == (2 * 2 * 360, 1)
    assert result.freed_bytes == full - empty_size
    assert size(HOT) == empty_size  # the dead rows and their index entries are gone
    assert_same(day_samples(), as_packed(before))
    # Nothing more to give back: the next run leaves the empty partition alone.
    assert compaction.compact(NOW).truncated == 0


def test_a_late_sample_after_the_truncate_lands_and_is_merged_by_the_next_run(empty_size):
    start = DAY_START + dt.timedelta(hours=1)
    store(start, samples=360, seq=1)
    assert compaction.compact(NOW).truncated == 1
    before = day_samples()
    # A spool replayed two days late: one GPU's sample 5 s after the hour's first.
    store_late(start + dt.timedelta(seconds=5), seq=2)
    assert count(HOT) == 1  # in the partition that was truncated, which stays
    result = compaction.compact(NOW)
    assert (result.rows, result.chunks, result.merged, result.truncated) == (1, 1, 1, 1)
    assert size(HOT) == empty_size
    after = day_samples()
    assert [len(b) for _, b in after] == [361, 360]
    late = packed.dt_to_ms(start + dt.timedelta(seconds=5))
    assert after[0][1].ts[:3].tolist() == [late - 5000, late, late + 5000]
    assert_same(after[1:], before[1:])


def test_a_partition_holding_a_row_is_never_truncated(empty_size, monkeypatch):
    # A past day whose rows are packed, but a late row arrives after the run packed them and
    # before it gets to the truncation: the check under the lock finds it.
    store(DAY_START + dt.timedelta(hours=1), samples=360, seq=1)
    # The current hour's samples: on or after the horizon, their day's partition stays.
    current = compaction.floor_hour(NOW)
    store(current, samples=1, seq=2)
    today = partitions.partition_name(GPU_SAMPLE_TABLE, current.astimezone(dt.UTC).date())
    today_size = size(today)
    roll_up_nics = compaction._roll_up_nics

    def then_a_late_row(*args):
        store_late(DAY_START + dt.timedelta(hours=1, seconds=5), seq=3)
        roll_up_nics(*args)

    monkeypatch.setattr(compaction, "_roll_up_nics", then_a_late_row)
    result = compaction.compact(NOW)
    assert result.rows == 2 * 360 and result.truncated == 0
    assert count(HOT) == 1 and size(HOT) > empty_size
    assert count(today) == 2 and size(today) == today_size
    monkeypatch.undo()
    result = compaction.compact(NOW)
    assert (result.rows, result.merged, result.truncated) == (1, 1, 1)
    assert size(HOT) == empty_size
    assert count(today) == 2 and size(today) == today_size
    assert sum(len(b) for _, b in day_samples()) == 2 * 360 + 1


@pytest.fixture
def clean_packed(clean_samples):
    """The transactional test commits chunks and rollups: not Django's tables, emptied here."""
    yield
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {', '.join((*PACKED_TABLES, *NIC_ROLLUP_TABLES.values()))}, "
                    f"{NIC_ROLLUP_DUE_TABLE}")


@pytest.mark.django_db(transaction=True)  # the other connection must see the partition
def test_a_partition_in_use_is_left_for_the_next_run(clean_packed, monkeypatch):
    monkeypatch.setattr(compaction, "TRUNCATE_LOCK_TIMEOUT", "200ms")
    partitions.ensure_partitions([DAY])
    empty_size = size(HOT)
    store(DAY_START + dt.timedelta(hours=1), samples=360, seq=1)
    before = day_samples()
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"] or None, port=db["PORT"] or None, user=db["USER"],
                         password=db["PASSWORD"] or None, dbname=db["NAME"]) as other:
        # As an ingest transaction writing late rows into that day does.
        other.execute(f'LOCK TABLE "{HOT}" IN ROW EXCLUSIVE MODE')
        result = compaction.compact(NOW)
        assert result.rows == 2 * 360 and not result.unfinished
        assert result.truncated == 0 and size(HOT) > empty_size
        other.rollback()
    result = compaction.compact(NOW)
    assert (result.rows, result.truncated) == (0, 1)
    assert size(HOT) == empty_size
    assert_same(day_samples(), as_packed(before))
