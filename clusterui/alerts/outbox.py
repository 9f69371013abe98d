"""Queue alert emails: claim a finding (or the day's digest), then write one pending email
per recipient in the same transaction. Delivery (``delivery.py``) reads them from there, so
a crash or an SMTP outage between the two loses nothing."""

import datetime as dt

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusterui.alerts import preferences, recipients
from clusterui.alerts.choices import DIGEST, EmailStatus, RecipientRole
from clusterui.alerts.models import AlertEmail, DigestRun
from clusterui.findings.choices import FindingState, Severity
from clusterui.findings.models import Finding

OPTED_OUT = "turned off by the recipient"


def rank(severity: str) -> int:
    return Severity(severity).rank if severity else -1


def emailed_severities() -> list[str]:
    """Severities that are emailed (ALERT_MIN_SEVERITY and above)."""
    minimum = rank(settings.ALERT_MIN_SEVERITY)
    return [s.value for s in Severity if s.rank >= minimum]


def due_findings():
    """Open findings to email: never emailed, or escalated above the severity last emailed."""
    needs = Q(emailed_at__isnull=True)
    for severity in emailed_severities():
        below = ["", *(s.value for s in Severity if s.rank < rank(severity))]
        needs |= Q(severity=severity, emailed_severity__in=below)
    return (Finding.objects.filter(state=FindingState.OPEN, severity__in=emailed_severities())
            .filter(needs).order_by("last_seen", "pk"))


def queue_findings(now: dt.datetime | None = None, *, limit: int | None = None) -> int:
    """Claim due findings and queue their emails; returns the emails queued."""
    now = now or timezone.now()
    queued = 0
    for finding in due_findings().select_related("job", "node")[: limit or settings.ALERT_BATCH]:
        with transaction.atomic():
            if not _claim(finding, now):
                continue  # another worker took it, or the detector changed it meanwhile
            queued += _queue_for(finding, now)
    return queued


def _claim(finding: Finding, now: dt.datetime) -> bool:
    """Compare-and-set on what we read: exactly one worker wins a finding at a severity."""
    return Finding.objects.filter(
        pk=finding.pk, state=FindingState.OPEN, severity=finding.severity,
        emailed_at=finding.emailed_at, emailed_severity=finding.emailed_severity,
    ).update(emailed_at=now, emailed_severity=finding.severity) == 1


def _queue_for(finding: Finding, now: dt.datetime) -> int:
    queued = 0
    for recipient in recipients.for_finding(finding):
        already = _severity_already_sent(finding, recipient.address)
        if already and rank(already) >= rank(finding.severity):
            continue  # one email per job and kind; again only when it escalates
        skipped = preferences.is_opted_out(recipient.address, finding.kind)
        AlertEmail.objects.create(
            category=finding.kind, finding=finding, job=finding.job, severity=finding.severity,
            previous_severity=already or "", to=recipient.address, username=recipient.username,
            role=recipient.role, status=EmailStatus.SKIPPED if skipped else EmailStatus.PENDING,
            status_detail=OPTED_OUT if skipped else "", next_attempt_at=now, created_at=now,
        )
        queued += not skipped
    return queued


def _severity_already_sent(finding: Finding, address: str) -> str | None:
    """The highest severity this address was sent (or has pending) for this job and kind."""
    scope = {"job": finding.job} if finding.job_id else {"finding": finding}
    severities = AlertEmail.objects.filter(
        **scope, category=finding.kind, to=address,
        status__in=[EmailStatus.PENDING, EmailStatus.SENT],
    ).values_list("severity", flat=True)
    return max(severities, key=rank, default=None)


def queue_digest(now: dt.datetime | None = None) -> int:
    """Queue today's digest to ADMIN_EMAILS once the local hour reaches ALERT_DIGEST_HOUR.
    The DigestRun insert is the claim: whichever worker inserts it queues the emails."""
    now = now or timezone.now()
    local = timezone.localtime(now)
    admins = recipients.admin_addresses()
    if local.hour < settings.ALERT_DIGEST_HOUR or not admins:
        return 0
    with transaction.atomic():
        run, created = DigestRun.objects.get_or_create(
            day=local.date(),
            defaults={"created_at": now, "open_findings": Finding.objects.open().count()})
        if not created:
            return 0
        queued = 0
        for address in dict.fromkeys(admins):
            skipped = preferences.is_opted_out(address, DIGEST)
            AlertEmail.objects.create(
                category=DIGEST, digest_day=run.day, to=address, role=RecipientRole.ADMIN,
                status=EmailStatus.SKIPPED if skipped else EmailStatus.PENDING,
                status_detail=OPTED_OUT if skipped else "", next_attempt_at=now, created_at=now)
            queued += not skipped
    return queued
