"""The job-end summary: when the detector pass finalizes a job, ``send_alerts`` emails its
owner the job's report (the one ``clusterui jobstats`` prints) over a real SMTP server, once.

Jobs are stored through the real validation and writer and finalized by the real detector
pass (``close_stale_jobs`` ends them, as the beat does); the report the email must carry is
fetched from the real API views and printed by the command's own code."""

import datetime as dt
import re
import time
from urllib.parse import urlsplit

import pytest
from rest_framework.test import APIClient

from clusterui.alerts.choices import JOB_END, EmailStatus
from clusterui.alerts.models import AlertEmail, JobEndRun, OptIn
from clusterui.alerts.preferences import unsubscribe_url
from clusterui.alerts.tasks import send_alerts
from clusterui.findings.models import JobEfficiency
from clusterui.findings.runner import run_pass
from clusterui.ingest import inventory_cache
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.jobs.models import Job as JobRow
from clusterui.jobs.tasks import close_stale_jobs
from collectors.client import jobstats
from tests.findings.batches import Job, Node, span, steady_batch

pytestmark = pytest.mark.django_db
NOW = (time.time() // 60) * 60
BASE = NOW - 3 * 3600


def at(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


def deliver(node, job, minutes, *, arrived=None, util=2.0, start=BASE):
    for m in minutes:
        times = span(start + 60 * m, 60)
        envelope = steady_batch(node, seq=1 + m, times=times, job=job, util=util, sm=util)
        store_batch(validate_batch(envelope, now=arrived or times[-1] + 2),
                    received_at=at(arrived or times[-1] + 2))


def finalized_job(job_id: str, *, user: str = "alice", util: float = 2.0, minutes: int = 30,
                  live=None) -> tuple[Node, Job, float]:
    """A two-GPU job of ``minutes`` minutes at ``util`` %, ended and finalized."""
    node, job = Node(f"je-{job_id}"), Job(job_id, gpus=[0, 1], started_at=BASE - 600, user=user)
    deliver(node, job, live if live is not None else range(minutes), util=util)
    end = BASE + 60 * minutes
    assert close_stale_jobs(now=at(end + 400)) == 1
    assert run_pass(now=at(end + 460)).finalized == 1
    return node, job, end


class ApiAsUser:
    """``collectors.client.api.Client``'s one method, over the test client: the real API
    views answer what ``clusterui jobstats`` would fetch."""

    def __init__(self, user):
        self.api = APIClient()
        self.api.force_authenticate(user)

    def get(self, path: str, params: dict | None = None) -> dict:
        response = self.api.get("/api/v1/" + path.lstrip("/"), params or {})
        assert response.status_code == 200, response.content
        return response.json()


def jobstats_lines(user, job_id: str) -> list[str]:
    report = jobstats.collect(ApiAsUser(user), job_id, cluster="hand")
    return jobstats.render(report).splitlines()


def contains_block(text: str, block: list[str]) -> bool:
    lines = text.splitlines()
    return any(lines[i:i + len(block)] == block for i in range(len(lines) - len(block) + 1))


def job_end_mails(smtp):
    return [m for m in smtp.received if m.message["X-ClusterUI-Category"] == JOB_END]


def test_a_wasteful_job_sends_its_report_once_and_late_data_sends_no_second(smtp, cast):
    """Idle GPUs for 30 minutes: 2 % busy, so nearly all of it wasted. Its middle minutes
    reach ClusterUI an hour after it was finalized: finalized again, no second email."""
    node, job, end = finalized_job("9101", live=[0, 1, 28, 29])
    eff = JobEfficiency.objects.get(job__external_id="9101")
    assert eff.gpu_hours_wasted > 0.9 * eff.gpu_hours_allocated

    assert send_alerts()["sent"] == 1
    [mail] = job_end_mails(smtp)
    assert mail.envelope_to == ["alice@example.org"]
    assert mail.subject.startswith('[ClusterUI] Job 9101 "train" ended: 2 % of its GPU time '
                                   "used (")
    # It started 10 minutes before its first sample: 3/4 of its run measured, so its waste
    # is partly the measured part's stand-in for the rest, as the report says.
    assert mail.subject.endswith(f"(about {eff.gpu_hours_wasted:.1f} GPU-h wasted)")
    assert "Measured from" in mail.text
    # The text part holds the report `clusterui jobstats 9101` prints, line for line.
    expected = jobstats_lines(cast["owner"], "9101")
    assert "Figures through:" in "\n".join(expected) and "(final)" in "\n".join(expected)
    assert contains_block(mail.text, expected), mail.text
    assert "wasted 98% of its allocated GPU-hours" in mail.text
    link = f"http://clusterui.test/jobs/{eff.job_id}/"
    assert f"Open job 9101: {link}" in mail.text
    assert link in mail.html and "Job ended" in mail.html
    assert "<pre" in mail.html and "ClusterUI job report" in mail.html
    assert mail.message["List-Unsubscribe"].strip().startswith(
        "<http://clusterui.test/alerts/unsubscribe/")

    # Every run after that: nothing more.
    send_alerts()
    assert len(job_end_mails(smtp)) == 1

    # Late data: the pass finalizes it again; the job is not emailed again.
    before = JobEfficiency.objects.get(job__external_id="9101").finalized_at
    inventory_cache.forget()
    deliver(node, job, range(2, 28), arrived=end + 3600, util=2.0)
    result = run_pass(now=at(end + 3630))
    assert result.late > 0 and result.finalized == 1
    assert JobEfficiency.objects.get(job__external_id="9101").finalized_at > before
    send_alerts()
    assert len(job_end_mails(smtp)) == 1
    assert AlertEmail.objects.filter(category=JOB_END).count() == 1
    assert JobEndRun.objects.get(job=eff.job_id).outcome.startswith("queued: the job wasted")


def test_an_efficient_job_is_emailed_only_to_an_owner_who_asked_for_every_job(
        smtp, cast, client):
    # carol asks for every job's summary on her settings page (all kinds left ticked).
    client.force_login(cast["colleague"])
    page = client.get("/settings/alerts/").content.decode()
    assert 'value="job_end" checked' in page and 'name="job_end_every" value="on">' in page
    kinds = [c for c in ("low_utilization", "idle_gpu", "comm_bound", "input_bound",
                         "throttling", "gpu_errors", "straggler", "job_end")]
    client.post("/settings/alerts/", {"enabled": kinds, "job_end_every": "on"})
    assert OptIn.objects.filter(address="carol@example.org", category=JOB_END).exists()

    finalized_job("9201", user="alice", util=90.0)
    finalized_job("9202", user="carol", util=90.0)
    send_alerts()

    [mail] = job_end_mails(smtp)
    assert mail.envelope_to == ["carol@example.org"]
    assert "you asked for a summary of every job of yours" in mail.text
    assert mail.subject.startswith('[ClusterUI] Job 9202 "train" ended: 90 % of its GPU time')
    alice_run = JobEndRun.objects.get(job__external_id="9201")
    assert alice_run.outcome == "it did not waste enough of its GPU-hours"


def test_short_jobs_never_get_one(smtp, cast, settings):
    assert settings.JOBEND_EMAIL_MIN_RUNTIME_S == 900
    OptIn.objects.create(address="alice@example.org", category=JOB_END)
    node, job = Node("je-short"), Job("9301", gpus=[0, 1], started_at=BASE, user="alice")
    deliver(node, job, range(10))  # 10 minutes, idle
    assert close_stale_jobs(now=at(BASE + 1000)) == 1
    assert run_pass(now=at(BASE + 1060)).finalized == 1
    send_alerts()
    assert job_end_mails(smtp) == []
    assert JobEndRun.objects.get(job__external_id="9301").outcome.startswith("it ran 10 min")


def test_the_signed_link_turns_it_off_and_asks_for_every_job(smtp, cast, client):
    token_path = urlsplit(unsubscribe_url("alice@example.org", JOB_END)).path
    page = client.get(token_path).content.decode()
    assert "Unsubscribe from Job-end summary" in page
    assert 'value="every"' in page  # the same link asks for every job
    client.post(token_path, {"action": "unsubscribe"})

    finalized_job("9401", user="alice", util=2.0)
    send_alerts()
    assert job_end_mails(smtp) == []
    skipped = AlertEmail.objects.get(category=JOB_END)
    assert (skipped.status, skipped.status_detail) == (EmailStatus.SKIPPED,
                                                       "turned off by the recipient")

    # Back on, for every job: an efficient job of hers is emailed.
    client.post(token_path, {"action": "every"})
    assert OptIn.objects.filter(address="alice@example.org", category=JOB_END).exists()
    finalized_job("9402", user="alice", util=90.0)
    send_alerts()
    [mail] = job_end_mails(smtp)
    assert "Job 9402" in mail.subject


def test_a_failed_send_is_retried_and_sent_once(smtp, cast):
    smtp.fail_data = 1  # the first DATA is answered 451
    finalized_job("9501", user="alice", util=2.0)
    first = send_alerts()
    assert first["retry"] == 1 and job_end_mails(smtp) == []
    email = AlertEmail.objects.get(category=JOB_END)
    AlertEmail.objects.filter(pk=email.pk).update(next_attempt_at=email.created_at)
    assert send_alerts()["sent"] == 1
    send_alerts()
    assert len(job_end_mails(smtp)) == 1
    assert AlertEmail.objects.get(pk=email.pk).attempts == 2


def test_a_node_reported_job_name_is_one_plain_line_of_the_report_and_the_email(smtp, cast):
    """A name as a node may report it (validation keeps free text as it is): the report
    `clusterui jobstats` prints in a terminal and the email carries shows it on one line,
    without escape sequences or bidirectional overrides."""
    finalized_job("9106")
    forged = "train\nACTION REQUIRED: sign in at http://evil.example\x1b]0;owned\x07 \u202eevil"
    JobRow.objects.filter(external_id="9106").update(name=forged)

    printed = jobstats_lines(cast["owner"], "9106")
    assert "      Job Name: train ACTION REQUIRED: sign in at http://evil.example ]0;owned " \
           "  evil" in printed
    assert not any(line.startswith("ACTION REQUIRED") for line in printed)
    send_alerts()
    [mail] = job_end_mails(smtp)
    assert contains_block(mail.text, printed), mail.text
    assert not any(line.startswith("ACTION REQUIRED") for line in mail.text.splitlines())
    for part in (mail.text, mail.html):
        assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]",
                             part)
