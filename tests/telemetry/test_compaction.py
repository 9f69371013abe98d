"""Compaction: hot rows become hour chunks and rollups, reads give the same series before and
after, late data merges, the detectors hold the horizon back, retention keeps rollups."""

import datetime as dt

import numpy as np
import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from clusterui.findings.models import JobEfficiency
from clusterui.findings.runner import run_pass
from clusterui.telemetry import compaction, packed, partitions, rollupcodec
from clusterui.telemetry.series import gpu_series
from clusterui.telemetry.tasks import maintain_partitions
from tests import rows
from tests.telemetry.packed_rollups import rollup_rows

pytestmark = pytest.mark.django_db
# Most tests here keep the two newest closed hours hot (RAW_HOT_MINUTES=120), so that a
# range spans both tiers; test_the_default_packs_an_hour_minutes_after_it_closed checks the
# default.
HOT_MINUTES = 120
NOW = timezone.now().replace(minute=0, second=0, microsecond=0)
T0 = NOW - dt.timedelta(hours=4)
METRICS = ["util_pct", "sm_active_pct", "power_w", "mem_used_mib", "temp_c"]


def util(gpu, k):
    return round(7.31 + (k * 37 % 91) + gpu.index * 0.5, 2)


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def hot_count(before=None):
    return fetch("SELECT count(*) FROM telemetry_gpusample WHERE ts < %s",
                 [before or NOW + dt.timedelta(days=1)])[0][0]


def series_set(gpus, start, end):
    ids = [g.id for g in gpus]
    out = {}
    for step in (10, 60, 300, 3600):
        for agg in ("avg", "max", "min"):
            s = gpu_series(ids, METRICS, start, end, step=step, agg=agg)
            out[(step, agg)] = s.values
    return out


def assert_close(a, b, tol=0.006):
    assert a.keys() == b.keys()
    for key in a:
        for gpu in a[key]:
            for metric in a[key][gpu]:
                x, y = a[key][gpu][metric], b[key][gpu][metric]
                assert [v is None for v in x] == [v is None for v in y], (key, metric)
                got = np.array([v for v in x if v is not None])
                want = np.array([v for v in y if v is not None])
                assert np.allclose(got, want, rtol=1e-6, atol=tol), (key, metric)


@pytest.fixture(autouse=True)
def _two_hot_hours(settings):
    settings.RAW_HOT_MINUTES = HOT_MINUTES


@pytest.fixture
def cluster():
    node = rows.node(gpus=2, latest=False)
    gpus = list(node.gpus.order_by("index"))
    # Samples for three hours, the first two older than the horizon (NOW - 2 h).
    rows.gpu_samples(gpus, T0 + dt.timedelta(seconds=3), T0 + dt.timedelta(hours=3), util=util)
    return gpus


def test_compaction_moves_closed_hours_and_the_series_stay_the_same(cluster):
    before = series_set(cluster, T0, NOW)
    result = compaction.compact(NOW)
    assert result.horizon == NOW - dt.timedelta(hours=2) and not result.held_back
    assert result.rows == 2 * 2 * 360 and result.chunks == 4
    assert hot_count(NOW - dt.timedelta(hours=2)) == 0
    assert hot_count() == 2 * 360  # the hour inside the horizon stays hot
    assert fetch("SELECT count(*), sum(n) FROM telemetry_gpuchunk") == [(4, 1440)]
    assert_close(series_set(cluster, T0, NOW), before)
    # Over a range that ends mid-minute, too (the tail is read from the packed tier).
    end = T0 + dt.timedelta(minutes=95, seconds=25)
    for agg in ("avg", "max"):
        got = gpu_series([cluster[0].id], METRICS, T0, end, step=300, agg=agg).values
        compaction_free = {k: v for k, v in got.items()}
        assert all(v is not None for v in compaction_free[cluster[0].id]["util_pct"])
    again = compaction.compact(NOW)
    assert again.rows == 0


