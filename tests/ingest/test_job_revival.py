"""A job that close_stale_jobs ended while its data lagged (a back-fill, a spool replay
after a broker outage) runs again when newer samples arrive and the collector still reports
it running; a job the collector reports ended, or an older replayed batch, stays ended."""

import datetime as dt
import time

import pytest
from django.conf import settings
from django.utils import timezone

from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from clusterui.jobs.tasks import close_stale_jobs
from tests.factories import node_batch

pytestmark = pytest.mark.django_db(transaction=True)


def stale_job(clean_samples):
    """Job 4242 with samples from 20 min ago, ended by the stale sweep once its batches
    stopped arriving (JOB_STALE_AFTER_S later)."""
    start = time.time() - 1200
    ingest_envelope(node_batch("gpu-t001", seq=1, samples=3, start=start, gpus=2))
    assert close_stale_jobs() == 0  # just reported: not stale, however old its data
    later = timezone.now() + dt.timedelta(seconds=settings.JOB_STALE_AFTER_S + 60)
    assert close_stale_jobs(now=later) == 1
    job = Job.objects.get(external_id="4242")
    assert job.state == "ended" and job.ended_at == job.last_seen
    return start, job


def test_newer_data_for_a_job_still_reported_running_revives_it(clean_samples):
    start, job = stale_job(clean_samples)
    ingest_envelope(node_batch("gpu-t001", seq=2, samples=3, start=start + 600, gpus=2))
    job.refresh_from_db()
    assert (job.state, job.ended_at) == ("running", None)
    assert job.last_seen.timestamp() == pytest.approx(start + 600 + 20)


def test_an_older_replayed_batch_leaves_it_ended(clean_samples):
    start, job = stale_job(clean_samples)
    ended = job.ended_at
    ingest_envelope(node_batch("gpu-t001", seq=2, samples=1, start=start - 300, gpus=2))
    job.refresh_from_db()
    assert (job.state, job.ended_at) == ("ended", ended)


def test_a_job_the_collector_reports_ended_stays_ended(clean_samples):
    start, job = stale_job(clean_samples)
    batch = node_batch("gpu-t001", seq=2, samples=3, start=start + 600, gpus=2)
    batch["jobs"][0]["ended_at"] = start + 640
    ingest_envelope(batch)
    job.refresh_from_db()
    assert job.state == "ended"
    assert job.ended_at == dt.datetime.fromtimestamp(start + 640, dt.UTC)
