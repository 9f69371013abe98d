"""Deliver pending alert emails over SMTP.

Each email is claimed with a lease (its ``next_attempt_at`` pushed past the time a send can
take) so two workers never send it twice, and a worker that dies mid-send leaves it to be
retried when the lease ends. A failed send keeps the email pending and retries it with
exponential backoff: an SMTP outage delays alerts and never drops them. Only a refusal that
is about this one message (a 5xx for its recipient or its content) fails it for good.
"""

import datetime as dt
import logging
import random
import smtplib
import time
from collections import Counter

from django.conf import settings
from django.core.mail import get_connection
from django.db import connection
from django.db.models import F
from django.utils import timezone

from clusterui.alerts import emails, preferences, window
from clusterui.alerts.choices import DIGEST, JOB_END, EmailStatus
from clusterui.alerts.models import AlertEmail, DailyCount
from clusterui.alerts.outbox import OPTED_OUT, rank
from clusterui.findings.choices import Severity

log = logging.getLogger(__name__)

SENT, SKIPPED, FAILED, RETRY = "sent", "skipped", "failed", "retry"


def lease_s() -> int:
    """Longer than one send can take (connect + send, each bounded by EMAIL_TIMEOUT)."""
    return 4 * settings.EMAIL_TIMEOUT + 60


def budget_s() -> float:
    """How long one run may keep starting sends: it must end (its last send included)
    before the task's soft time limit. What is left waits for the next run."""
    return max(10.0, settings.CELERY_TASK_SOFT_TIME_LIMIT - lease_s())


def backoff_s(attempts: int) -> float:
    base = min(settings.ALERT_RETRY_MAX_S, settings.ALERT_RETRY_BASE_S * 2 ** (attempts - 1))
    return base * random.uniform(0.9, 1.1)


def deliver_due(now: dt.datetime | None = None, *, limit: int | None = None) -> Counter:
    """Send the pending emails that are due; returns how many were sent, skipped, failed, or
    put back to retry. Outside the sending window (quiet hours, weekdays) nothing is sent."""
    now = now or timezone.now()
    outcome: Counter = Counter()
    if not window.sending_allowed(now):
        return outcome
    due = (AlertEmail.objects.filter(status=EmailStatus.PENDING, next_attempt_at__lte=now)
           .order_by("next_attempt_at", "pk").values_list("pk", flat=True))
    smtp = _Smtp()
    deadline = time.monotonic() + budget_s()
    try:
        for pk in list(due[: limit or settings.ALERT_BATCH]):
            if time.monotonic() > deadline:
                break  # a slow server: the rest go in the next run
            if not _lease(pk, now):
                continue  # another worker has it
            result = _deliver(pk, now, smtp)
            outcome[result] += 1
            if result == RETRY:
                break  # the server is down or refusing: the rest wait for the next run
    finally:
        smtp.close()
    return outcome


def _lease(pk: int, now: dt.datetime) -> bool:
    return AlertEmail.objects.filter(
        pk=pk, status=EmailStatus.PENDING, next_attempt_at__lte=now,
    ).update(next_attempt_at=now + dt.timedelta(seconds=lease_s())) == 1


def _deliver(pk: int, now: dt.datetime, smtp: "_Smtp") -> str:
    email = (AlertEmail.objects.select_related("finding__job__cluster", "finding__node",
                                               "job__cluster", "job__efficiency")
             .filter(pk=pk).first())
    if email is None:
        return SKIPPED  # its finding or job was deleted meanwhile
    if preferences.is_opted_out(email.to, email.category):
        return _finish(email, EmailStatus.SKIPPED, OPTED_OUT)
    if email.category == JOB_END:
        if email.job_id is None or not hasattr(email.job, "efficiency"):
            return _finish(email, EmailStatus.SKIPPED, "its job no longer exists")
    elif email.category != DIGEST and email.finding_id is None:
        return _finish(email, EmailStatus.SKIPPED, "its finding no longer exists")
    if _superseded(email):
        return _finish(email, EmailStatus.SKIPPED, "superseded by a pending escalation")
    day = timezone.localdate(now)
    count = None
    if email.category != DIGEST:
        count = _reserve(email.to, day)
        if count is None:
            return _finish(email, EmailStatus.SKIPPED,
                           f"daily limit of {settings.ALERT_DAILY_LIMIT} emails reached")
    try:
        message = emails.build(email, limit_reached=count == settings.ALERT_DAILY_LIMIT)
    except Exception as exc:  # a bug in rendering must not block the queue: log and retry
        log.exception("cannot render alert email %s", email.pk)
        return _retry(email, now, count, day, f"rendering failed: {exc!r}")
    try:
        smtp.send(message)
    except ValueError as exc:
        # Django cannot make an address of it (``sanitize_address``): an account's or a
        # setting's malformed address. Never sendable: failed, and the queue goes on.
        _release(email.to, day, count)
        return _finish(email, EmailStatus.FAILED, f"not a valid email address: {email.to}",
                       error=repr(exc))
    except (smtplib.SMTPException, OSError) as exc:
        smtp.reset()
        if _permanent(exc):
            _release(email.to, day, count)
            return _finish(email, EmailStatus.FAILED, f"refused by the mail server: {exc}",
                           error=repr(exc))
        return _retry(email, now, count, day, repr(exc))
    AlertEmail.objects.filter(pk=email.pk).update(
        status=EmailStatus.SENT, sent_at=timezone.now(), attempts=F("attempts") + 1,
        subject=message.subject[:300], message_id=message.extra_headers["Message-ID"][:300],
        last_error="")
    return SENT