def test_the_rollups_equal_sql_over_the_raw_rows(cluster):
    gpu_minutes = fetch(
        """
        SELECT gpu_id, date_bin('1 minute', ts, '2000-01-01'), count(*), avg(util_pct),
               max(power_w), min(sm_active_pct), max(mem_used_mib)
        FROM telemetry_gpusample WHERE ts < %s GROUP BY 1, 2 ORDER BY 1, 2
        """, [NOW - dt.timedelta(hours=2)])
    gpu_hours = fetch(
        """
        SELECT gpu_id, date_trunc('hour', ts), count(*), avg(temp_c), max(util_pct)
        FROM telemetry_gpusample WHERE ts < %s GROUP BY 1, 2 ORDER BY 1, 2
        """, [NOW - dt.timedelta(hours=2)])
    compaction.compact(NOW)
    got = rollup_rows(60, "gpu_id, bucket, n, util_pct_avg, power_w_max, sm_active_pct_min, "
                      "mem_used_mib_max")
    assert len(got) == len(gpu_minutes) == 2 * 120
    for g, w in zip(got, gpu_minutes, strict=True):
        assert g[:3] == w[:3] and g[6] == w[6]
        assert g[3] == pytest.approx(w[3], abs=0.006)
        assert g[4] == pytest.approx(w[4], abs=0.001) and g[5] == pytest.approx(w[5], abs=0.006)
    got = rollup_rows(3600, "gpu_id, bucket, n, temp_c_avg, util_pct_max")
    assert [g[:3] for g in got] == [w[:3] for w in gpu_hours]
    assert [g[3:] for g in got] == [pytest.approx(w[3:], abs=0.006) for w in gpu_hours]


def test_the_5_minute_rollups_equal_sql_over_the_raw_rows(cluster):
    want = fetch(
        """
        SELECT gpu_id, date_bin('5 minutes', ts, '2000-01-01'), coalesce(job_id, 0), count(*),
               avg(util_pct), max(power_w), min(sm_active_pct), max(mem_used_mib),
               min(energy_j), max(energy_j), bit_or(throttle_reasons)
        FROM telemetry_gpusample WHERE ts < %s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        """, [NOW - dt.timedelta(hours=2)])
    compaction.compact(NOW)
    got = rollup_rows(300, "gpu_id, bucket, job_id, n, util_pct_avg, power_w_max, "
                      "sm_active_pct_min, mem_used_mib_max, energy_j_min, energy_j_max, "
                      "throttle_reasons_or")
    assert len(got) == len(want) == 2 * 24
    for g, w in zip(got, want, strict=True):
        assert g[:4] == w[:4] and g[7:] == w[7:]  # energy and throttling: null here
        assert g[4:7] == pytest.approx(w[4:7], abs=0.006)


def test_job_rollups_aggregate_over_the_jobs_gpus():
    node = rows.node(gpus=2, latest=False)
    gpus = list(node.gpus.order_by("index"))
    job = rows.job(gpus=gpus, state="ended", started_at=T0 - dt.timedelta(days=3),
                   ended_at=T0 - dt.timedelta(days=2))  # long finished: no detector waits
    rows.gpu_samples(gpus, T0, T0 + dt.timedelta(hours=1), util=util, job=job)
    want = fetch("SELECT count(*), count(DISTINCT gpu_id), avg(util_pct), max(mem_used_mib) "
                 "FROM telemetry_gpusample WHERE job_id = %s", [job.id])
    power = fetch("SELECT avg(power_w) * 2 FROM telemetry_gpusample")[0][0]
    compaction.compact(NOW)
    got = fetch("SELECT samples, gpus, util_pct, mem_used_max_mib FROM telemetry_jobrollup1h "
                "WHERE job_id = %s", [job.id])
    assert got[0][:2] == want[0][:2] and got[0][3] == want[0][3]
    assert got[0][2] == pytest.approx(want[0][2], abs=0.006)
    hour = fetch("SELECT samples, gpus, gpu_s, power_w FROM telemetry_jobrollup1h "
                 "WHERE job_id = %s", [job.id])
    assert hour == [(720, 2, 7200.0, pytest.approx(power, rel=1e-5))]


