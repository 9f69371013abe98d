"""NIC rollups: ingest marks the hours it writes due, compaction recomputes the closed ones
from the samples, hot or packed (values equal SQL over them; late data marks an hour due
again; twice gives the same rows), series read them for whole-minute steps with the same
values as the samples, and each goes after its retention."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusterui.ingest.tasks import ingest_envelope
from clusterui.inventory.models import Nic
from clusterui.telemetry import compaction, partitions
from clusterui.telemetry.series import nic_series
from clusterui.telemetry.tasks import maintain_partitions
from tests import rows
from tests.factories import node_batch

pytestmark = pytest.mark.django_db
NOW = timezone.now().replace(minute=0, second=0, microsecond=0)
T0 = NOW - dt.timedelta(hours=4)
METRICS = ["rx_bytes_per_s", "tx_bytes_per_s"]


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def nic_rows(nics, start, end, every_s=10, shift=0.0):
    """Raw NIC rows with varying rates, written as ingest would (their hours marked due)."""
    ts, ids, rx = [], [], []
    t, k = start, 0
    while t < end:
        for j, n in enumerate(nics):
            ts.append(t)
            ids.append(n.id)
            rx.append(1e9 + ((k * 7919 + j * 31) % 97) * 1e7 + shift)
        t += dt.timedelta(seconds=every_s)
        k += 1
    rows._partitions(start, end)
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO telemetry_nicsample (ts, nic_id, rx_bytes_per_s, tx_bytes_per_s) "
            "SELECT u.ts, u.nic, u.rx, u.rx / 3 "
            "FROM unnest(%s::timestamptz[], %s::int[], %s::float8[]) AS u(ts, nic, rx)",
            [ts, ids, rx])
        cur.execute(
            "INSERT INTO telemetry_nicrollupdue (nic_id, hour) SELECT DISTINCT u.nic, "
            "date_bin('1 hour', u.ts, '2000-01-01') FROM unnest(%s::timestamptz[], "
            "%s::int[]) AS u(ts, nic) ON CONFLICT DO NOTHING", [ts, ids])


@pytest.fixture
def nics():
    node = rows.node(gpus=1, nics=2, latest=False)
    nics = list(Nic.objects.filter(node=node).order_by("id"))
    # Three closed hours and the current one.
    nic_rows(nics, T0 + dt.timedelta(seconds=3), NOW + dt.timedelta(minutes=10))
    return nics


def series_set(nics, start, end, steps=(10, 60, 300, 1800, 3600)):
    ids = [n.id for n in nics]
    return {(step, agg): nic_series(ids, METRICS, start, end, step=step, agg=agg).values
            for step in steps for agg in ("avg", "max", "min")}


def assert_same(got, want):
    assert got.keys() == want.keys()
    for key in want:
        for nic in want[key]:
            for m in METRICS:
                g, w = got[key][nic][m], want[key][nic][m]
                assert [v is None for v in g] == [v is None for v in w], (key, m)
                assert [v for v in g if v is not None] == pytest.approx(
                    [v for v in w if v is not None], rel=1e-9), (key, m)


def tables_read(fn):
    with CaptureQueriesContext(connection) as ctx:
        fn()
    sql = " ".join(q["sql"] for q in ctx.captured_queries)
    read = {t for t in ("telemetry_nicrollup5m", "telemetry_nicsample",
                        "telemetry_nicrollupdue") if t in sql}
    if "telemetry_nic_samples(" in sql:  # the function reading both sample tiers
        read |= {"telemetry_nicsample", "telemetry_nicpack"}
    return read


def test_ingest_marks_the_hours_it_writes_due():
    start = T0.timestamp() + 3570  # six samples, three before an hour and three after
    ingest_envelope(node_batch(samples=6, start=start, gpus=1))
    nic_ids = sorted(Nic.objects.values_list("id", flat=True))
    got = fetch("SELECT nic_id, hour FROM telemetry_nicrollupdue ORDER BY 1, 2")
    hours = [T0, T0 + dt.timedelta(hours=1)]
    assert got == [(n, h) for n in nic_ids for h in hours]


def test_compaction_rolls_up_the_closed_hours_and_the_series_stay_the_same(nics):
    end = T0 + dt.timedelta(minutes=97, seconds=25)  # mid-hour and mid-minute
    before = series_set(nics, T0, NOW + dt.timedelta(minutes=5))
    before_tail = series_set(nics, T0, end, steps=(60, 300, 3600))
    result = compaction.compact(NOW)
    assert result.nic_hours == 2 * 4  # every closed hour, not only those compaction packs
    # The current hour stays due (read raw).
    assert fetch("SELECT count(*), min(hour) FROM telemetry_nicrollupdue") == [(2, NOW)]
    assert_same(series_set(nics, T0, NOW + dt.timedelta(minutes=5)), before)
    assert_same(series_set(nics, T0, end, steps=(60, 300, 3600)), before_tail)
    assert compaction.compact(NOW).nic_hours == 0


def test_the_rollups_equal_sql_over_the_raw_rows(nics):
    closed = NOW
    wants = {width: fetch(
        """
        SELECT nic_id, date_bin(%s, ts, '2000-01-01'), count(*), avg(rx_bytes_per_s),
               max(rx_bytes_per_s), min(tx_bytes_per_s), avg(tx_bytes_per_s)
        FROM telemetry_nicsample WHERE ts < %s GROUP BY 1, 2 ORDER BY 1, 2
        """, [dt.timedelta(seconds=width), closed]) for width in (300,)}
    compaction.compact(NOW)
    # The hours before the horizon (the last one is within RAW_HOT_MINUTES) packed.
    assert fetch("SELECT count(*) FROM telemetry_nicpack") == [(2 * 3,)]
    for width, table in ((300, "telemetry_nicrollup5m"),):
        want = wants[width]
        got = fetch(f"SELECT nic_id, bucket, n, rx_bytes_per_s_avg, rx_bytes_per_s_max, "
                    f"tx_bytes_per_s_min, tx_bytes_per_s_avg FROM {table} ORDER BY 1, 2")
        assert len(got) == len(want) == 2 * 4 * 3600 // width
        for g, w in zip(got, want, strict=True):
            assert g[:3] == w[:3] and g[3:] == pytest.approx(w[3:], rel=1e-12)


def test_each_step_reads_its_tier(nics):
    compaction.compact(NOW)
    ids = [n.id for n in nics]
    closed = T0 + dt.timedelta(hours=2)

    def read(step, start=T0, end=closed):
        return lambda: nic_series(ids, METRICS, start, end, step=step)

    raw = {"telemetry_nicsample", "telemetry_nicpack"}  # hot and packed samples
    assert tables_read(read(10)) == raw
    assert tables_read(read(60)) == raw  # minute steps: the samples (no 1-minute rollup)
    assert tables_read(read(300)) == {"telemetry_nicrollup5m", "telemetry_nicrollupdue", *raw}
    # Whole 5 minutes, then the rest from the samples.
    tail = read(300, end=closed - dt.timedelta(minutes=7, seconds=25))
    assert tables_read(tail) == {"telemetry_nicrollup5m", "telemetry_nicrollupdue", *raw}
    # Closed hours come from the rollups alone: without the samples, the same values.
    want = nic_series(ids, METRICS, T0, closed, step=300).values
    fetch("DELETE FROM telemetry_nicsample WHERE ts < %s RETURNING 1", [closed])
    assert fetch("DELETE FROM telemetry_nicpack WHERE hour < %s RETURNING 1", [closed])
    assert nic_series(ids, METRICS, T0, closed, step=300).values == want


def test_late_data_makes_its_hour_due_again(nics):
    compaction.compact(NOW)
    late_at = T0 + dt.timedelta(minutes=20, seconds=5)
    nic_rows(nics[:1], late_at, late_at + dt.timedelta(seconds=30), shift=5e9)
    assert fetch("SELECT nic_id, hour FROM telemetry_nicrollupdue WHERE hour < %s",
                 [NOW]) == [(nics[0].id, T0)]
    # Before compaction, the due hour is read raw: the late rows count.
    late_max = fetch("SELECT max(rx_bytes_per_s) FROM telemetry_nicsample WHERE nic_id = %s "
                     "AND ts >= %s AND ts < %s", [nics[0].id, T0 + dt.timedelta(minutes=20),
                                                  T0 + dt.timedelta(minutes=21)])[0][0]
    before = series_set(nics, T0, T0 + dt.timedelta(hours=2), steps=(60, 300))
    assert compaction.compact(NOW).nic_hours == 1
    after = series_set(nics, T0, T0 + dt.timedelta(hours=2), steps=(60, 300))
    assert_same(after, before)
    minute = after[(60, "max")][nics[0].id]["rx_bytes_per_s"][20]
    assert minute == late_max and minute > 5e9
    assert fetch("SELECT n FROM telemetry_nicrollup5m WHERE nic_id = %s AND bucket = %s",
                 [nics[0].id, T0 + dt.timedelta(minutes=20)]) == [(33,)]


def test_each_nic_rollup_goes_after_its_own_retention(settings):
    # Each tier's retention longer than the data's age, then shorter, one after the other.
    settings.RAW_RETENTION_DAYS = 14
    settings.ROLLUP_5M_RETENTION_DAYS = 30
    node = rows.node(gpus=1, nics=1, latest=False)
    nic = Nic.objects.get(node=node)
    old = NOW - dt.timedelta(days=20)
    nic_rows([nic], old, old + dt.timedelta(hours=1))
    assert compaction.compact(NOW).nic_hours == 1
    counts = ("SELECT (SELECT count(*) FROM telemetry_nic_samples("
              "ARRAY(SELECT id FROM inventory_nic)::int[], '-infinity', 'infinity')), "
              "(SELECT count(*) FROM telemetry_nicrollup5m)")
    assert fetch(counts) == [(360, 12)]
    maintain_partitions()
    partitions.forget_known()
    assert fetch(counts) == [(0, 12)]  # the samples gone after RAW_RETENTION_DAYS
    hourly = nic_series([nic.id], METRICS, old, old + dt.timedelta(hours=1), step=3600)
    assert hourly.values[nic.id]["rx_bytes_per_s"][0] is not None
    # A minute step there is read at 5 minutes, from the rollup left, not drawn blank.
    minutes = nic_series([nic.id], METRICS, old, old + dt.timedelta(hours=1), step=60)
    assert minutes.step == 300 and len(minutes.ts) == 12
    assert None not in minutes.values[nic.id]["rx_bytes_per_s"]
    settings.ROLLUP_5M_RETENTION_DAYS = 10
    maintain_partitions()
    partitions.forget_known()
    assert fetch(counts) == [(0, 0)]
