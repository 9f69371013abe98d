"""Time series read back: aligned buckets, gaps as None, multi-node host CPU summed."""

import datetime as dt

import pytest

from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from clusterui.telemetry.series import SeriesError, gpu_series, job_host_series, pick_step
from tests.factories import node_batch

pytestmark = pytest.mark.django_db
T0 = 1_790_000_040.0  # on a minute boundary of the series origin


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
