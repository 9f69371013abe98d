"""The job page's Scheduler block: requested walltime, used of requested, submitted, queue
wait and exit state, each with where it comes from, and "not reported" where absent."""

import datetime as dt
import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.jobs.models import Job
from tests import rows as f

pytestmark = pytest.mark.django_db


def facts(client, job) -> dict[str, tuple[str, str]]:
    """{label: (value, source)} as the page shows them."""
    response = client.get(reverse("job-detail", args=[job.pk]))
    assert response.status_code == 200
    block = re.search(r'<section class="card" aria-labelledby="sched-title".*?</section>',
                      response.content.decode(), re.S).group(0)
    out = {}
    for label, value, source in re.findall(
            r"<dt>(.*?)</dt><dd>(.*?)<div class=\"muted small\">(.*?)</div></dd>", block):
        out[label] = (unescape(re.sub(r"<[^>]+>", "", value)).strip(), unescape(source))
    return out


def test_an_ended_slurm_job_shows_every_fact_with_its_source(client_for):
    started = timezone.now() - dt.timedelta(hours=3)
    job = f.job("alice", state="ended", started_at=started,
                ended_at=started + dt.timedelta(hours=2, minutes=10))
    Job.objects.filter(pk=job.pk).update(
        time_limit_s=4 * 3600, submitted_at=started - dt.timedelta(minutes=7, seconds=30),
        exit_state="failed", exit_code=3, exit_signal=0)

    seen = facts(client_for("alice"), job)

    assert seen["Requested walltime"] == (
        "4 h 00 min", "Slurm's TimeLimit, from scontrol when the collector first saw the job")
    assert seen["Used of requested"][0] == "ran 2 h 10 min of 4 h 00 min requested (54 %)"
    assert seen["Queue wait"] == ("7 min", "SubmitTime to StartTime")
    assert seen["Submitted"][1] == ("Slurm's SubmitTime, from scontrol when the collector "
                                    "first saw the job")
    assert seen["Exit state"] == (
        "Failed, exit code 3",
        "Slurm's JobState and ExitCode, from scontrol when the collector saw the job end")


def test_a_timed_out_job_names_its_signal(client_for):
    job = f.job("alice", state="ended", ended_at=timezone.now())
    Job.objects.filter(pk=job.pk).update(exit_state="timeout", exit_code=0, exit_signal=15)
    assert facts(client_for("alice"), job)["Exit state"][0] == "Timed out, signal 15"


def test_a_running_job_is_measured_against_its_walltime_so_far(client_for):
    job = f.job("alice", started_at=timezone.now() - dt.timedelta(hours=1))
    Job.objects.filter(pk=job.pk).update(time_limit_s=4 * 3600)
    seen = facts(client_for("alice"), job)
    assert seen["Used of requested"][0].startswith("running for 1 h 00 min of 4 h 00 min")
    assert seen["Used of requested"][0].endswith("(25 %)")
    assert seen["Exit state"][0] == "still running"


def test_a_slurm_job_whose_end_was_not_seen_says_why(client_for):
    job = f.job("alice", state="ended", ended_at=timezone.now())
    seen = facts(client_for("alice"), job)
    assert seen["Requested walltime"][0] == "not reported"
    assert "UNLIMITED" in seen["Requested walltime"][1]
    assert seen["Exit state"][0] == "not reported"
    assert "MinJobAge" in seen["Exit state"][1] and "sacct" in seen["Exit state"][1]
    assert seen["Queue wait"] == ("not reported", "needs both the submit and the start time")


@pytest.mark.parametrize(("scheduler", "why"), [
    ("kubernetes", "ClusterUI asks no scheduler about Kubernetes pods"),
    ("none", "the job ran under no scheduler"),
])  # fmt: skip
def test_jobs_without_a_slurm_query_say_once_why_nothing_is_reported(client_for, scheduler,
                                                                      why):
    job = f.job("alice")
    Job.objects.filter(pk=job.pk).update(scheduler=scheduler)
    response = client_for("alice").get(reverse("job-detail", args=[job.pk]))
    block = re.search(r'<section class="card" aria-labelledby="sched-title".*?</section>',
                      response.content.decode(), re.S).group(0)
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", block)).split())
    assert f"Not reported: {why}. The requested walltime, submit time, queue wait and " \
        "exit state come from Slurm's scontrol only." in text
    assert text.count("ot reported") == 1  # one sentence, not one per fact
    assert "<dt>" not in block
