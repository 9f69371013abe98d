"""Time series read back: aligned buckets, gaps as None, multi-node host CPU summed, and the
tier each step reads once compaction has run (rollups for steps of whole minutes, decoded
chunks below), with the values raw rows give."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from clusterui.telemetry import compaction
from clusterui.telemetry.series import SeriesError, gpu_series, job_host_series, pick_step
from tests import rows
from tests.factories import node_batch, recent_start

pytestmark = pytest.mark.django_db
T0 = recent_start()  # on a minute boundary of the series origin, inside raw retention


def at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0 + seconds, dt.UTC)


def test_the_step_fits_the_range_and_never_goes_below_the_sampling_interval():
    assert pick_step(at(0), at(3600), minimum=10) == 10
    assert pick_step(at(0), at(3600), minimum=1) == 10  # 600 points at most
    assert pick_step(at(0), at(86400), minimum=10) == 300
    assert pick_step(at(0), at(7 * 86400), minimum=10) == 1800


def test_a_multi_node_jobs_host_cpu_is_the_sum_over_its_nodes():
    for node, cores in (("gpu-m1", 10.0), ("gpu-m2", 30.0)):
        batch = node_batch(node=node, samples=6, start=T0 + 1, job="77")
        for row in batch["job_samples"]["rows"]:
            row[2] = cores
        ingest_envelope(batch)
    job = Job.objects.get(external_id="77")
    series = job_host_series([job.pk], ["cpu_cores_used"], at(0), at(60), step=60)
    assert series.values[job.pk]["cpu_cores_used"] == [40.0]


def test_buckets_without_samples_are_gaps():
    ingest_envelope(node_batch(samples=3, start=T0 + 1, gpus=1))  # 0-30 s only
    gpu_id = Job.objects.get().gpus.get().pk
    series = gpu_series([gpu_id], ["util_pct"], at(0), at(120), step=30)
    assert series.values[gpu_id]["util_pct"][1:] == [None, None, None]
    assert series.values[gpu_id]["util_pct"][0] is not None


def test_a_bad_request_is_a_series_error():
    with pytest.raises(SeriesError, match="unknown metric"):
        gpu_series([1], ["bogus"], at(0), at(60))
    with pytest.raises(SeriesError, match="to must be after from"):
        gpu_series([1], ["util_pct"], at(60), at(0))


def _tables_read(fn):
    with CaptureQueriesContext(connection) as ctx:
        result = fn()
    sql = " ".join(q["sql"] for q in ctx.captured_queries)
    return result, {t for t in ("telemetry_gpurollup1m", "telemetry_gpurollup5m",
                                "telemetry_gpurollup1h",
                                "telemetry_gpuchunk", "telemetry_gpusample") if t in sql}


def test_each_step_reads_its_tier_and_gives_what_the_raw_rows_gave():
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    start = now - dt.timedelta(hours=6)
    gpus = list(rows.node(gpus=2, latest=False).gpus.order_by("index"))
    rows.gpu_samples(gpus, start + dt.timedelta(seconds=7), now - dt.timedelta(hours=3),
                     util=lambda g, k: round(20 + 60 * ((k * 7919 + g.index * 31) % 97) / 97, 2))
    ids = [g.id for g in gpus]
    end = now - dt.timedelta(hours=2)
    reads = {  # step: the tier it must read once compacted
        10: "telemetry_gpuchunk", 30: "telemetry_gpuchunk", 60: "telemetry_gpurollup1m",
        120: "telemetry_gpurollup1m", 300: "telemetry_gpurollup5m",
        1800: "telemetry_gpurollup5m",
        3600: "telemetry_gpurollup1h"}
    raw = {(step, agg): gpu_series(ids, ["util_pct", "power_w"], start, end, step=step,
                                   agg=agg).values
           for step in reads for agg in ("avg", "max", "min")}
    tail_end = end - dt.timedelta(minutes=47, seconds=25)
    raw_tail = {agg: gpu_series(ids, ["util_pct", "power_w"], start, tail_end, step=3600,
                                agg=agg).values for agg in ("avg", "max", "min")}
    assert compaction.compact(now).rows == 2 * 3 * 360
    for (step, agg), want in raw.items():
        got, tables = _tables_read(lambda s=step, a=agg: gpu_series(
            ids, ["util_pct", "power_w"], start, end, step=s, agg=a))
        assert tables == {reads[step], "telemetry_gpusample"}, (step, agg)
        for gpu in ids:
            for metric in ("util_pct", "power_w"):
                w, g = want[gpu][metric], got.values[gpu][metric]
                assert [v is None for v in w] == [v is None for v in g]
                assert [v for v in g if v is not None] == pytest.approx(
                    [v for v in w if v is not None], abs=0.006), (step, agg, metric)
    # A day's range: the picked step (300 s) reads the 5-minute rollups.
    day, tables = _tables_read(lambda: gpu_series(ids, ["util_pct"], end - dt.timedelta(days=1),
                                                  end))
    assert day.step == 300 and tables == {"telemetry_gpurollup5m", "telemetry_gpusample"}
    # A range ending mid-hour: whole hours from the 1-hour rollups, then whole 5 minutes,
    # whole minutes, and the last seconds from the chunks; the same values as before.
    tail = end - dt.timedelta(minutes=47, seconds=25)
    for agg in ("avg", "max", "min"):
        got, tables = _tables_read(lambda a=agg: gpu_series(
            ids, ["util_pct", "power_w"], start, tail, step=3600, agg=a))
        assert tables == {"telemetry_gpurollup1h", "telemetry_gpurollup5m",
                          "telemetry_gpurollup1m", "telemetry_gpuchunk", "telemetry_gpusample"}
        want = raw_tail[agg]
        for gpu in ids:
            for metric in ("util_pct", "power_w"):
                assert got.values[gpu][metric] == pytest.approx(want[gpu][metric], abs=0.006)


def test_the_max_and_min_of_a_gauge_kept_only_as_a_mean_come_from_the_raw_tier():
    """The rollups keep the min and max only of the gauges whose bands the pages draw
    (``rollupcodec.KEPT``): the hottest minute of a GPU's temperature is read from the raw
    chunks, the same as before compaction, and a range older than the raw samples is a
    clear error rather than a blank chart."""
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    start = now - dt.timedelta(hours=6)
    gpus = list(rows.node(gpus=1, latest=False).gpus.all())
    rows.gpu_samples(gpus, start + dt.timedelta(seconds=7), now - dt.timedelta(hours=3))
    with connection.cursor() as cur:  # a temperature that moves within each minute
        cur.execute("UPDATE telemetry_gpusample SET temp_c = 40 + extract(epoch FROM ts)::int % 37")
    ids = [g.id for g in gpus]
    end = now - dt.timedelta(hours=2)
    before = {agg: gpu_series(ids, ["temp_c"], start, end, step=60, agg=agg).values
              for agg in ("max", "min")}
    assert compaction.compact(now).rows == 3 * 360
    for agg in ("max", "min"):
        got, tables = _tables_read(lambda a=agg: gpu_series(ids, ["temp_c"], start, end,
                                                            step=60, agg=a))
        assert tables == {"telemetry_gpuchunk", "telemetry_gpusample"}, agg
        assert got.values == before[agg]
        assert {v for v in got.values[ids[0]]["temp_c"] if v is not None} != {55.0}
    # Its mean still comes from the 1-minute rollup.
    _, tables = _tables_read(lambda: gpu_series(ids, ["temp_c"], start, end, step=60))
    assert tables == {"telemetry_gpurollup1m", "telemetry_gpusample"}
    old = now - dt.timedelta(days=20)
    with pytest.raises(SeriesError, match="the max of temp_c is kept with the raw samples"):
        gpu_series(ids, ["temp_c"], old, old + dt.timedelta(hours=6), agg="max")
    gpu_series(ids, ["util_pct", "temp_c"], old, old + dt.timedelta(hours=6))  # means: fine
