"""The GPU page: one GPU's telemetry over time, the jobs that held it, its events and its
inventory (node page → GPU)."""

import datetime as dt

from django.conf import settings
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from clusterui.inventory import counting
from clusterui.inventory.models import Gpu
from clusterui.telemetry.models import GpuEvent
from clusterui.web import gpupage, timerange
from clusterui.web.views.support import REFRESH_S, charts, range_context

EVENTS_SHOWN = 50


def gpu_detail(request, pk):
    gpu = get_object_or_404(Gpu.objects.select_related("node__cluster", "latest"), pk=pk)
    node = gpu.node
    now = timezone.now()
    tr, range_error = timerange.parse_or_default(request.GET, default="1h", now=now)
    allocs = gpupage.allocations(gpu, request.user, tr.start, tr.end)
    figures, step = gpupage.figures(gpu, allocs, tr.start, tr.end)
    events = GpuEvent.objects.filter(gpu=gpu, ts__gte=tr.start, ts__lt=tr.end)
    silent = now - node.heard_at > dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    gone = counting.is_gone(gpu, node)  # the node reports, but not this GPU any more
    try:
        latest = None if silent or gone else gpu.latest
    except Gpu.latest.RelatedObjectDoesNotExist:
        latest = None
    context = {
        "gpu": gpu,
        "node": node,
        "latest": latest,
        "silent": silent,
        "gone": gone,
        "jobs": sorted(allocs, key=lambda a: a["start"], reverse=True),
        "events": list(events[:EVENTS_SHOWN]),
        "events_total": events.count(),
        "charts": charts(**figures),
        "step": step,
        "refresh_s": REFRESH_S if tr.live else None,
        "now": now,
        **range_context(request, tr, range_error),
    }
    return render(request, "web/gpu_detail.html", context, status=400 if range_error else 200)
