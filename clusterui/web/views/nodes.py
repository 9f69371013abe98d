"""The node page: its hardware over time, the jobs on it and its GPU events."""

import datetime as dt

from django.conf import settings
from django.db.models import F
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from clusterui.fabric import health
from clusterui.findings.choices import FindingKind
from clusterui.findings.models import Finding
from clusterui.ingest.silence import FORGET_AFTER
from clusterui.inventory import counting
from clusterui.inventory.models import Node
from clusterui.telemetry.models import GpuEvent
from clusterui.web import nodepage, timerange
from clusterui.web.views.overview import SEVERITY_RANK
from clusterui.web.views.support import REFRESH_S, charts, range_context

EVENTS_SHOWN = 50
# Where on the node page the evidence of a node's own finding can be seen.
NODE_EVIDENCE = {
    FindingKind.FABRIC_LINK: ("fabric-links", "the fabric links table"),
    FindingKind.GPU_HEALTH: ("events", "the GPU events"),
}


def node_detail(request, pk):
    """Hardware telemetry is for every signed-in user; the jobs listed are only those the
    user may see (``Job.objects.visible_to``)."""
    node = get_object_or_404(Node.objects.select_related("cluster"), pk=pk)
    now = timezone.now()
    tr, range_error = timerange.parse_or_default(request.GET, default="1h", now=now)
    # Each MIG instance right under its GPU (they share its index)
    gpus = list(node.gpus.select_related("latest").order_by(
        "index", F("parent_id").asc(nulls_first=True), "mig_gi_id", "mig_ci_id", "uuid"))
    for gpu in gpus:  # no longer reported by the node: its last values are not "now"
        gpu.gone = counting.is_gone(gpu, node)
    nics = list(node.nics.select_related("latest").order_by("name"))
    for nic in nics:  # renamed or taken out: likewise
        nic.gone = counting.is_gone(nic, node)
    # Gone for as long as a silent node takes to be forgotten (a board replaced last month,
    # the MIG instances of every earlier layout): history, not news. Counted, not listed;
    # each keeps its own page.
    forgotten = node.last_seen - FORGET_AFTER
    listed_gpus = [g for g in gpus if not (g.gone and g.last_seen < forgotten)]
    listed_nics = [n for n in nics if not (n.gone and n.last_seen < forgotten)]
    unlisted = len(gpus) - len(listed_gpus) + len(nics) - len(listed_nics)
    gpus, nics = listed_gpus, listed_nics
    allocs = nodepage.allocations(node, request.user, tr.start, tr.end)
    figures, step = nodepage.figures(node, gpus, nics, allocs, tr.start, tr.end)
    events = GpuEvent.objects.filter(gpu__node=node, ts__gte=tr.start, ts__lt=tr.end)
    jobs, held = {}, {}
    for a in allocs:
        jobs.setdefault(a["job_id"], a)  # its first allocation here: when it was first seen
        held.setdefault(a["job_id"], []).append(a)
    jobs = {job_id: {**a, "gpus": nodepage.gpus_held(held[job_id])} for job_id, a in jobs.items()}
    silent = now - node.heard_at > dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    findings = list(
        Finding.objects.visible_to(request.user).open().filter(node=node)
        .select_related("job", "acknowledged_by").annotate(rank=SEVERITY_RANK)
        .order_by("-rank", "-last_seen"))
    fabric_ports = health.worst_first(health.ports(*health.window(now), [node.id]))
    for finding in findings:  # a link to the ports table only where it is shown
        finding.chart = NODE_EVIDENCE.get(finding.kind)
        if finding.kind == FindingKind.FABRIC_LINK and not fabric_ports:
            finding.chart = None
    context = {
        "node": node,
        "gpus": gpus,
        "nics": nics,
        "silent": silent,
        "unlisted": unlisted,
        "forget_days": FORGET_AFTER.days,
        "jobs": sorted(jobs.values(), key=lambda j: j["start"], reverse=True),
        "events": list(events.select_related("gpu")[:EVENTS_SHOWN]),
        "events_total": events.count(),
        # The node's own findings (a fabric link, a GPU's health) in full: this page is
        # where they are explained; a job's are a line each, explained on the job's page.
        "findings": findings,
        "node_findings": [f for f in findings if not f.job_id],
        "job_findings": [f for f in findings if f.job_id],
        "fabric_ports": fabric_ports,
        "threshold": health.error_threshold(),
        "window_h": settings.DETECTOR_WINDOW_S / 3600,
        "silent_s": settings.NODE_SILENT_AFTER_S,
        "charts": charts(**figures),
        "step": step,
        "refresh_s": REFRESH_S if tr.live else None,
        "now": now,
        **range_context(request, tr, range_error),
    }
    return render(request, "web/node_detail.html", context, status=400 if range_error else 200)
