"""The question the API must answer in two calls: "which of my jobs wasted the most
GPU-hours this week, and what was its utilization over time?" (docs/api.md)."""

import datetime as dt
import math
import time

import pytest
from django.utils import timezone

from clusterui.findings.models import JobEfficiency
from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from tests.api import factories
from tests.factories import node_batch

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_calls_answer_it(api, users, clean_samples):
    start = math.floor(time.time() / 60) * 60 - 3600
    # Alice's 8-GPU job with an hour of samples, and her other jobs; bob wasted more.
    ingest_envelope(node_batch("gpu-w001", gpus=8, samples=360, start=start, job="5150"))
    worst = Job.objects.get(external_id="5150")
    JobEfficiency.objects.create(job=worst, computed_at=timezone.now(),
                                 window_start=worst.started_at, window_end=timezone.now(),
                                 gpus=8, gpu_hours_allocated=8.0, gpu_hours_used=2.0,
                                 gpu_hours_wasted=6.0, util_source="nvml_util")
    factories.job("alice", efficiency={"allocated": 4.0, "used": 3.5})
    factories.job("alice")  # running, figures not computed yet
    factories.job("alice", state="ended", started_at=timezone.now() - dt.timedelta(days=30),
                  ended_at=timezone.now() - dt.timedelta(days=29),
                  efficiency={"allocated": 90.0, "used": 0.0})  # not this week
    factories.job("bob", efficiency={"allocated": 100.0, "used": 0.0})
    alice = api("alice")

    week_ago = (timezone.now() - dt.timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    first = alice.get(f"/api/v1/jobs/?active_from={week_ago}&ordering=-wasted&limit=1").json()
    (job,) = first["results"]
    assert (job["external_id"], job["wasted_gpu_hours"]) == ("5150", 6.0)
    assert job["efficiency_pct"] == 25.0

    second = alice.get(f"/api/v1/jobs/{job['id']}/metrics?metrics=util_pct").json()
    assert len(second["series"]) == 8  # one per GPU, on one time axis
    assert second["step_s"] == 10 and len(second["ts"]) <= 600
    gpu3 = next(s for s in second["series"] if s["name"] == "gpu-w001/gpu3")
    first_sample = second["ts"].index(
        dt.datetime.fromtimestamp(start, dt.UTC).isoformat().replace("+00:00", "Z"))
    # GPU g at sample k reported (7g + k) % 100 (tests/factories.py)
    assert gpu3["values"][first_sample:first_sample + 3] == [21.0, 22.0, 23.0]
