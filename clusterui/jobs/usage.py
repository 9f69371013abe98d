"""GPU-hours and waste per user, per account and per Kubernetes namespace over a period.

A job counts toward a period when it was active in it; its figures are its whole-job
efficiency (``JobEfficiency``), as computed by the detector pass.
"""

import datetime as dt

from django.db.models import (
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Extract, Greatest, Least
from django.utils import timezone

from clusterui.findings import usage_rollup

GROUPS = ("user", "account", "namespace")
# The groups the hourly sums keep (usage_rollup); a namespace is summed from its jobs.
ROLLUP_GROUPS = ("user", "account")


def _measured_gpu_hours():
    """A job's allocated GPU-hours times the share of its window its samples cover
    (``JobEfficiency.measured_pct``): the GPU-hours its figures come from rather than take
    to be like them. A job whose efficiency predates ``measured_from`` (null: computed
    before ClusterUI recorded it) or whose window is empty counts as measured."""
    e = "efficiency__"
    span = ExpressionWrapper(F(f"{e}window_end") - F(f"{e}window_start"),
                             output_field=DurationField())
    covered = ExpressionWrapper(
        F(f"{e}window_end") - Greatest(F(f"{e}measured_from"), F(f"{e}window_start")),
        output_field=DurationField())
    share = Case(
        When(Q(**{f"{e}measured_from__isnull": True})
             | Q(**{f"{e}window_end__lte": F(f"{e}window_start")}), then=Value(1.0)),
        default=Least(Value(1.0), Greatest(Value(0.0), Extract(covered, "epoch")
                                           / Extract(span, "epoch"))),
        output_field=FloatField())
    return F(f"{e}gpu_hours_allocated") * share


def usage_summary(jobs, group: str, start: dt.datetime, end: dt.datetime, *,
                  limit: int | None = None, viewer=None, now: dt.datetime | None = None,
                  whole: bool = True) -> list[dict]:
    """Rows ``{"name", "jobs", "gpu_hours", "used_gpu_hours", "wasted_gpu_hours",
    "efficiency_pct", "measured_pct"}`` for the jobs (an already ``visible_to``-scoped
    queryset) active in [start, end), most wasted first.

    ``viewer``: the user ``jobs`` was scoped for. With it, when it is staff (every job) and
    ``jobs`` has no further filter (``whole``), a range that ends about ``now`` is summed
    from the hourly sums the detector pass keeps (``usage_rollup``): the same figures
    without reading every active job. The sums have no cluster, so anyone else's (their own
    jobs per cluster, their accounts': ``jobs/visibility.py``), and one cluster's, are
    summed from those jobs."""
    if group not in GROUPS:
        raise ValueError(f"group must be one of {', '.join(GROUPS)}")
    if (viewer is not None and whole and group in ROLLUP_GROUPS and viewer.is_authenticated
            and viewer.is_staff and usage_rollup.usable(start, end, now or timezone.now())):
        rows = usage_rollup.usage_rows(group, start, end, None)
        rows = sorted(({group: name, "jobs": n, "gpu_hours": float(a),
                        "used_gpu_hours": float(u), "wasted_gpu_hours": float(w),
                        "measured_gpu_hours": float(m)}
                       for name, n, a, u, w, m in rows),
                      key=lambda r: (-r["wasted_gpu_hours"], r[group]))
        return _rows(rows[:limit] if limit else rows, group)
    active = jobs.filter(Q(started_at__lt=end) | Q(started_at__isnull=True)).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=start))
    if group == "namespace":  # Kubernetes jobs only: a Slurm job has no namespace
        active = active.exclude(namespace="")
    zero = 0.0
    rows = (
        active.values(group)
        .annotate(
            jobs=Count("id"),
            gpu_hours=Coalesce(Sum("efficiency__gpu_hours_allocated"), zero,
                               output_field=FloatField()),
            used_gpu_hours=Coalesce(Sum("efficiency__gpu_hours_used"), zero,
                                    output_field=FloatField()),
            wasted_gpu_hours=Coalesce(Sum("efficiency__gpu_hours_wasted"), zero,
                                      output_field=FloatField()),
            measured_gpu_hours=Coalesce(Sum(_measured_gpu_hours()), zero,
                                        output_field=FloatField()),
        )
        .order_by("-wasted_gpu_hours", group)
    )
    if limit:
        rows = rows[:limit]
    return _rows(rows, group)


# The group of jobs whose user (account, namespace) was not reported: a Kubernetes pod has
# no user, a Slurm job scontrol could not be asked about has none yet. No job filter finds
# them by it, so the pages link it nowhere.
NOT_REPORTED = "(not reported)"


def _rows(rows, group: str) -> list[dict]:
    out = []
    for row in rows:
        hours = row["gpu_hours"]
        out.append({
            "name": row[group] or NOT_REPORTED,
            "reported": bool(row[group]),
            "jobs": row["jobs"],
            "gpu_hours": hours,
            "used_gpu_hours": row["used_gpu_hours"],
            "wasted_gpu_hours": row["wasted_gpu_hours"],
            "efficiency_pct": 100.0 * row["used_gpu_hours"] / hours if hours else None,
            "measured_pct": (min(100.0, 100.0 * row["measured_gpu_hours"] / hours)
                             if hours else None),
        })
    return out
