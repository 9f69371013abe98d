"""An SMTP outage delays alert emails and never loses them: the email stays pending with a
growing backoff, and arrives exactly once when the server is back. A refusal that is about
one message (550 for its recipient) fails that email alone, with the reason kept."""

import datetime as dt
from collections import Counter

import pytest
from django.utils import timezone

from clusterui.alerts import delivery
from clusterui.alerts.choices import EmailStatus
from clusterui.alerts.models import AlertEmail, DailyCount
from clusterui.alerts.tasks import send_alerts
from clusterui.celery import app
from tests.alerts.factories import make_finding, make_job, make_user
from tests.alerts.smtp import SmtpServer
from tests.services import free_port, wait_for


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_smtp_outage_delays_the_email_and_it_arrives_exactly_once(make_worker):
    port = free_port()  # nothing listens here yet: the mail server is down
    make_user("alice")
    finding = make_finding(make_job("alice"))
    make_worker(extra_env={"EMAIL_URL": f"smtp://127.0.0.1:{port}", "EMAIL_TIMEOUT": "3",
                           "ALERT_RETRY_BASE_S": "1", "ALERT_RETRY_MAX_S": "2",
                           "SITE_URL": "http://clusterui.test"})

    def beat():  # what Celery beat does every BEAT_ALERTS_S
        app.send_task("clusterui.alerts.send_alerts", queue="default")

    def attempts(n):
        beat()
        email = AlertEmail.objects.filter(finding=finding).first()
        return email is not None and email.attempts >= n and email

    email = wait_for(lambda: attempts(2), timeout=30, interval=0.7,
                     what="two failed attempts while the server is down")
    assert email.status == EmailStatus.PENDING  # delayed, not lost
    assert "Connection refused" in email.last_error or "ConnectionRefused" in email.last_error
    assert email.next_attempt_at > email.created_at
    # The failed attempts gave their daily slot back.
    assert DailyCount.objects.get(address="alice@example.org").sent == 0

    server = SmtpServer(port=port).start()
    try:
        wait_for(lambda: beat() or server.count() >= 1, timeout=30, interval=0.7,
                 what="the email once the server is back")
        for _ in range(3):  # later runs find nothing left to send
            beat()
        wait_for(lambda: not AlertEmail.objects.filter(status=EmailStatus.PENDING).exists(),
                 timeout=10, what="no email left pending")
        [mail] = server.received  # exactly once
    finally:
        server.stop()
    email.refresh_from_db()
    assert email.status == EmailStatus.SENT and email.attempts >= 3
    assert mail.envelope_to == ["alice@example.org"] and "Low GPU utilization" in mail.subject
    assert DailyCount.objects.get(address="alice@example.org").sent == 1


@pytest.mark.django_db
@pytest.mark.parametrize("reply", ["451 4.3.0 Try again later",
                                   "500 Error: (OSError) No space left on device"])
def test_a_temporary_refusal_or_server_error_is_retried_with_backoff(smtp, settings, cast,
                                                                    reply):
    settings.ALERT_RETRY_BASE_S, settings.ALERT_RETRY_MAX_S = 60, 3600
    smtp.fail_data, smtp.fail_reply = 2, reply  # twice
    make_finding(make_job("alice"))

    assert send_alerts()["retry"] == 1
    email = AlertEmail.objects.get()
    assert email.status == EmailStatus.PENDING and email.attempts == 1
    assert reply[:3] in email.last_error
    first_wait = (email.next_attempt_at - timezone.now()).total_seconds()
    assert 50 < first_wait < 70  # about ALERT_RETRY_BASE_S

    assert send_alerts().get("sent", 0) == 0  # not due yet: nothing is tried
    later = email.next_attempt_at + dt.timedelta(seconds=1)
    assert delivery.deliver_due(later) == Counter(retry=1)
    email.refresh_from_db()
    second_wait = (email.next_attempt_at - later).total_seconds()
    assert 100 < second_wait < 140  # doubled

    assert delivery.deliver_due(email.next_attempt_at) == Counter(sent=1)
    assert len(smtp.received) == 1


@pytest.mark.django_db
def test_a_refused_recipient_fails_alone_with_the_reason_kept(smtp, settings, cast):
    settings.ALERT_ACCOUNT_MANAGERS = {"nlp": ["gone@example.org"]}
    smtp.refuse = {"gone@example.org"}
    make_finding(make_job("alice", account="nlp"))

    assert send_alerts() == {"queued": 2, "sent": 1, "failed": 1}
    failed = AlertEmail.objects.get(to="gone@example.org")
    assert failed.status == EmailStatus.FAILED
    assert failed.status_detail.startswith("refused by the mail server")
    assert "550" in failed.last_error
    assert [m.envelope_to for m in smtp.received] == [["alice@example.org"]]
    assert DailyCount.objects.get(address="gone@example.org").sent == 0


@pytest.mark.django_db
def test_a_message_rejected_for_its_content_fails_for_good(smtp, cast):
    smtp.fail_data, smtp.fail_reply = 1, "554 5.7.1 Message rejected as spam"
    make_finding(make_job("alice"))
    assert send_alerts() == {"queued": 1, "failed": 1}
    email = AlertEmail.objects.get()
    assert email.status == EmailStatus.FAILED and "554" in email.status_detail
    assert send_alerts() == {"queued": 0}  # never tried again