def test_late_data_merges_into_its_chunk_and_its_rollups(cluster):
    compaction.compact(NOW)
    g = cluster[0]
    hours_before = rollup_rows(3600, "gpu_id, bucket, n, util_pct_avg")
    hour = T0 + dt.timedelta(hours=1)
    # A replayed spool: one sample the chunk already has, and one it does not.
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO telemetry_gpusample (ts, gpu_id, util_pct, power_w) VALUES "
            "(%s, %s, 11.0, 100.0), (%s, %s, 99.0, 200.0)",
            [hour + dt.timedelta(seconds=3), g.id, hour + dt.timedelta(seconds=5), g.id])
    # Before compaction takes it, the reads already see it (both tiers at once).
    merged = packed.raw_samples([g.id], hour, hour + dt.timedelta(minutes=1))
    assert len(merged) == 1 and len(merged[0][1]) == 7
    result = compaction.compact(NOW)
    assert (result.rows, result.chunks, result.merged) == (2, 1, 1)
    assert fetch("SELECT n FROM telemetry_gpuchunk WHERE gpu_id = %s AND start = %s",
                 [g.id, hour]) == [(361,)]
    block = packed.raw_samples([g.id], hour, hour + dt.timedelta(minutes=1))[0][1]
    assert block.values["util_pct"][:2].tolist() == [11.0, 99.0]  # the newest write wins
    n, util_max = next(r[2:] for r in rollup_rows(60, "gpu_id, bucket, n, util_pct_max")
                       if r[:2] == (g.id, hour))
    assert n == 7 and util_max == 99.0
    assert [r[2] for r in rollup_rows(3600, "gpu_id, bucket, n")
            if r[:2] == (g.id, hour)] == [361]
    # The other hours in the same day's 1-hour blob, and the other GPUs', are as they were.
    assert [r for r in rollup_rows(3600, "gpu_id, bucket, n, util_pct_avg")
            if r[:2] != (g.id, hour)] == [r for r in hours_before if r[:2] != (g.id, hour)]


def test_the_default_packs_an_hour_minutes_after_it_closed(cluster, settings):
    """With the default horizon the hot table keeps only the current hour: the newest
    closed hour is packed once RAW_HOT_MINUTES have passed, and not before."""
    settings.RAW_HOT_MINUTES = 10
    newest = NOW - dt.timedelta(hours=2)  # the samples' last hour: [NOW - 2 h, NOW - 1 h)
    before = series_set(cluster, T0, NOW)
    early = compaction.compact(newest + dt.timedelta(hours=1, minutes=9))
    assert early.horizon == newest and hot_count() == 2 * 360  # that hour is still hot
    on_time = compaction.compact(newest + dt.timedelta(hours=1, minutes=10))
    assert on_time.horizon == newest + dt.timedelta(hours=1) and on_time.rows == 2 * 360
    assert hot_count() == 0
    assert_close(series_set(cluster, T0, NOW), before)


def test_the_detectors_hold_the_horizon_back():
    node = rows.node(gpus=1, latest=False)
    gpu = node.gpus.get()
    job = rows.job(gpus=[gpu], started_at=T0 - dt.timedelta(minutes=30))
    rows.gpu_samples([gpu], T0 + dt.timedelta(seconds=3), T0 + dt.timedelta(hours=3),
                     util=util, job=job)
    # A job no pass has read yet: nothing from its first sample on may leave the hot table.
    result = compaction.compact(NOW)
    assert result.held_back and result.horizon == T0 and result.rows == 0
    # A detector pass reads one hour of a backlog (DETECTOR_MAX_SAMPLES_PER_PASS samples):
    # that hour may go, the rest waits for the next passes.
    run_pass(NOW)
    through = JobEfficiency.objects.get(job=job).through
    assert T0 + dt.timedelta(hours=1) <= through < T0 + dt.timedelta(hours=1, minutes=1)
    result = compaction.compact(NOW)
    assert result.held_back and result.horizon == T0 + dt.timedelta(hours=1)
    assert result.rows == 360
    assert fetch("SELECT min(ts) FROM telemetry_gpusample")[0][0] > through - dt.timedelta(
        seconds=10)
    # The next pass goes on from there: nothing it needs has gone.
    run_pass(NOW)
    assert JobEfficiency.objects.get(job=job).through > through + dt.timedelta(minutes=59)


