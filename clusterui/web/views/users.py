"""GPU-hours and waste per user, per account or per Kubernetes namespace over a period."""

from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from clusterui.findings.models import MEASURED_ENOUGH_PCT
from clusterui.jobs.models import Job
from clusterui.jobs.usage import usage_summary
from clusterui.web import cluster_choice, csvexport, timerange
from clusterui.web.figures.usage import usage_bars
from clusterui.web.views.support import charts, range_context

PAGE_SIZE = 50
GROUPS = {"user": "By user", "account": "By account", "namespace": "By namespace"}


def api_url(group: str, tr: timerange.TimeRange, cluster: str = "") -> str:
    """The JSON API's address for the page's rows: the same grouping, cluster and period,
    fixed as the page computed it (a preset such as "7d" ends at the page's now)."""
    query = {"group": group, "from": csvexport.cell(tr.start), "to": csvexport.cell(tr.end),
             "limit": 1000}
    if cluster:
        query["cluster"] = cluster
    return reverse("api:usage") + "?" + urlencode(query)


def namespaces(request):
    """Kubernetes namespaces, which play the part of accounts: the usage page by namespace
    (each row opens the namespace's jobs)."""
    return usage(request, default="namespace")


def usage(request, default="user"):
    """Figures over the jobs the viewer may see: a researcher sees their own usage;
    ``?format=csv``: every row (all pages) as CSV."""
    now = timezone.now()
    tr, range_error = timerange.parse_or_default(request.GET, default="7d", now=now)
    group = request.GET.get("by", default)
    if group not in GROUPS:
        group, range_error = "user", f"by must be one of {', '.join(GROUPS)}"
    jobs = Job.objects.visible_to(request.user)
    cluster = cluster_choice.known(request)
    if cluster:
        jobs = jobs.filter(cluster__name=cluster)
    rows = usage_summary(jobs, group, tr.start, tr.end)
    if request.GET.get("format") == "csv":
        if range_error:
            return HttpResponse(f"Fix the filters first ({range_error}).\n", status=400,
                                content_type="text/plain")
        return csvexport.response(
            f"{group}s", [group, *csvexport.USAGE_COLUMNS],
            csvexport.usage_rows(rows, tr.start, tr.end))
    totals = {k: sum(r[k] for r in rows) for k in ("jobs", "gpu_hours", "used_gpu_hours",
                                                    "wasted_gpu_hours")}
    totals["efficiency_pct"] = (100.0 * totals["used_gpu_hours"] / totals["gpu_hours"]
                                if totals["gpu_hours"] else None)
    measured = sum(r["gpu_hours"] * r["measured_pct"] / 100.0 for r in rows
                   if r["measured_pct"] is not None)
    totals["measured_pct"] = 100.0 * measured / totals["gpu_hours"] if totals["gpu_hours"] else None
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "group": group,
        "groups": GROUPS,
        "page": page,
        "rows": page.object_list,
        "totals": totals,
        "measured_enough_pct": MEASURED_ENOUGH_PCT,
        "max_hours": max((r["gpu_hours"] for r in rows), default=0),
        "charts": charts(usage=usage_bars(rows)),
        "api_url": api_url(group, tr, cluster),
        **range_context(request, tr, range_error),
    }
    return render(request, "web/users.html", context, status=400 if range_error else 200)
