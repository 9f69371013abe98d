"""The packed NIC tier: compaction moves the hot NIC rows of closed hours into one row per
(NIC, hour); every value reads back bit for bit (and every series the same), late rows
merge into their hour (the newer sample winning at a millisecond), the detectors hold it
back as they hold the GPU samples, and a packed day's hot partition is truncated."""

import datetime as dt

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone

from clusterui.inventory.models import Nic
from clusterui.telemetry import compaction, partitions
from clusterui.telemetry.series import nic_series
from tests import rows

pytestmark = pytest.mark.django_db
NOW = timezone.now().replace(minute=0, second=0, microsecond=0)
T0 = NOW - dt.timedelta(hours=4)
METRICS = ["rx_bytes_per_s", "tx_bytes_per_s"]
RNG = np.random.default_rng(5)


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def insert(nics, start, end, *, every_s=10.0, rx=None):
    """Hot NIC rows at millisecond times, rates as the collector computes them (a counter
    of 4-byte words over a measured interval: full float64 fractions), some rx null."""
    ts = []
    t = start
    while t < end:
        ts.append(t + dt.timedelta(milliseconds=int(RNG.integers(0, 40))))
        t += dt.timedelta(seconds=every_s)
    rows._partitions(start, end)
    for nic in nics:
        words = RNG.integers(0, 10**10, len(ts))
        values = words * 4 / (10 + RNG.normal(0, 0.004, len(ts)))
        rx_values = [None if k % 17 == 3 else float(v) for k, v in enumerate(values)] \
            if rx is None else [rx] * len(ts)
        with connection.cursor() as cur:
            cur.execute(
                "INSERT INTO telemetry_nicsample (ts, nic_id, rx_bytes_per_s, tx_bytes_per_s) "
                "SELECT u.ts, %s, u.rx, u.tx FROM unnest(%s::timestamptz[], %s::float8[], "
                "%s::float8[]) AS u(ts, rx, tx)",
                [nic.id, ts, rx_values, [float(v) / 3 for v in values]])


def samples(nics, start=T0 - dt.timedelta(days=3), end=NOW + dt.timedelta(hours=1)):
    return fetch("SELECT nic_id, ts, rx_bytes_per_s, tx_bytes_per_s "
                 "FROM telemetry_nic_samples(%s::int[], %s, %s) ORDER BY 1, 2",
                 [[n.id for n in nics], start, end])


def hot() -> int:
    return fetch("SELECT count(*) FROM telemetry_nicsample")[0][0]


@pytest.fixture
def nics():
    node = rows.node(gpus=1, nics=2, latest=False)
    return list(Nic.objects.filter(node=node).order_by("id"))


def test_packed_samples_read_back_bit_for_bit_and_the_series_stay_the_same(nics):
    insert(nics, T0, T0 + dt.timedelta(hours=3))
    before = samples(nics)
    series = {step: nic_series([n.id for n in nics], METRICS, T0, NOW, step=step).values
              for step in (10, 30, 60, 300)}
    result = compaction.compact(NOW)
    assert (result.nic_rows, result.nic_packed, result.nic_merged) == (2 * 1080, 2 * 3, 0)
    assert hot() == 0
    assert fetch("SELECT count(*), min(cardinality(ts_ms)) FROM telemetry_nicpack") == [
        (2 * 3, 360)]
    after = samples(nics)
    assert len(after) == len(before) == 2 * 1080
    # Same times (milliseconds), same float64s bit for bit (== on floats), same nulls.
    assert after == before
    assert any(r[2] is None for r in after) and any(r[2] % 1 for r in after if r[2])
    for step, values in series.items():
        assert nic_series([n.id for n in nics], METRICS, T0, NOW, step=step).values == values
    assert compaction.compact(NOW).nic_rows == 0  # a second run finds nothing to move


def test_late_rows_merge_into_their_packed_hour_the_newer_winning(nics):
    insert(nics[:1], T0, T0 + dt.timedelta(hours=1))
    compaction.compact(NOW)
    first = samples(nics[:1])
    resent_at = first[5][1]  # a sample already packed, sent again with another value
    with connection.cursor() as cur:
        cur.execute("INSERT INTO telemetry_nicsample (ts, nic_id, rx_bytes_per_s, "
                    "tx_bytes_per_s) VALUES (%s, %s, 7.5e9, 2.5e9), (%s, %s, 1.25, NULL)",
                    [resent_at, nics[0].id, T0 + dt.timedelta(minutes=30, milliseconds=1),
                     nics[0].id])
    result = compaction.compact(NOW)
    assert (result.nic_rows, result.nic_packed, result.nic_merged) == (2, 1, 1)
    after = samples(nics[:1])
    assert len(after) == len(first) + 1
    assert (resent_at, 7.5e9, 2.5e9) in [r[1:] for r in after]
    assert (T0 + dt.timedelta(minutes=30, milliseconds=1), 1.25, None) in [r[1:] for r in after]
    assert fetch("SELECT count(*) FROM telemetry_nicpack") == [(1,)]


def test_the_detectors_hold_the_nic_rows_back_with_the_gpu_ones():
    node = rows.node(gpus=1, nics=1, latest=False)
    nic = Nic.objects.get(node=node)
    gpu = node.gpus.get()
    job = rows.job(gpus=[gpu], started_at=T0 - dt.timedelta(minutes=30))
    rows.gpu_samples([gpu], T0 + dt.timedelta(seconds=3), T0 + dt.timedelta(hours=3), job=job)
    insert([nic], T0, T0 + dt.timedelta(hours=3))
    # No detector pass has read the job: its node's NIC rows stay where the detectors read.
    result = compaction.compact(NOW)
    assert result.held_back and result.horizon == T0
    assert (result.nic_rows, hot()) == (0, 1080)


def test_a_packed_days_hot_partition_is_truncated(nics):
    day = (NOW - dt.timedelta(days=2)).replace(hour=0)
    insert(nics, day + dt.timedelta(hours=5), day + dt.timedelta(hours=7))
    name = partitions.partition_name("telemetry_nicsample", day.date())
    size = fetch("SELECT pg_total_relation_size(%s::regclass)", [name])[0][0]
    result = compaction.compact(NOW)
    assert result.nic_rows == 2 * 720 and result.truncated == 1
    assert fetch("SELECT pg_total_relation_size(%s::regclass)", [name])[0][0] < size
    assert len(samples(nics)) == 2 * 720  # all there, packed
