"""The fabric page: InfiniBand / RoCE ports across the cluster, worst first (down, then
degraded by the share of rate lost, then by errors over the detector window)."""

import datetime as dt

from django.conf import settings
from django.shortcuts import render
from django.utils import timezone

from clusterui.fabric import health
from clusterui.inventory.models import Node
from clusterui.web import cluster_choice

SORTS = ("degradation", "errors")
SHOWN = 200


def window(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    return now - dt.timedelta(seconds=settings.DETECTOR_WINDOW_S), now


def fabric(request):
    """Hardware state, like the node page: for every signed-in user."""
    now = timezone.now()
    start, end = window(now)
    sort = request.GET.get("sort", "degradation")
    if sort not in SORTS:
        sort = "degradation"
    # The navigation's cluster (clusterui/web/cluster_choice.py), or every cluster.
    cluster = cluster_choice.known(request)
    ports = health.ports(start, end, cluster=cluster)
    if sort == "errors":
        ports.sort(key=lambda p: (p.error_total, p.badness()), reverse=True)
    else:
        ports = health.worst_first(ports)
    threshold = health.error_threshold()
    context = {
        "ports": ports[:SHOWN],
        "total": len(ports),
        "unhealthy": sum(1 for p in ports if p.down or p.degraded or p.erroring(threshold)),
        "threshold": threshold,
        "sort": sort,
        "cluster": cluster,
        "window_h": settings.DETECTOR_WINDOW_S / 3600,
        "show_node": True,
        # As the other pages: generated data says so (the demo's ports are simulated).
        "simulated": Node.objects.filter(id__in={p.node_id for p in ports},
                                         simulated=True).exists(),
    }
    return render(request, "web/fabric.html", context)
