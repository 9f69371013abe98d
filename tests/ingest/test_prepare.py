"""What the bulk consumer prepares of a batch before the writer sees it (``ingest.prepare``):
the days its samples are stored on must be the days PostgreSQL puts them on, or a flush
finds no partition for a sample and fails."""

import datetime as dt

import pytest

from clusterui.ingest import prepare
from clusterui.ingest.validate import validate_batch
from tests.factories import node_batch

MIDNIGHT = dt.datetime(2026, 11, 28, tzinfo=dt.UTC).timestamp()
DAY = dt.date(2026, 11, 28)


@pytest.mark.parametrize(("lo", "hi", "days"), [
    (MIDNIGHT + 3600, MIDNIGHT + 7200, {DAY}),
    (MIDNIGHT, MIDNIGHT, {DAY}),
    (MIDNIGHT - 1e-6, MIDNIGHT - 1e-6, {DAY - dt.timedelta(days=1)}),
    # 0.4 us before midnight is stored at midnight (timestamptz keeps microseconds).
    (MIDNIGHT - 4e-7, MIDNIGHT - 4e-7, {DAY}),
    (MIDNIGHT - 0.5, MIDNIGHT + 0.5, {DAY - dt.timedelta(days=1), DAY}),
    (MIDNIGHT + 86_399.9999996, MIDNIGHT + 86_399.9999996, {DAY + dt.timedelta(days=1)}),
    (MIDNIGHT + 10, MIDNIGHT + 2 * 86_400 - 10, {DAY, DAY + dt.timedelta(days=1)}),
])
def test_the_days_are_those_the_samples_are_stored_on(lo, hi, days):
    assert prepare._days(lo, hi, None) == days
    stored = {(prepare.dt_of(t)).date() for t in (lo, hi)}  # the microsecond rounding
    assert stored <= days


def test_a_prepared_batch_has_its_rows_as_columns():
    start = MIDNIGHT - 15  # two samples each side of midnight
    envelope = node_batch(boot_id="prep", samples=4, gpus=2, start=start, job=None)
    batch = validate_batch(envelope, retention_days=3650, max_span_s=10 ** 9,
                           now=MIDNIGHT + 60)
    made = prepare.Prepared.of(batch)
    assert made.days == {DAY - dt.timedelta(days=1), DAY}
    assert made.span == (min(r[0] for r in batch.gpu_rows), max(r[0] for r in batch.gpu_rows))
    ts, gpu, job, *metrics = made.gpu
    assert list(zip(gpu, job, *metrics, strict=True)) == [r[1:] for r in batch.gpu_rows]
    assert ts == prepare.pg_micros([r[0] for r in batch.gpu_rows])
    assert prepare.Prepared.of(batch) is made  # unchanged rows: made once
    batch.gpu_rows = batch.gpu_rows[:1]
    assert prepare.Prepared.of(batch).gpu[1] == (batch.gpu_rows[0][1],)  # rows changed
