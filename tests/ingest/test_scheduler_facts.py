"""A job's scheduler facts (contract 1: submitted_at, time_limit_s, exit_state, exit_code,
exit_signal): each checked on its own, stored on the job, kept when a later report lacks
them."""

import datetime as dt
import time

import pytest

from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from clusterui.jobs.models import Job
from tests.factories import node_batch

NOW = 1763800000.0
FACTS = {"submitted_at": NOW - 900.0, "time_limit_s": 14400, "exit_state": None,
         "exit_code": None, "exit_signal": None}


def batch_with(**facts):
    envelope = node_batch(start=NOW - 30)
    envelope["jobs"][0].update(facts)
    return envelope


def test_good_facts_pass_as_they_are():
    batch = validate_batch(batch_with(**FACTS, ended_at=NOW), now=NOW)
    assert batch.rejected_total == 0
    job = batch.jobs["4242"]
    assert {k: job[k] for k in FACTS} == {**FACTS, "exit_state": ""}
    ended = validate_batch(batch_with(exit_state="timeout", exit_code=0, exit_signal=15,
                                      ended_at=NOW), now=NOW).jobs["4242"]
    assert (ended["exit_state"], ended["exit_code"], ended["exit_signal"]) == ("timeout", 0, 15)


@pytest.mark.parametrize(("facts", "reason"), [
    ({"time_limit_s": 0}, "jobs: time_limit_s out of range [1, 2.14748e+09]"),
    ({"time_limit_s": 90.5}, "jobs: time_limit_s must be an integer"),
    ({"time_limit_s": "4:00"}, "jobs: time_limit_s must be a number or null, got str"),
    ({"submitted_at": 12.0}, "jobs: submitted_at out of range [9.46685e+08, 1e+11]"),
    ({"exit_code": 256}, "jobs: exit_code out of range [0, 255]"),
    ({"exit_signal": -1}, "jobs: exit_signal out of range [0, 127]"),
    ({"exit_state": "COMPLETED"}, "jobs: exit_state must be null or one of completed, failed, "
                                  "cancelled, timeout, out_of_memory, node_fail, preempted, "
                                  "boot_fail, deadline"),
])  # fmt: skip
def test_a_bad_fact_is_refused_alone_and_the_job_kept(facts, reason):
    batch = validate_batch(batch_with(**FACTS | facts, ended_at=NOW), now=NOW)
    assert dict(batch.rejected) == {reason: 1}
    job = batch.jobs["4242"]  # the job, its samples and its other facts land
    assert job[next(iter(facts))] in (None, "")
    assert job["user"] == "alice" and len(batch.gpu_rows) == 3 * 8
    others = {k: v for k, v in FACTS.items() if k not in facts}
    assert {k: job[k] for k in others} == {k: (v if v is not None or k != "exit_state" else "")
                                           for k, v in others.items()}


def test_a_running_job_has_no_exit_state():
    batch = validate_batch(batch_with(exit_state="completed", exit_code=0), now=NOW)
    assert dict(batch.rejected) == {"jobs: exit_state given for a job without ended_at": 1,
                                    "jobs: exit_code given for a job without ended_at": 1}
    job = batch.jobs["4242"]
    assert (job["exit_state"], job["exit_code"], job["user"]) == ("", None, "alice")


@pytest.mark.django_db(transaction=True)
def test_facts_are_stored_then_filled_in_and_kept(clean_samples):
    start = time.time() - 600
    running = node_batch("gpu-t001", seq=1, samples=3, start=start, gpus=2)
    running["jobs"][0].update(submitted_at=start - 160, time_limit_s=7200)
    ingest_envelope(running)
    job = Job.objects.get(external_id="4242")
    assert job.time_limit_s == 7200 and job.exit_state == "" and job.exit_code is None
    assert job.submitted_at == dt.datetime.fromtimestamp(start - 160, dt.UTC)
    assert job.queue_wait == dt.timedelta(seconds=100)  # node_batch starts it 60 s early

    ended = node_batch("gpu-t001", seq=2, samples=3, start=start + 30, gpus=2)
    ended["jobs"][0].update(ended_at=start + 60, exit_state="failed", exit_code=3,
                            exit_signal=0)  # fmt: skip
    ingest_envelope(ended)
    job.refresh_from_db()
    assert (job.state, job.exit_state, job.exit_code, job.exit_signal) == ("ended", "failed", 3, 0)
    assert job.time_limit_s == 7200  # a report without the facts keeps them

    again = node_batch("gpu-t001", seq=3, samples=1, start=start + 60, gpus=2)
    again["jobs"][0]["ended_at"] = start + 60
    ingest_envelope(again)
    job.refresh_from_db()
    assert (job.exit_state, job.exit_code, job.time_limit_s) == ("failed", 3, 7200)