def test_a_second_run_meanwhile_returns_at_once(cluster):
    url = connection.settings_dict
    with psycopg.connect(host=url["HOST"] or None, port=url["PORT"] or None,
                         user=url["USER"], password=url["PASSWORD"] or None,
                         dbname=url["NAME"], autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [compaction.LOCK_KEY])
        assert compaction.compact(NOW).locked_out
        other.execute("SELECT pg_advisory_unlock(%s)", [compaction.LOCK_KEY])
    assert compaction.compact(NOW).rows == 4 * 360


def test_retention_drops_the_raw_chunks_and_keeps_the_rollups(settings):
    settings.RAW_RETENTION_DAYS = 14  # the data (20 days old) is past it, not the rollups'
    settings.ROLLUP_1M_RETENTION_DAYS = 30
    node = rows.node(gpus=1, latest=False)
    gpu = node.gpus.get()
    old = NOW - dt.timedelta(days=20)
    rows.gpu_samples([gpu], old, old + dt.timedelta(hours=1), util=util)
    compaction.compact(NOW)
    assert fetch("SELECT count(*) FROM telemetry_gpuchunk") == [(1,)]
    maintain_partitions()
    partitions.forget_known()
    assert fetch("SELECT count(*) FROM telemetry_gpuchunk") == [(0,)]
    assert len(rollup_rows(60, "n")) == 60
    end = old + dt.timedelta(hours=1)
    per_minute = gpu_series([gpu.id], ["util_pct"], old, end, step=60).values[gpu.id]
    assert all(v is not None for v in per_minute["util_pct"])
    raw = gpu_series([gpu.id], ["util_pct"], old, end, step=10).values[gpu.id]
    assert all(v is None for v in raw["util_pct"])
    # Without a step, a chart of that hour gets the finest tier still kept: 1 minute.
    chart = gpu_series([gpu.id], ["util_pct"], old, end)
    assert chart.step == 60 and None not in chart.values[gpu.id]["util_pct"]


def test_a_chart_past_a_tiers_retention_reads_the_next_coarser_tier(settings):
    settings.ROLLUP_1M_RETENTION_DAYS = 10
    node = rows.node(gpus=1, latest=False)
    gpu = node.gpus.get()
    old = NOW - dt.timedelta(days=20)
    rows.gpu_samples([gpu], old, old + dt.timedelta(hours=1), util=util)
    compaction.compact(NOW)
    maintain_partitions()
    partitions.forget_known()
    assert rollup_rows(60, "n") == [] and len(rollup_rows(300, "n")) == 12
    # Six hours would be drawn at 1 minute (the 6 h preset): those are gone, 5 minutes not.
    chart = gpu_series([gpu.id], ["util_pct"], old, old + dt.timedelta(hours=6))
    assert chart.step == 300
    assert all(v is not None for v in chart.values[gpu.id]["util_pct"][:12])


def test_long_ranges_read_the_rollups(cluster):
    compaction.compact(NOW)
    ids = [g.id for g in cluster]
    start, end = T0, T0 + dt.timedelta(hours=2)
    want = {step: gpu_series(ids, ["util_pct"], start, end, step=step).values
            for step in (60, 3600)}
    fetch("DELETE FROM telemetry_gpuchunk RETURNING 1")
    assert gpu_series(ids, ["util_pct"], start, end, step=60).values == want[60]
    fetch("DELETE FROM telemetry_gpurollup1mpack RETURNING 1")
    assert gpu_series(ids, ["util_pct"], start, end, step=3600).values == want[3600]
    # What a rollup cannot answer comes from the packed tier, gone here.
    energy = gpu_series(ids, ["energy_j"], start, end, step=3600, agg="avg").values
    assert energy[ids[0]]["energy_j"] == [None, None]


