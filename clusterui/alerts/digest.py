"""The admins' daily digest: the most wasteful jobs of the last day and the open findings."""

import datetime as dt

from django.conf import settings
from django.db.models import Count, FloatField, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from clusterui.findings.choices import FindingKind, FindingState, Severity
from clusterui.findings.measured import measured_share_sql
from clusterui.findings.models import MEASURED_ENOUGH_PCT, Finding, JobEfficiency

MAX_FINDINGS_LISTED = 25


def context(now: dt.datetime | None = None) -> dict:
    now = now or timezone.now()
    since = now - dt.timedelta(hours=24)
    recent = JobEfficiency.objects.filter(window_end__gte=since)
    measured = RawSQL("gpu_hours_allocated * "
                      + measured_share_sql(JobEfficiency._meta.db_table), [],
                      output_field=FloatField())
    totals = recent.aggregate(allocated=Sum("gpu_hours_allocated"),
                              wasted=Sum("gpu_hours_wasted"), jobs=Count("job"),
                              measured=Sum(measured))
    top = list(recent.filter(gpu_hours_wasted__gt=0).select_related("job__cluster")
               .only("gpus", "gpu_hours_allocated", "gpu_hours_used", "gpu_hours_wasted",
                     "window_start", "window_end", "measured_from",  # + partly_measured
                     "job__external_id", "job__name", "job__user", "job__account",
                     "job__cluster__name")
               .order_by("-gpu_hours_wasted")[: settings.ALERT_DIGEST_TOP])
    open_findings = Finding.objects.filter(state=FindingState.OPEN)
    by_kind = {(row["kind"], row["severity"]): row["n"] for row in
               open_findings.values("kind", "severity").annotate(n=Count("pk"))}
    kinds = [
        {"label": kind.label,
         "counts": [(Severity(s), by_kind.get((kind.value, s.value), 0)) for s in _severities()],
         "total": sum(by_kind.get((kind.value, s.value), 0) for s in Severity)}
        for kind in FindingKind if any(k == kind.value for k, _ in by_kind)
    ]
    listed = list(open_findings.select_related("job", "node")
                  .order_by("-wasted_gpu_hours", "-last_seen")[:MAX_FINDINGS_LISTED])
    measured_pct = (min(100.0, 100.0 * totals["measured"] / totals["allocated"])
                    if totals["allocated"] else None)
    return {
        "day": timezone.localdate(now),
        "since": since,
        "totals": totals,
        "wasted_pct": (100.0 * totals["wasted"] / totals["allocated"]
                       if totals["allocated"] else None),
        # Of the allocated GPU-hours, those the jobs' samples cover: said when under
        # MEASURED_ENOUGH_PCT, as the overview and the users page do.
        "measured_pct": measured_pct,
        "partly_measured": measured_pct is not None and measured_pct < MEASURED_ENOUGH_PCT,
        "top": top,
        "kinds": kinds,
        "severities": _severities(),
        "open_count": sum(by_kind.values()),
        "open_listed": listed,
        "opened_today": open_findings.filter(first_seen__gte=since).count(),
        "closed_today": Finding.objects.filter(state=FindingState.CLOSED,
                                               closed_at__gte=since).count(),
    }


def _severities() -> list[Severity]:
    return sorted(Severity, key=lambda s: -s.rank)
