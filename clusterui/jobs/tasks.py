import datetime as dt

from celery import shared_task
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from clusterui.jobs.choices import JobState
from clusterui.jobs.models import Job


@shared_task(name="clusterui.jobs.close_stale_jobs", ignore_result=True)
def close_stale_jobs() -> int:
    """End the jobs no collector has reported for a while: their end is their last sample."""
    cutoff = timezone.now() - dt.timedelta(seconds=settings.JOB_STALE_AFTER_S)
    return Job.objects.filter(state=JobState.RUNNING, last_seen__lt=cutoff).update(
        state=JobState.ENDED, ended_at=F("last_seen")
    )
