import datetime as dt

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.utils import timezone

from clusterui.ingest import health
from clusterui.ingest.models import RejectedBatch
from clusterui.ingest.silence import silent_nodes


def ingest_health(request):
    """Is the pipeline healthy? Throughput, backlog, lost data and refusals (staff only)."""
    if not request.user.is_staff:
        raise PermissionDenied("The ingest health page is for staff.")
    now = timezone.now()
    # Every query reads this recent window of the ingest log, never all of it.
    since = health.window_start(now)
    context = {
        "rates": health.batch_rates(now),
        "queue": health.queue_depth(),
        "gaps": health.gaps_by_node(since),
        "rejected": health.rejected_by_reason(since),
        "duplicates": health.duplicates_by_reason(since),
        "clock_off": health.clock_off_nodes(now, since),
        "clock_tolerance_s": settings.INGEST_CLOCK_TOLERANCE_S,
        "window_h": settings.INGEST_HEALTH_WINDOW_S / 3600,
        "recent_refusals": RejectedBatch.objects.all()[:10],
        "spool_drops": health.spool_drops(since),
        "keys": health.batches_by_key(now - dt.timedelta(hours=1)),
        "signatures": health.signature_versions(now - dt.timedelta(hours=1)),
        "silent": [{"node": n, "silent_for": now - n.heard} for n in silent_nodes(now)],
        "silent_after_s": settings.NODE_SILENT_AFTER_S,
        "refresh_s": 15,
    }
    return render(request, "ingest/health.html", context)
