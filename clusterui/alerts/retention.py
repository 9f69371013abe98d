"""Old alert-log rows go in bounded batches, oldest first (never one giant DELETE)."""

import datetime as dt

from django.conf import settings

from clusterui.alerts.choices import EmailStatus
from clusterui.alerts.models import AlertEmail, DailyCount, DigestRun

BATCH = 5000


def prune(now: dt.datetime, *, max_batches: int = 20) -> int:
    cutoff = now - dt.timedelta(days=settings.ALERT_LOG_RETENTION_DAYS)
    deleted = 0
    for _ in range(max_batches):
        ids = list(AlertEmail.objects.filter(created_at__lt=cutoff)
                   .exclude(status=EmailStatus.PENDING)
                   .order_by("created_at").values_list("pk", flat=True)[:BATCH])
        if not ids:
            break
        deleted += AlertEmail.objects.filter(pk__in=ids).delete()[0]
    # Daily counts only matter for today; digest runs for as long as their emails are kept.
    DailyCount.objects.filter(day__lt=(now - dt.timedelta(days=7)).date()).delete()
    DigestRun.objects.filter(day__lt=cutoff.date()).delete()
    return deleted
