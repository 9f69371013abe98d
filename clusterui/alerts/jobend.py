"""The job-end summary: when ClusterUI finalizes a job (``JobEfficiency.finalized_at``, set by
the detector pass once all of the ended job's data is in), its owner may get the job's
report, the one ``clusterui jobstats`` prints, by email.

Who: owners who asked for it for every job (``OptIn``), and by default jobs that wasted
more than ``JOBEND_EMAIL_WASTE_SHARE`` of their allocated GPU-hours; never jobs that ran
less than ``JOBEND_EMAIL_MIN_RUNTIME_S``; never an owner who turned ``job_end`` (or every
alert email) off. Once: the ``JobEndRun`` insert is the claim (as ``DigestRun`` is for the
digest), made in the transaction that queues the email, so two workers never both queue
it, and a job finalized again because late data came (``findings/late.py``) is not
considered again. The email is rendered at send time: it carries the latest figures.
"""

import datetime as dt

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from clusterui.alerts import preferences, recipients
from clusterui.alerts.choices import JOB_END, EmailStatus, RecipientRole
from clusterui.alerts.models import AlertEmail, JobEndRun
from clusterui.alerts.outbox import OPTED_OUT
from clusterui.jobs.models import Job

# Jobs finalized longer ago than this are not emailed: turning the feature on (or a beat
# that was down for days) must not send summaries of old jobs.
LOOKBACK = dt.timedelta(days=1)


def due_jobs(now: dt.datetime):
    """Jobs finalized within ``LOOKBACK`` that were never considered, oldest first."""
    return (Job.objects.filter(efficiency__finalized_at__gte=now - LOOKBACK)
            .filter(~Exists(JobEndRun.objects.filter(job=OuterRef("pk"))))
            .select_related("efficiency").order_by("efficiency__finalized_at", "pk"))


def queue_job_ends(now: dt.datetime | None = None, *, limit: int | None = None) -> int:
    """Claim each due job and queue its summary where it is wanted; returns emails queued."""
    now = now or timezone.now()
    queued = 0
    for job in due_jobs(now)[: limit or settings.ALERT_BATCH]:
        with transaction.atomic():
            run, created = JobEndRun.objects.get_or_create(job=job, defaults={"created_at": now})
            if not created:
                continue  # another worker took it
            run.outcome, sent = _queue_for(job, now)
            run.save(update_fields=["outcome"])
            queued += sent
    return queued


def _queue_for(job: Job, now: dt.datetime) -> tuple[str, int]:
    recipient = recipients.owner(job)
    if recipient is None:
        return "no address for the job's owner", 0
    address = recipient.address
    wanted, why = decide(job, address)
    if not wanted:
        return why, 0
    skipped = preferences.is_opted_out(address, JOB_END)
    AlertEmail.objects.create(
        category=JOB_END, job=job, to=address, username=recipient.username,
        role=RecipientRole.OWNER,
        status=EmailStatus.SKIPPED if skipped else EmailStatus.PENDING,
        status_detail=OPTED_OUT if skipped else "", next_attempt_at=now, created_at=now)
    return (OPTED_OUT if skipped else f"queued: {why}"), int(not skipped)


def runtime_s(job: Job) -> float:
    eff = job.efficiency
    start = job.started_at or eff.window_start
    end = job.ended_at or eff.window_end
    return max(0.0, (end - start).total_seconds())


def wasted_share(eff) -> float | None:
    return eff.gpu_hours_wasted / eff.gpu_hours_allocated if eff.gpu_hours_allocated else None


def decide(job: Job, address: str) -> tuple[bool, str]:
    """(whether the owner gets the summary, why, in words that finish "because ...")."""
    minimum = settings.JOBEND_EMAIL_MIN_RUNTIME_S
    ran = runtime_s(job)
    if ran < minimum:
        return False, f"it ran {ran / 60:.0f} min, less than the {minimum / 60:.0f} min minimum"
    if preferences.wants_every(address, JOB_END):
        return True, "you asked for a summary of every job of yours"
    share = wasted_share(job.efficiency)
    threshold = settings.JOBEND_EMAIL_WASTE_SHARE
    if share is not None and share > threshold:
        return True, (f"the job wasted {share:.0%} of its allocated GPU-hours (a summary goes "
                      f"out when more than {threshold:.0%} is wasted)")
    return False, "it did not waste enough of its GPU-hours"
