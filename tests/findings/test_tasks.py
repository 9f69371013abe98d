"""The beat task: thin, named, scheduled every minute and overridable."""

import datetime as dt
import time

import pytest

from clusterui.celery import app
from clusterui.findings.models import Finding
from clusterui.findings.tasks import run_detectors
from clusterui.ingest.tasks import ingest_envelope
from tests.findings.batches import Job, Node, span, steady_batch


@pytest.mark.django_db
def test_run_detectors_runs_a_pass_over_running_jobs():
    start = (time.time() // 60) * 60 - 900
    job = Job("601", gpus=[0, 1], started_at=start - 3600)
    ingest_envelope(steady_batch(Node("t001"), seq=1, times=span(start, 840), job=job,
                                 util=0.0))
    assert run_detectors() == 1
    [finding] = Finding.objects.all()
    assert finding.kind == "low_utilization" and finding.job.external_id == "601"
    assert finding.last_seen > dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2)


def test_beat_runs_the_detectors_every_minute():
    entry = app.conf.beat_schedule["run-detectors"]
    assert entry["task"] == "clusterui.findings.run_detectors"
    assert entry["schedule"] == 60 and entry["options"]["expires"] < 60
    assert app.tasks["clusterui.findings.run_detectors"].ignore_result is True