@pytest.mark.django_db(transaction=True)
def test_a_job_running_again_past_its_end_loses_the_exit_of_that_end(clean_samples):
    """Reported ended (failed) and then running with data after that end (a requeued job
    on the same id): the exit facts went with the end."""
    start = time.time() - 600
    ended = node_batch("gpu-t001", seq=1, samples=3, start=start, gpus=2)
    ended["jobs"][0].update(ended_at=start + 20, exit_state="node_fail", exit_code=0,
                            exit_signal=9, time_limit_s=3600)  # fmt: skip
    ingest_envelope(ended)
    job = Job.objects.get(external_id="4242")
    assert (job.state, job.exit_state, job.exit_signal) == ("ended", "node_fail", 9)
    ingest_envelope(node_batch("gpu-t001", seq=2, samples=3, start=start + 300, gpus=2))
    job.refresh_from_db()
    assert (job.state, job.exit_state, job.exit_code, job.exit_signal) == ("running", "", None,
                                                                          None)
    assert job.time_limit_s == 3600  # not a fact of the end


@pytest.mark.parametrize("key", ["submitted_at", "started_at", "ended_at"])
def test_a_job_time_in_the_future_is_refused_alone(key):
    """Beyond the skew samples may have (300 s): no node can have seen it yet."""
    ahead = NOW + 301.0
    batch = validate_batch(batch_with(**FACTS | {key: ahead}), now=NOW)
    assert dict(batch.rejected) == {f"jobs: {key} is in the future (a clock off?)": 1}
    job = batch.jobs["4242"]
    assert job[key] is None and job["user"] == "alice" and len(batch.gpu_rows) == 3 * 8
    # within the skew: kept
    assert validate_batch(batch_with(**{key: NOW + 299.0}), now=NOW).rejected_total == 0


def test_a_future_end_takes_its_exit_with_it_and_spares_the_next_batch():
    ahead = batch_with(ended_at=NOW + 86400 * 365, exit_state="completed", exit_code=0)
    batch = validate_batch(ahead, now=NOW)
    assert (batch.jobs["4242"]["ended_at"], batch.jobs["4242"]["exit_state"],
            batch.jobs["4242"]["exit_code"]) == (None, "", None)
    # The same inventory a year later is a true end (inventories are remembered between
    # batches: the bound must not be).
    later = validate_batch(batch_with(ended_at=NOW + 86400 * 365, exit_state="completed",
                                      exit_code=0), now=NOW + 86400 * 365 + 60)
    assert not [r for r in later.rejected if r.startswith("jobs:")]  # (its samples are old)
    assert later.jobs["4242"]["exit_state"] == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_forged_end_years_ahead_does_not_end_a_running_job(clean_samples):
    """A node that says a job ended in 2100 would otherwise end it until then: batches of
    its other nodes reporting it running would never revive it (their data is older)."""
    start = time.time() - 600
    ingest_envelope(node_batch("gpu-t001", seq=1, samples=3, start=start, gpus=2))
    forged = node_batch("gpu-t002", seq=1, samples=3, start=start + 30, gpus=2)
    forged["jobs"][0].update(ended_at=4102444800.0, exit_state="failed", exit_code=1)
    result = ingest_envelope(forged)
    assert result.rejected == 1
    job = Job.objects.get(external_id="4242")
    assert (job.state, job.ended_at, job.exit_state) == ("running", None, "")
    ingest_envelope(node_batch("gpu-t001", seq=2, samples=3, start=start + 60, gpus=2))
    job.refresh_from_db()
    assert job.state == "running"
