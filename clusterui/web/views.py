import datetime as dt

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.db.models import Prefetch
from django.http import JsonResponse
from django.shortcuts import render
from django.utils import timezone

from clusterui.inventory.models import Gpu, Node
from clusterui.web.colors import text_on, viridis


def home(request):
    """Every node and its GPUs with their current utilization: the cluster at a glance."""
    gpus = Gpu.objects.select_related("latest").order_by("index")
    nodes = list(
        Node.objects.select_related("cluster").prefetch_related(Prefetch("gpus", queryset=gpus))
    )
    now = timezone.now()
    silent_after = dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    total = busy = allocated = 0
    util_sum = util_n = 0.0
    for node in nodes:
        node.silent = now - node.last_seen > silent_after
        for gpu in node.gpus.all():
            total += 1
            latest = getattr(gpu, "latest", None)
            gpu.util = None if latest is None or node.silent else latest.util_pct
            if gpu.util is not None:
                util_sum += gpu.util
                util_n += 1
                busy += gpu.util >= 10
                gpu.color, gpu.text_color = viridis(gpu.util / 100), text_on(gpu.util / 100)
            if latest is not None and latest.job_id and not node.silent:
                allocated += 1
    context = {
        "nodes": nodes,
        "kpi": {
            "nodes": len(nodes),
            "gpus": total,
            "allocated": allocated,
            "busy": busy,
            "mean_util": util_sum / util_n if util_n else None,
        },
        "any_simulated": any(n.simulated for n in nodes),
        "refresh_s": 15,
        "silent_after_s": settings.NODE_SILENT_AFTER_S,
    }
    return render(request, "web/home.html", context)


@login_not_required
def healthz(request):
    """Liveness for load balancers: the database answers. No login, no data."""
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return JsonResponse({"status": "ok"})
    except Exception as exc:  # any failure means "not healthy"; say which part
        return JsonResponse({"status": "error", "database": type(exc).__name__}, status=503)
