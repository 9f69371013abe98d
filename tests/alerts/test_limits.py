"""No spam: the per-address daily limit, quiet hours and weekdays (emails wait, never
dropped), and limits that hold with two real workers sending at once."""

import datetime as dt
from collections import Counter

import pytest
from django.utils import timezone

from clusterui.alerts import delivery, outbox
from clusterui.alerts.choices import EmailStatus
from clusterui.alerts.models import AlertEmail, DailyCount
from clusterui.celery import app
from clusterui.findings.models import Finding
from tests.alerts.factories import make_finding, make_job, make_user
from tests.alerts.smtp import SmtpServer
from tests.services import wait_for

UTC = dt.UTC


def run(now):
    outbox.queue_findings(now)
    return delivery.deliver_due(now)


@pytest.mark.django_db
def test_the_daily_limit_caps_emails_per_address_and_says_so(smtp, settings, cast):
    settings.ALERT_DAILY_LIMIT = 2
    for _ in range(4):
        make_finding(make_job("alice"))
    monday = dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC)

    assert run(monday) == Counter(sent=2, skipped=2)

    assert [len(smtp.to("alice@example.org"))] == [2]
    first, last = smtp.received
    assert "last alert email today" not in first.text
    assert ("This is your last alert email today: ClusterUI sends at most 2 a day. Later "
            "findings are listed on http://clusterui.test/findings/") in last.text
    skipped = AlertEmail.objects.filter(status=EmailStatus.SKIPPED)
    assert [e.status_detail for e in skipped] == ["daily limit of 2 emails reached"] * 2
    # Skipped stays skipped; the next day has a fresh allowance for new findings.
    make_finding(make_job("alice"))
    assert run(monday + dt.timedelta(days=1)) == Counter(sent=1)
    assert DailyCount.objects.get(address="alice@example.org", day=dt.date(2026, 11, 24)).sent == 1


@pytest.mark.django_db
def test_the_daily_limit_is_per_address(smtp, settings, cast):
    settings.ALERT_DAILY_LIMIT = 1
    make_finding(make_job("alice"))
    make_finding(make_job("carol"))
    assert run(timezone.now()) == Counter(sent=2)


@pytest.mark.django_db
def test_quiet_hours_delay_emails_and_never_drop_them(smtp, settings, cast):
    settings.ALERT_QUIET_HOURS = (dt.time(22, 0), dt.time(7, 0))
    make_finding(make_job("alice"))
    night = dt.datetime(2026, 11, 23, 23, 30, tzinfo=UTC)

    assert run(night) == Counter()
    assert run(night + dt.timedelta(hours=7)) == Counter()  # 06:30, still quiet
    assert AlertEmail.objects.get().status == EmailStatus.PENDING
    assert smtp.received == []

    assert run(night + dt.timedelta(hours=7, minutes=31)) == Counter(sent=1)  # 07:01
    assert len(smtp.received) == 1


@pytest.mark.django_db
def test_quiet_hours_follow_the_local_time_zone(smtp, settings, cast):
    settings.TIME_ZONE = "Europe/Berlin"
    settings.ALERT_QUIET_HOURS = (dt.time(20, 0), dt.time(8, 0))
    make_finding(make_job("alice"))
    # 07:30 UTC is 08:30 in Berlin in November (UTC+1): allowed.
    assert run(dt.datetime(2026, 11, 23, 6, 30, tzinfo=UTC)) == Counter()
    assert run(dt.datetime(2026, 11, 23, 7, 30, tzinfo=UTC)) == Counter(sent=1)


@pytest.mark.django_db
def test_emails_wait_for_a_listed_weekday(smtp, settings, cast):
    settings.ALERT_WEEKDAYS = frozenset(range(5))  # mon-fri
    make_finding(make_job("alice"))
    saturday = dt.datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    assert run(saturday) == Counter()
    assert run(saturday + dt.timedelta(days=1)) == Counter()
    assert run(saturday + dt.timedelta(days=2)) == Counter(sent=1)  # Monday


@pytest.mark.django_db
def test_a_slow_server_never_holds_a_run_past_its_time_budget(smtp, settings, cast,
                                                             monkeypatch):
    smtp.delay_s = 0.4
    monkeypatch.setattr(delivery, "budget_s", lambda: 0.5)
    for _ in range(5):
        make_finding(make_job("alice"))
    now = timezone.now()
    outbox.queue_findings(now)
    first = delivery.deliver_due(now)
    assert 1 <= first["sent"] < 5  # stopped starting sends once the budget was spent
    assert AlertEmail.objects.filter(status=EmailStatus.PENDING).count() == 5 - first["sent"]
    while AlertEmail.objects.filter(status=EmailStatus.PENDING).exists():
        delivery.deliver_due(timezone.now())
    assert len(smtp.received) == 5  # the next runs send the rest, each once


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_workers_sending_at_once_send_each_email_once_within_the_limits(make_worker):
    """Two real worker processes (two pool processes each) run the send task at the same
    time over the same pending findings, through a slow mail server: every (finding,
    recipient) is emailed exactly once and the daily limit holds across them."""
    server = SmtpServer(delay_s=0.15).start()
    try:
        for name in ("alice", "bob", "carol"):
            make_user(name)
        jobs = {"alice": 6, "bob": 2, "carol": 1}
        for user, n in jobs.items():
            for _ in range(n):
                make_finding(make_job(user))
        env = {"EMAIL_URL": server.url, "ALERT_DAILY_LIMIT": "4", "EMAIL_TIMEOUT": "5",
               "SITE_URL": "http://clusterui.test"}
        workers = [make_worker(queues=q, concurrency=2, extra_env=env)
                   for q in ("alerts-a", "alerts-b")]

        for queue in ("alerts-a", "alerts-b", "alerts-a", "alerts-b"):
            app.send_task("clusterui.alerts.send_alerts", queue=queue)

        def settled():
            return (not Finding.objects.filter(emailed_at=None).exists()
                    and not AlertEmail.objects.filter(status=EmailStatus.PENDING).exists())

        wait_for(settled, timeout=60, what="every finding claimed and every email settled")
    finally:
        server.stop()

    assert Counter(m.envelope_to[0] for m in server.received) == {
        "alice@example.org": 4, "bob@example.org": 2, "carol@example.org": 1}
    subjects = [m.subject for m in server.received]
    assert len(set(subjects)) == len(subjects) == 7  # never the same email twice
    assert AlertEmail.objects.count() == 9  # one per finding and recipient
    assert Counter(AlertEmail.objects.values_list("status", flat=True)) == {"sent": 7,
                                                                            "skipped": 2}
    assert DailyCount.objects.get(address="alice@example.org").sent == 4
    for worker in workers:  # both really sent: each ran its two tasks
        assert worker.log().count("Task clusterui.alerts.send_alerts[") >= 4  # received+done
