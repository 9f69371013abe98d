import datetime as dt

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.utils import timezone

from clusterui.ingest import health
from clusterui.ingest.models import RejectedBatch
from clusterui.ingest.silence import silent_nodes
from clusterui.web import cluster_choice


def ingest_health(request):
    """Is the pipeline healthy? Throughput, backlog, lost data and refusals (staff only)."""
    if not request.user.is_staff:
        raise PermissionDenied("The ingest health page is for staff.")
    now = timezone.now()
    # Every query reads this recent window of the ingest log, never all of it.
    since = health.window_start(now)
    # The navigation's cluster (clusterui/web/cluster_choice.py), or every cluster. The
    # queue is one for all clusters: its figures are never scoped.
    cluster = cluster_choice.known(request)
    refusals = RejectedBatch.objects.filter(cluster=cluster) if cluster else RejectedBatch.objects
    hour_ago = now - dt.timedelta(hours=1)
    context = {
        "cluster": cluster,
        "rates": health.batch_rates(now, cluster),
        "queue": health.queue_depth(),
        "gaps": health.gaps_by_node(since, cluster),
        "rejected": health.rejected_by_reason(since, cluster),
        "duplicates": health.duplicates_by_reason(since, cluster),
        "clock_off": health.clock_off_nodes(now, since, cluster),
        "clock_tolerance_s": settings.INGEST_CLOCK_TOLERANCE_S,
        "window_h": settings.INGEST_HEALTH_WINDOW_S / 3600,
        "recent_refusals": refusals.all()[:10],
        "spool_drops": health.spool_drops(since, cluster),
        "keys": health.batches_by_key(hour_ago, cluster),
        "signatures": health.signature_versions(hour_ago, cluster),
        "silent": [{"node": n, "silent_for": now - n.heard}
                   for n in silent_nodes(now, cluster)],
        "silent_after_s": settings.NODE_SILENT_AFTER_S,
        "refresh_s": 15,
    }
    return render(request, "ingest/health.html", context)
