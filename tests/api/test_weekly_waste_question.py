"""The question the API must answer in two calls: "which of my jobs wasted the most
GPU-hours this week, and what was its utilization over time?" (docs/api.md), end to end:
samples stored by the real ingest, efficiency computed by the real detector pass."""

import datetime as dt
import time

import pytest
from django.utils import timezone

from clusterui.findings.runner import run_pass
from clusterui.findings.thresholds import Thresholds
from clusterui.ingest.tasks import ingest_envelope
from tests.findings.batches import Job, Node, span, steady_batch

pytestmark = pytest.mark.django_db(transaction=True)

START = (time.time() // 60 - 70) * 60  # a minute boundary, 70 minutes ago
HOUR = span(START, 3600)


def store(node: Node, job: Job, util: float) -> None:
    ingest_envelope(steady_batch(node, seq=1, times=HOUR, job=job, util=util))


def test_two_calls_answer_it(api, users, clean_samples):
    store(Node("w001", gpus=4), Job("5150", gpus=[0, 1, 2, 3], started_at=START), util=8.0)
    store(Node("w002", gpus=2), Job("5151", gpus=[0, 1], started_at=START), util=95.0)
    store(Node("w003", gpus=8), Job("6000", gpus=list(range(8)), started_at=START,
                                    user="bob"), util=0.0)  # wastes more, but is not hers
    run_pass(now=dt.datetime.fromtimestamp(HOUR[-1] + Thresholds().settle_s, dt.UTC))
    alice = api("alice")

    week_ago = (timezone.now() - dt.timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    first = alice.get(f"/api/v1/jobs/?active_from={week_ago}&ordering=-wasted&limit=1").json()
    assert first["count"] == 2
    (job,) = first["results"]
    assert job["external_id"] == "5150"
    assert job["gpu_hours"] == pytest.approx(4.0, rel=0.05)  # 4 GPUs for an hour
    assert job["wasted_gpu_hours"] > 3.0 and job["efficiency_pct"] < 20

    second = alice.get(f"/api/v1/jobs/{job['id']}/metrics?metrics=util_pct").json()
    assert [s["name"] for s in second["series"]] == [f"w001/gpu{i}" for i in range(4)]
    assert second["step_s"] == 10 and len(second["ts"]) <= 600
    for series in second["series"]:
        measured = [v for v in series["values"] if v is not None]
        assert len(measured) == len(HOUR) and set(measured) == {8.0}
