"""Beat tasks: queue and deliver alert emails, and the admins' daily digest. Thin: the work
is in ``outbox.py`` (claims) and ``delivery.py`` (SMTP, limits, retries)."""

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from clusterui.alerts import delivery, jobend, outbox, retention


@shared_task(name="clusterui.alerts.send_alerts", ignore_result=True)
def send_alerts() -> dict:
    """Claim new and escalated findings and newly finalized jobs, queue one email per
    recipient, send what is due."""
    if not settings.ALERT_EMAILS_ENABLED:
        return {"queued": 0}
    now = timezone.now()
    queued = outbox.queue_findings(now) + jobend.queue_job_ends(now)
    return {"queued": queued, **delivery.deliver_due(now)}


@shared_task(name="clusterui.alerts.send_digest", ignore_result=True)
def send_digest() -> dict:
    """Queue today's digest once its hour has come, send it, and prune the old email log."""
    if not settings.ALERT_EMAILS_ENABLED:
        return {"queued": 0}
    now = timezone.now()
    queued = outbox.queue_digest(now)
    result = {"queued": queued, **delivery.deliver_due(now)}
    result["pruned"] = retention.prune(now)
    return result
