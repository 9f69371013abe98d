"""``clusterui.alerts.send_digest``: once a day after ALERT_DIGEST_HOUR, to the admins, with
the most wasteful jobs and the open findings."""

import datetime as dt
from collections import Counter

import pytest
from django.template.loader import render_to_string
from django.utils import timezone

from clusterui.alerts import delivery, digest, outbox
from clusterui.alerts.models import AlertEmail, DigestRun, OptOut
from clusterui.alerts.tasks import send_digest
from tests.alerts.factories import make_efficiency, make_finding, make_job, make_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def admins(settings):
    """Two admins, and a digest hour of 0 so that ``send_digest``, which reads the wall clock,
    queues today's digest whatever the hour the suite runs at (CI once ran it before 07:00 and
    the digest, rightly, was not due yet). The hour itself is tested with explicit times."""
    settings.ADMINS = [("Ops", "ops@example.org"), ("Lead", "lead@example.org")]
    settings.ALERT_DIGEST_HOUR = 0


def cluster_day():
    big = make_job("alice", name="big-idle")
    make_efficiency(big, allocated=64.0, wasted=51.2)
    mid = make_job("bob", name="loader-bound")
    make_efficiency(mid, allocated=16.0, wasted=9.5, gpus=4)
    fine = make_job("carol", name="healthy")
    make_efficiency(fine, allocated=8.0, wasted=0.0)
    make_finding(big, wasted=51.2)
    make_finding(big, kind="idle_gpu", severity="critical", wasted=40.0)
    make_finding(mid, kind="input_bound", wasted=9.5)
    make_finding(node=make_node("gpu-a017"), kind="gpu_errors", severity="critical", wasted=0)
    make_finding(fine, kind="throttling", state="closed", closed_at=timezone.now())
    return big, mid


def test_the_digest_goes_out_once_a_day_after_its_hour(smtp, admins, settings):
    settings.ALERT_DIGEST_HOUR = 7
    today = timezone.localtime().replace(hour=6, minute=59)
    assert outbox.queue_digest(today) == 0  # before 07:00
    assert outbox.queue_digest(today.replace(hour=7, minute=0)) == 2
    assert outbox.queue_digest(today.replace(hour=18)) == 0  # already queued today
    assert DigestRun.objects.count() == 1
    assert outbox.queue_digest(today.replace(hour=7) + dt.timedelta(days=1)) == 2  # next day


def test_the_digest_lists_top_waste_and_open_findings(smtp, admins):
    big, mid = cluster_day()
    result = send_digest()
    assert (result["queued"], result["sent"]) == (2, 2)

    assert sorted(m.envelope_to[0] for m in smtp.received) == ["lead@example.org",
                                                              "ops@example.org"]
    mail = smtp.received[0]
    assert mail.subject.startswith("[ClusterUI] Daily digest ")
    assert mail.subject.endswith(": 4 open findings, 60.7 GPU-h wasted")
    text = mail.text
    assert "3 jobs ran on GPUs: 88.0 GPU-hours allocated, 60.7 wasted (69 %)" in text
    # Most waste first, and the job that wasted nothing is not listed.
    assert text.index("big-idle") < text.index("loader-bound")
    assert "healthy" not in text.split("OPEN FINDINGS BY KIND")[0]
    assert f"http://clusterui.test/jobs/{big.pk}/" in text
    assert "Low GPU utilization" in text and "Idle allocated GPU" in text
    assert "GPU errors on node gpu-a017" in text
    assert "Thermal or power throttling" not in text  # closed: not open
    assert "1 finding opened" not in text and "1 closed" in text
    for needle in ("big-idle", "Daily digest", "Most wasteful jobs", "gpu-a017"):
        assert needle in mail.html
    assert "All findings: http://clusterui.test/findings/" in text
    assert mail.message["List-Unsubscribe"]


def test_the_digest_says_how_much_of_the_waste_was_measured(smtp, admins):
    """big-idle was sampled for the second half of its run only: of the day's 88 GPU-hours
    allocated 56 were measured (64 %), said in both parts, and its waste is marked "≈";
    loader-bound, measured throughout, is not. With every job measured, no such line."""
    big, mid = cluster_day()
    eff = big.efficiency
    eff.measured_from = eff.window_start + (eff.window_end - eff.window_start) / 2
    eff.save()
    mid.efficiency.measured_from = mid.efficiency.window_start
    mid.efficiency.save()
    send_digest()
    mail = smtp.received[0]
    assert "64 % of these GPU-hours were measured" in mail.text
    lines = {line.split('"')[1]: line for line in mail.text.splitlines()
             if "GPU-h  job" in line}
    assert lines["big-idle"].startswith(" 1. ≈   51.2 GPU-h")
    assert lines["loader-bound"].startswith(" 2.      9.5 GPU-h")
    assert "64 % measured" in mail.html and "≈</span> 51.2" in mail.html
    assert "≈</span> 9.5" not in mail.html

    eff.measured_from = eff.window_start
    eff.save()
    context = digest.context()
    assert context["measured_pct"] == pytest.approx(100.0)
    assert "were measured" not in render_to_string("emails/digest-body.txt", context)


def test_an_admin_who_stopped_the_digest_does_not_get_it(smtp, admins):
    OptOut.objects.create(address="lead@example.org", category="digest")
    send_digest()
    assert [m.envelope_to for m in smtp.received] == [["ops@example.org"]]
    assert AlertEmail.objects.get(to="lead@example.org").status == "skipped"


def test_the_digest_does_not_count_against_the_daily_limit(smtp, admins, settings, cast):
    settings.ALERT_DAILY_LIMIT = 1
    settings.ADMINS = [("Ops", "ops@example.org")]
    settings.ALERT_NOTIFY_ADMINS = True
    make_finding(make_job("alice"))
    now = timezone.localtime().replace(hour=9)
    outbox.queue_findings(now)
    outbox.queue_digest(now)
    assert delivery.deliver_due(now) == Counter(sent=3)  # alice, ops copy, ops digest


def test_no_digest_without_admins(smtp, settings):
    settings.ADMINS = []
    assert send_digest()["queued"] == 0
    assert DigestRun.objects.count() == 0


def test_the_digest_run_prunes_the_old_email_log_but_never_pending_mail(smtp, settings, cast):
    settings.ALERT_LOG_RETENTION_DAYS = 30
    make_finding(make_job("alice"))
    make_finding(make_job("alice"), kind="idle_gpu")
    send_digest()  # no admins: only the pruning
    old = timezone.now() - dt.timedelta(days=31)
    outbox.queue_findings(old)
    sent, pending = AlertEmail.objects.order_by("pk")
    AlertEmail.objects.filter(pk=sent.pk).update(status="sent")
    AlertEmail.objects.filter(pk=pending.pk).update(  # still retrying after an outage
        next_attempt_at=timezone.now() + dt.timedelta(minutes=30))
    assert send_digest()["pruned"] == 1
    assert list(AlertEmail.objects.values_list("pk", flat=True)) == [pending.pk]
