"""Wasted GPU time for the overview, from the jobs' efficiency rows (``JobEfficiency``,
computed by the detector pass); never from raw samples, which would cost seconds."""

import datetime as dt
from typing import NamedTuple

from django.db.models import FloatField, Q, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from clusterui.findings.models import JobEfficiency
from clusterui.jobs.filtersets import with_efficiency


def start_of_today(now: dt.datetime | None = None) -> dt.datetime:
    local = timezone.localtime(now or timezone.now())
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


class Waste(NamedTuple):
    hours: float  # GPU-hours wasted in the period
    measured_hours: float  # of which in time the jobs' samples cover (after measured_from)

    @property
    def measured_pct(self) -> float | None:
        return 100.0 * self.measured_hours / self.hours if self.hours else None


def wasted_gpu_hours_since(jobs, since: dt.datetime, now: dt.datetime | None = None) -> Waste:
    """GPU-hours wasted since ``since`` by ``jobs`` (a ``visible_to``-scoped queryset).

    Each job's waste covers its efficiency window; the share of that window after
    ``since`` is counted (waste is taken as spread evenly over the window). Of that, the
    part after the job's ``measured_from`` is measured; before it, the job's figures take
    the time to be like the time measured (an efficiency without ``measured_from``, from
    before ClusterUI recorded it, counts as measured).
    """
    now = now or timezone.now()
    # A window wholly inside [since, now] counts whole (the share is 1): only the few that
    # straddle ``since`` or ``now`` pay for the arithmetic, which is in numeric (EXTRACT),
    # three times the cost of reading the rows.
    share = RawSQL(
        "CASE WHEN window_start >= %s AND window_end <= %s THEN gpu_hours_wasted"
        " ELSE (gpu_hours_wasted * GREATEST(0, LEAST(1,"
        " EXTRACT(EPOCH FROM LEAST(window_end, %s) - GREATEST(window_start, %s))"
        " / NULLIF(EXTRACT(EPOCH FROM window_end - window_start), 0))))::float8 END",
        [since, now, now, since], output_field=FloatField())
    measured = RawSQL(
        "CASE WHEN measured_from IS NULL OR measured_from <= GREATEST(window_start, %s) THEN"
        f" ({share.sql}) ELSE (gpu_hours_wasted * GREATEST(0, LEAST(1,"
        " EXTRACT(EPOCH FROM LEAST(window_end, %s) - measured_from)"
        " / NULLIF(EXTRACT(EPOCH FROM window_end - window_start), 0))))::float8 END",
        [since, *share.params, now], output_field=FloatField())
    rows = JobEfficiency.objects.filter(window_end__gt=since, gpu_hours_wasted__gt=0)
    if jobs.query.where:
        # A scoped queryset (a researcher's jobs). Unscoped (staff), every row counts: the
        # semi-join with every job would cost more than the index-only sum itself.
        rows = rows.filter(job__in=jobs)
    sums = rows.aggregate(total=Sum(share), measured=Sum(measured))
    return Waste(float(sums["total"] or 0.0), float(sums["measured"] or 0.0))


def active_in(jobs, start: dt.datetime, end: dt.datetime):
    """The jobs that ran at some point in [start, end)."""
    return jobs.filter(Q(started_at__lt=end) | Q(started_at__isnull=True)).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=start))


def most_wasteful_jobs(jobs, start: dt.datetime, end: dt.datetime, limit: int = 8):
    """The jobs active in the range that wasted the most GPU-hours (one query; without the
    efficiency rows' per-GPU figures and accumulators, tens of kB each, not shown)."""
    return list(
        with_efficiency(active_in(jobs, start, end))
        .defer("efficiency__per_gpu", "efficiency__accum")
        .filter(efficiency__gpu_hours_wasted__gt=0)
        .order_by("-efficiency__gpu_hours_wasted", "-id")[:limit]
    )