def test_raw_samples_read_both_tiers_and_one_jobs_share(cluster):
    compaction.compact(NOW)
    blocks = packed.raw_samples([g.id for g in cluster], T0, NOW)
    assert [(g, len(b)) for g, b in blocks] == [
        (cluster[0].id, 360), (cluster[0].id, 360), (cluster[0].id, 360),
        (cluster[1].id, 360), (cluster[1].id, 360), (cluster[1].id, 360)]
    assert np.all(np.diff(np.concatenate([b.ts for g, b in blocks if g == cluster[0].id])) > 0)
    assert packed.raw_samples([cluster[0].id], T0, NOW, job_id=12345) == []


def test_a_run_out_of_time_leaves_the_rest_to_the_next(cluster):
    first = compaction.compact(NOW, budget_s=0.0)
    assert first.unfinished and first.rows == 0
    assert hot_count(NOW - dt.timedelta(hours=2)) == 2 * 2 * 360
    steps = compaction.compact(NOW, gpus_per_transaction=1)
    assert steps.transactions == 4 and steps.rows == 4 * 360 and not steps.unfinished
    assert hot_count(NOW - dt.timedelta(hours=2)) == 0


def test_each_rollup_goes_after_its_own_retention(settings):
    settings.ROLLUP_1M_RETENTION_DAYS = 10  # shorter than the data's age; 1 h rollups stay
    node = rows.node(gpus=1, latest=False)
    gpu = node.gpus.get()
    job = rows.job(gpus=[gpu], state="ended", started_at=NOW - dt.timedelta(days=30),
                   ended_at=NOW - dt.timedelta(days=19))
    old = NOW - dt.timedelta(days=20)
    rows.gpu_samples([gpu], old, old + dt.timedelta(hours=1), util=util, job=job)
    compaction.compact(NOW)
    counts = ("SELECT (SELECT count(*) FROM telemetry_gpuchunk), "
              "(SELECT count(*) FROM telemetry_gpurollup1mpack), "
              "(SELECT count(*) FROM telemetry_gpurollup5mpack), "
              "(SELECT count(*) FROM telemetry_gpurollup1hpack), "
              "(SELECT count(*) FROM telemetry_jobrollup1h)")
    assert fetch(counts) == [(1, 1, 1, 1, 1)]  # one blob per (GPU, hour)
    maintain_partitions()
    partitions.forget_known()
    assert fetch(counts) == [(0, 0, 1, 1, 1)]
    five = gpu_series([gpu.id], ["util_pct"], old, old + dt.timedelta(hours=1), step=300)
    assert all(v is not None for v in five.values[gpu.id]["util_pct"])
    settings.ROLLUP_5M_RETENTION_DAYS = 10
    maintain_partitions()
    partitions.forget_known()
    assert fetch(counts) == [(0, 0, 0, 1, 1)]
    hourly = gpu_series([gpu.id], ["util_pct"], old, old + dt.timedelta(hours=1), step=3600)
    assert hourly.values[gpu.id]["util_pct"][0] == pytest.approx(
        np.mean([util(gpu, k) for k in range(360)]), abs=0.006)


def _old_gauges(gauges) -> str:
    """The gauge columns of a row table of before: mean, count, max and min. The packed blobs
    keep only the max and min that are read (``rollupcodec.KEPT``); where they do not, the
    mean stands in for them (the migration leaves them out of what it packs)."""
    def col(m, agg):
        return f"{m}_{agg}" if agg in rollupcodec.KEPT[m] else f"{m}_avg"
    return ", ".join(f"{m}_avg, {m}_n, {col(m, 'max')}, {col(m, 'min')}" for m in gauges)


