"""A job that close_stale_jobs ended while its data lagged (a back-fill, a spool replay
after a broker outage) runs again when newer samples arrive and the collector still reports
it running; a job the collector reports ended, or an older replayed batch, stays ended."""

import datetime as dt
import time

import pytest
from django.conf import settings
from django.utils import timezone

from clusterui.ingest import inventory_cache
from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from clusterui.jobs.tasks import close_stale_jobs
from tests.factories import node_batch

pytestmark = pytest.mark.django_db(transaction=True)


def stale_job(clean_samples, monkeypatch):
    """Job 4242 with samples from 20 min ago, ended by the stale sweep once its batches
    stopped arriving (JOB_STALE_AFTER_S later). The ingest worker's clock moves on as the
    sweep's did (its memory of the node's inventory is that old when the node is back)."""
    start = time.time() - 1200
    ingest_envelope(batch(1, 3, start, start - 60))
    assert close_stale_jobs() == 0  # just reported: not stale, however old its data
    silence = settings.JOB_STALE_AFTER_S + 10
    later = timezone.now() + dt.timedelta(seconds=silence)
    assert close_stale_jobs(now=later) == 1
    job = Job.objects.get(external_id="4242")
    assert job.state == "ended" and job.ended_at == job.last_seen
    clock = inventory_cache.time.monotonic() + silence
    monkeypatch.setattr(inventory_cache.time, "monotonic", lambda: clock)
    return start, job


def batch(seq: int, samples: int, start: float, job_started: float) -> dict:
    """A batch of gpu-t001's running job 4242, which started (as its scheduler reports it,
    the same in every batch) at ``job_started``."""
    return node_batch("gpu-t001", seq=seq, samples=samples, start=start, gpus=2,
                      job_started=job_started)


def test_newer_data_for_a_job_still_reported_running_revives_it(clean_samples, monkeypatch):
    start, job = stale_job(clean_samples, monkeypatch)
    ingest_envelope(batch(2, 3, start + 600, start - 60))
    job.refresh_from_db()
    assert (job.state, job.ended_at) == ("running", None)
    assert job.last_seen.timestamp() == pytest.approx(start + 600 + 20)


def test_a_job_ended_for_a_short_silence_is_revived_too(clean_samples, monkeypatch, settings):
    """Jobs ended after 30 s without a batch: the node back 40 s later is upserted whole
    (its inventory is not trusted past half that), which revives its job."""
    settings.JOB_STALE_AFTER_S = 30
    start, job = stale_job(clean_samples, monkeypatch)
    ingest_envelope(batch(2, 3, start + 600, start - 60))
    job.refresh_from_db()
    assert (job.state, job.ended_at) == ("running", None)


def test_an_older_replayed_batch_leaves_it_ended(clean_samples, monkeypatch):
    start, job = stale_job(clean_samples, monkeypatch)
    ended = job.ended_at
    ingest_envelope(batch(2, 1, start - 300, start - 60))
    job.refresh_from_db()
    assert (job.state, job.ended_at) == ("ended", ended)


def test_a_job_the_collector_reports_ended_stays_ended(clean_samples, monkeypatch):
    start, job = stale_job(clean_samples, monkeypatch)
    ended = batch(2, 3, start + 600, start - 60)
    ended["jobs"][0]["ended_at"] = start + 640
    ingest_envelope(ended)
    job.refresh_from_db()
    assert job.state == "ended"
    assert job.ended_at == dt.datetime.fromtimestamp(start + 640, dt.UTC)


def test_newer_data_after_an_older_batch_still_revives_it(clean_samples, monkeypatch):
    """The node comes back with data from before the job's end first (a back-fill that
    overlaps what was stored, batches out of order across consumers), then newer data.
    The first batch upserts the node's inventory and leaves the job ended, rightly; the
    next ones find that inventory unchanged and only touch the job's times: they must
    revive it all the same. (Seen in the demo restarted on its kept database: every job
    stayed ended while the simulator reported it running, so the detector pass judged
    none of them.)"""
    start, job = stale_job(clean_samples, monkeypatch)
    ingest_envelope(batch(2, 1, start - 300, start - 60))
    job.refresh_from_db()
    assert job.state == "ended"
    ingest_envelope(batch(3, 3, start + 600, start - 60))
    job.refresh_from_db()
    assert (job.state, job.ended_at, job.exit_state) == ("running", None, "")
    assert job.last_seen.timestamp() == pytest.approx(start + 600 + 20)
