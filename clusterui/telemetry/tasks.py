import datetime as dt

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from clusterui.telemetry import partitions


@shared_task(name="clusterui.telemetry.maintain_partitions", ignore_result=True)
def maintain_partitions():
    """Create the coming days' partitions and drop raw ones past retention."""
    today = timezone.now().date()
    partitions.create_ahead(today, settings.PARTITION_DAYS_AHEAD)
    partitions.drop_older_than(today - dt.timedelta(days=settings.RAW_RETENTION_DAYS))
