"""The cluster history heatmap (/nodes/history/): every node's GPU utilization, SM
activity, power or network traffic over a range (``clusterui.web.history``)."""

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse

from clusterui.inventory.models import Cluster
from clusterui.web import history as data
from clusterui.web import timerange
from clusterui.web.figures.history import history_heatmap
from clusterui.web.views.support import charts, range_context

PRESETS = ("6h", "24h", "7d")


def step_label(seconds: int) -> str:
    """A column's width in words: "hour", "10 min", "30 s"."""
    if seconds % 3600 == 0:
        return "hour" if seconds == 3600 else f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return "minute" if seconds == 60 else f"{seconds // 60} min"
    return f"{seconds} s"


def node_history(request):
    tr, range_error = timerange.parse_or_default(request.GET, default="24h")
    errors = [range_error] if range_error else []
    metric = request.GET.get("metric", "util")
    if metric not in data.METRICS:
        errors.append(f"metric must be one of {', '.join(data.METRICS)} (got {metric!r})")
        metric = "util"
    clusters = list(Cluster.objects.order_by("name").values_list("name", flat=True))
    cluster = request.GET.get("cluster", "")
    if cluster and cluster not in clusters:
        errors.append(f"no cluster named {cluster!r}")
        cluster = ""
    result = data.history(metric, tr.start, tr.end, cluster=cluster)
    context = {
        "metric": metric,
        "metrics": {k: m.label for k, m in data.METRICS.items()},
        "info": result.info,
        "clusters": clusters,
        "cluster": cluster,
        "nodes": len(result.nodes),
        "step": step_label(result.step),
        "rolled_up_to": result.rolled_up_to,
        "hot_minutes": settings.RAW_HOT_MINUTES,
        "errors": [e for e in errors if e != range_error],
        "node_url": reverse("node-detail", args=[0]),
        "charts": charts(history=history_heatmap(result)),
        # An hour is not rolled up before it ends: "1 h" would show nothing.
        **range_context(request, tr, range_error, presets=PRESETS),
    }
    return render(request, "web/node_history.html", context, status=400 if errors else 200)