def _superseded(email: AlertEmail) -> bool:
    if not email.finding_id or not email.severity:
        return False
    higher = [s.value for s in Severity if s.rank > rank(email.severity)]
    return AlertEmail.objects.filter(finding=email.finding_id, to=email.to, severity__in=higher,
                                     status=EmailStatus.PENDING).exists()


def _finish(email: AlertEmail, status: str, detail: str, *, error: str = "") -> str:
    AlertEmail.objects.filter(pk=email.pk).update(
        status=status, status_detail=detail[:300], last_error=error,
        attempts=F("attempts") + int(status == EmailStatus.FAILED))
    return {EmailStatus.SKIPPED: SKIPPED, EmailStatus.FAILED: FAILED}[status]


def _retry(email: AlertEmail, now: dt.datetime, count, day, error: str) -> str:
    _release(email.to, day, count)
    attempts = email.attempts + 1
    AlertEmail.objects.filter(pk=email.pk).update(
        attempts=attempts, last_error=error[:2000],
        next_attempt_at=now + dt.timedelta(seconds=backoff_s(attempts)))
    log.warning("alert email %s to %s not sent (attempt %d), retrying later: %s",
                email.pk, email.to, attempts, error)
    return RETRY


# Replies to DATA that refuse this message for good: mailbox unavailable or policy (550),
# too big (552), mailbox name not allowed (553), rejected (554). Other 5xx there (500-504:
# the server or the protocol went wrong) are retried like a 4xx.
_MESSAGE_REFUSED = {550, 552, 553, 554}


def _permanent(exc: Exception) -> bool:
    """A refusal about this message's recipient or content. Connection failures, 4xx, server
    errors, and refusals of our sender or credentials (a configuration problem) are retried."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return bool(exc.recipients) and all(code >= 500 for code, _ in exc.recipients.values())
    return isinstance(exc, smtplib.SMTPDataError) and exc.smtp_code in _MESSAGE_REFUSED


def _reserve(address: str, day: dt.date) -> int | None:
    """Take one of today's slots for ``address``: its new count, or None at the limit. One
    conditional UPDATE, so concurrent workers can never exceed the limit between them."""
    DailyCount.objects.bulk_create([DailyCount(address=address, day=day)], ignore_conflicts=True)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {DailyCount._meta.db_table} SET sent = sent + 1 "
            "WHERE address = %s AND day = %s AND sent < %s RETURNING sent",
            [address, day, settings.ALERT_DAILY_LIMIT])
        row = cur.fetchone()
    return row[0] if row else None


def _release(address: str, day: dt.date, count) -> None:
    if count is not None:
        DailyCount.objects.filter(address=address, day=day).update(sent=F("sent") - 1)


class _Smtp:
    """One SMTP connection for a delivery run, opened on the first message."""

    def __init__(self):
        self.connection = None

    def send(self, message) -> None:
        if self.connection is None:
            self.connection = get_connection(fail_silently=False)
            self.connection.open()
        if self.connection.send_messages([message]) != 1:
            raise smtplib.SMTPException("the mail backend did not send the message")

    def reset(self) -> None:
        self.close()

    def close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.close()
            except (smtplib.SMTPException, OSError):
                pass
            self.connection = None
