"""GPU-hours and waste per user or per account over a period."""

from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils import timezone

from clusterui.jobs.models import Job
from clusterui.jobs.usage import usage_summary
from clusterui.web import timerange
from clusterui.web.figures.usage import usage_bars
from clusterui.web.views.support import charts, range_context

PAGE_SIZE = 50
GROUPS = {"user": "By user", "account": "By account"}


def usage(request):
    """Figures over the jobs the viewer may see: a researcher sees their own usage."""
    now = timezone.now()
    tr, range_error = timerange.parse_or_default(request.GET, default="7d", now=now)
    group = request.GET.get("by", "user")
    if group not in GROUPS:
        group, range_error = "user", f"by must be one of {', '.join(GROUPS)}"
    rows = usage_summary(Job.objects.visible_to(request.user), group, tr.start, tr.end)
    totals = {k: sum(r[k] for r in rows) for k in ("jobs", "gpu_hours", "used_gpu_hours",
                                                    "wasted_gpu_hours")}
    totals["efficiency_pct"] = (100.0 * totals["used_gpu_hours"] / totals["gpu_hours"]
                                if totals["gpu_hours"] else None)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "group": group,
        "groups": GROUPS,
        "page": page,
        "rows": page.object_list,
        "totals": totals,
        "max_hours": max((r["gpu_hours"] for r in rows), default=0),
        "charts": charts(usage=usage_bars(rows)),
        **range_context(request, tr, range_error),
    }
    return render(request, "web/users.html", context, status=400 if range_error else 200)
