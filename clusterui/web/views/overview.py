"""The cluster overview: what is happening now, and where GPU time is being wasted."""

from django.db.models import Count, Q
from django.shortcuts import render
from django.utils import timezone

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.models import MEASURED_ENOUGH_PCT, SEVERITY_RANK, Finding
from clusterui.gpuhealth.classify import STATE_LABELS, node_health
from clusterui.jobs.models import Job
from clusterui.jobs.usage import usage_summary
from clusterui.web import cluster_choice, timerange
from clusterui.web.figures.heatmap import METRICS as HEATMAP_METRICS
from clusterui.web.figures.heatmap import utilization_heatmap
from clusterui.web.snapshot import BUSY_UTIL_PCT, cluster_snapshot
from clusterui.web.views.support import REFRESH_S, charts, range_context
from clusterui.web.waste import most_wasteful_jobs, start_of_today, wasted_gpu_hours_since

__all__ = ["SEVERITY_RANK", "home"]  # the other pages sort findings by it too


def home(request):
    """Every node's GPUs now (a heatmap), the cluster's KPIs, open findings, and the jobs
    and users that wasted the most GPU time in the chosen range (default 24 h)."""
    now = timezone.now()
    tr, range_error = timerange.parse_or_default(request.GET, default="24h", now=now)
    # What the heatmap is coloured by: GPU utilization (NVML) or SM activity (GPM).
    metric = request.GET.get("metric", "util")
    metric_error = None
    if metric not in HEATMAP_METRICS:
        metric_error = f"metric must be one of {', '.join(HEATMAP_METRICS)} (got {metric!r})"
        metric = "util"
    cluster = cluster_choice.known(request)
    snap = cluster_snapshot(request.user, now, cluster=cluster)
    jobs = Job.objects.visible_to(request.user)
    findings = Finding.objects.visible_to(request.user).open()
    if cluster:
        jobs = jobs.filter(cluster__name=cluster)
        findings = findings.filter(Q(job__cluster__name=cluster)
                                   | Q(job__isnull=True, node__cluster__name=cluster))
    health = node_health({c.node_id for c in snap.cells} if cluster else None)
    by_state = {s: sum(1 for h in health.values() if h.state == s) for s in STATE_LABELS}
    # Open findings by severity, and the fabric-link findings among them (a node finding,
    # staff only: critical when a port is down, else warning), in one query.
    by_severity: dict[str, int] = {}
    fabric = {"nodes": 0, "down": 0}
    for severity, kind, n in findings.values_list("severity", "kind").annotate(n=Count("id")):
        by_severity[severity] = by_severity.get(severity, 0) + n
        if kind == FindingKind.FABRIC_LINK:
            fabric["nodes"] += n
            fabric["down"] += n if severity == Severity.CRITICAL else 0
    context = {
        "snap": snap,
        "busy_util_pct": BUSY_UTIL_PCT,
        "wasted_today": wasted_gpu_hours_since(jobs, start_of_today(now), now),
        "measured_enough_pct": MEASURED_ENOUGH_PCT,
        "severities": [(s, by_severity.get(s.value, 0)) for s in reversed(Severity)],
        "open_findings": sum(by_severity.values()),
        "top_findings": list(
            findings.select_related("job", "node")
            .annotate(rank=SEVERITY_RANK).order_by("-rank", "-wasted_gpu_hours", "-last_seen")[:6]
        ),
        "wasteful_jobs": most_wasteful_jobs(jobs, tr.start, tr.end),
        "wasteful_users": [r for r in usage_summary(jobs, "user", tr.start, tr.end, limit=8,
                                                 viewer=request.user, now=now,
                                                 whole=not cluster)
                           if r["wasted_gpu_hours"] > 0],
        "charts": charts(heatmap=utilization_heatmap(snap.cells, metric=metric)),
        "metric": metric,
        "metric_error": metric_error,
        "node_health": [(state, label, by_state[state]) for state, label in STATE_LABELS.items()],
        "fabric": fabric,
        "refresh_s": REFRESH_S,
        "now": now,
        "cluster": cluster,
        **range_context(request, tr, range_error),
    }
    return render(request, "web/home.html", context,
                  status=400 if range_error or metric_error else 200)