def test_the_migration_packs_the_rollup_rows_of_before(cluster):
    """Migration 0009 packs the row tables' 1- and 5-minute rollups into blobs that read
    back as the rows were (the means within the float4 they were kept as)."""
    from importlib import import_module
    from types import SimpleNamespace

    migration = import_module("clusterui.telemetry.migrations.0009_packed_gpu_rollups")
    compaction.compact(NOW)
    columns = ("gpu_id, bucket, job_id, n, util_pct_avg, util_pct_n, power_w_max, "
               "sm_active_pct_min, mem_used_mib_max, energy_j_min, energy_j_max, energy_j_last, "
               "throttle_reasons_or")
    names = [c.strip() for c in columns.split(",")]
    gauges = ", ".join(f"{m}_avg real, {m}_n int, {m}_max float8, {m}_min float8"
                       for m in migration.GAUGES)
    want = {}
    for source, (target, width) in migration.TABLES.items():
        want[width] = rollup_rows(width, columns)
        old = rollup_rows(width, "gpu_id, bucket, job_id, n, throttle_reasons_or, energy_j_min, "
                                 "energy_j_max, energy_j_last, " + _old_gauges(migration.GAUGES))
        day = NOW.date() - dt.timedelta(days=1)
        with connection.cursor() as cur:
            cur.execute(f"""CREATE TABLE {source} (gpu_id int, bucket timestamptz, job_id int,
                  n int, throttle_reasons_or bigint, energy_j_min float8, energy_j_max float8,
                  energy_j_last float8, {gauges}) PARTITION BY RANGE (bucket)""")
            for d in (day, day + dt.timedelta(days=1)):  # day partitions, as the tables had
                cur.execute(f"""CREATE TABLE {source}_p{d:%Y%m%d} PARTITION OF {source}
                      FOR VALUES FROM ('{d}') TO ('{d + dt.timedelta(days=1)}')""")
            cur.executemany(f"INSERT INTO {source} VALUES ({', '.join(['%s'] * len(old[0]))})",
                            old)
        fetch(f"DELETE FROM {target} RETURNING 1")
    migration.pack_rows(None, SimpleNamespace(connection=connection))
    for width, rows_before in want.items():
        got = rollup_rows(width, columns)
        assert len(got) == len(rows_before) > 0
        for g, w in zip(got, rows_before, strict=True):
            g, w = dict(zip(names, g, strict=True)), dict(zip(names, w, strict=True))
            assert g.pop("util_pct_avg") == pytest.approx(w.pop("util_pct_avg"), rel=1e-6)
            assert g == w
    assert fetch("SELECT to_regclass('telemetry_gpurollup1m'), "
                 "to_regclass('telemetry_gpurollup5m')") == [(None, None)]


def test_the_migration_packs_the_hourly_rollup_rows_of_before(cluster):
    """Migration 0011 packs the 1-hour row table into one blob per (GPU, day)."""
    from importlib import import_module
    from types import SimpleNamespace

    migration = import_module("clusterui.telemetry.migrations.0011_packed_gpu_rollup1h")
    compaction.compact(NOW)
    columns = ("gpu_id, bucket, n, util_pct_avg, sm_active_pct_n, power_w_max, "
               "sm_clock_mhz_min, mem_used_mib_max, energy_j_min, energy_j_last, "
               "throttle_reasons_or")
    want = rollup_rows(3600, columns)
    old = rollup_rows(3600, "gpu_id, bucket, n, throttle_reasons_or, energy_j_min, "
                            "energy_j_max, energy_j_last, " + _old_gauges(migration.GAUGES))
    gauges = ", ".join(f"{m}_avg real, {m}_n int, {m}_max float8, {m}_min float8"
                       for m in migration.GAUGES)
    month = NOW.date().replace(day=1)
    months = {month, (T0 - dt.timedelta(days=1)).date().replace(day=1)}
    with connection.cursor() as cur:
        cur.execute(f"""CREATE TABLE {migration.SOURCE} (gpu_id int, bucket timestamptz, n int,
              throttle_reasons_or bigint, energy_j_min float8, energy_j_max float8,
              energy_j_last float8, {gauges}) PARTITION BY RANGE (bucket)""")
        for m in months:  # month partitions, as the table had
            end = (m + dt.timedelta(days=32)).replace(day=1)
            cur.execute(f"CREATE TABLE {migration.SOURCE}_p{m:%Y%m} PARTITION OF "
                        f"{migration.SOURCE} FOR VALUES FROM ('{m}') TO ('{end}')")
        cur.executemany(f"INSERT INTO {migration.SOURCE} VALUES "
                        f"({', '.join(['%s'] * len(old[0]))})", old)
    fetch(f"DELETE FROM {migration.TARGET} RETURNING 1")
    migration.pack_rows(None, SimpleNamespace(connection=connection))
    got = rollup_rows(3600, columns)
    assert len(got) == len(want) == 2 * 2  # two GPUs, two hours
    for g, w in zip(got, want, strict=True):
        assert g[3] == pytest.approx(w[3], rel=1e-6)
        assert g[:3] + g[4:] == w[:3] + w[4:]
    assert fetch("SELECT to_regclass('telemetry_gpurollup1h')") == [(None,)]


def test_node_rollups_are_the_sums_of_the_gpu_rollups(cluster):
    """Compaction sums each node's GPUs into the node rollups the cluster history reads
    (migration 0007's backfill read the 5-minute row table that migration 0009 packed)."""
    raw = fetch("SELECT date_trunc('hour', ts), avg(util_pct) FROM telemetry_gpusample "
                "WHERE ts < %s GROUP BY 1 ORDER BY 1", [NOW - dt.timedelta(hours=2)])
    compaction.compact(NOW)
    want = {
        "5m": _node_sums(rollup_rows(300, "gpu_id, bucket, util_pct_avg, util_pct_n, n, "
                                          "power_w_n")),
        "1h": _node_sums(rollup_rows(3600, "gpu_id, bucket, util_pct_avg, util_pct_n, n, "
                                           "power_w_n")),
    }
    assert len(want["5m"]) == 2 * 12 and len(want["1h"]) == 2  # one node, two hours

    def node_rows(suffix):
        return fetch(f"SELECT node_id, bucket, gpus, util_pct_sum, power_w_n "
                     f"FROM telemetry_noderollup{suffix} ORDER BY 1, 2")

    for suffix in ("5m", "1h"):
        got = node_rows(suffix)
        assert [r[:3] + (r[4],) for r in got] == [w[:3] + (w[4],) for w in want[suffix]]
        assert all(abs(g[3] - w[3]) < 1e-3 * w[3] for g, w in zip(got, want[suffix],
                                                                    strict=True))
    # Each hour's node mean is the mean of the raw samples of both GPUs in that hour.
    means = fetch("SELECT bucket, util_pct_sum / util_pct_n FROM telemetry_noderollup1h "
                  "ORDER BY 1")
    assert [b for b, _ in means] == [h for h, _ in raw]
    assert all(abs(m - r) < 1e-3 for (_, m), (_, r) in zip(means, raw, strict=True))


def _node_sums(gpu_rows):
    """(node, bucket, GPUs, sum of util x its count, power count) from packed GPU rollup rows
    (gpu_id, bucket, util_pct_avg, util_pct_n, n, power_w_n), as the node rollups keep them."""
    from clusterui.inventory.models import Gpu

    node_of = dict(Gpu.objects.values_list("id", "node_id"))
    sums = {}
    for gpu_id, bucket, avg, util_n, n, power_n in gpu_rows:
        key = (node_of[gpu_id], bucket)
        gpus, util, power = sums.get(key, (set(), 0.0, 0))
        sums[key] = (gpus | {gpu_id}, util + (avg or 0) * (n if util_n is None else util_n),
                     power + (n if power_n is None else power_n))
    return [(k[0], k[1], len(g), u, p) for k, (g, u, p) in sorted(sums.items())]


def test_node_rollups_count_a_mig_gpu_once_and_not_its_instances():
    """A MIG-enabled GPU and its instances each send samples; the node rollup's ``gpus``
    counts physical GPUs (clusterui.inventory.counting), here 2, not 4."""
    node = rows.node("mig-a001", gpus=4, latest=False)
    whole, mig, *instances = node.gpus.order_by("index")
    for k, g in enumerate(instances):
        g.parent, g.index, g.mig_profile, g.mig_gi_id, g.mig_share = mig, mig.index, \
            "3g.40gb", k + 1, 3 / 7
        g.save()
    rows.gpu_samples([whole, mig, *instances], T0 + dt.timedelta(seconds=3),
                     T0 + dt.timedelta(hours=1), util=util)
    compaction.compact(NOW)
    for suffix in ("5m", "1h"):
        counts = {n for (n,) in fetch(f"SELECT DISTINCT gpus FROM telemetry_noderollup{suffix}")}
        assert counts == {2}
