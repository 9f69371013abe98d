"""The nodes list: every node with its state, health, jobs and utilization now.

Three queries whatever the cluster's size: the nodes with their GPUs' latest values
aggregated by the database, the open findings per node the viewer may see, and the GPU
events per node in the last 24 hours. Filtering and sorting run on those rows (a few
thousand at most), so every column sorts, computed ones included.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Avg, Count, Q, Sum
from django.db.models.lookups import LessThan

from clusterui.findings.models import Finding
from clusterui.gpuhealth.classify import node_health
from clusterui.inventory import counting
from clusterui.inventory.counting import BUSY_UTIL_PCT
from clusterui.inventory.models import Node, heard_at
from clusterui.telemetry.models import GpuEvent

EVENTS_WINDOW = dt.timedelta(hours=24)
STATES = (("reporting", "Reporting"), ("silent", "Silent"))
HEALTH = (("drain", "Drain suggested (GPU health)"), ("degraded", "GPU health degraded or worse"),
          ("healthy", "GPU health healthy"),
          ("findings", "With open findings"), ("events", "With GPU events (24 h)"),
          ("idle", "Allocated GPUs idle now"))
# ordering key -> (header, value to sort on; None sorts last either way)
COLUMNS = {
    "name": ("Node", lambda r: (r.cluster, r.name)),
    "state": ("State", lambda r: (r.silent, r.name)),
    "gpus": ("GPUs", lambda r: r.gpus),
    "jobs": ("Jobs", lambda r: r.jobs),
    "util": ("GPU utilization (NVML)", lambda r: r.util),
    "sm": ("SM activity (GPM)", lambda r: r.sm),
    "idle": ("Allocated, idle", lambda r: r.idle_allocated),
    "findings": ("Open findings", lambda r: r.findings),
    "events": ("GPU events (24 h)", lambda r: r.events),
    "heard": ("Last heard", lambda r: r.heard),
    "gpuhealth": ("GPU health", lambda r: (HEALTH_RANK.get(r.gpu_health, -1), r.name)),
}


HEALTH_RANK = {"healthy": 0, "degraded": 1, "drain": 2}


@dataclass
class NodeRow:
    id: int
    cluster: str
    name: str
    simulated: bool
    gpus: int  # physical GPUs (a MIG-enabled GPU once, not its instances)
    allocated: float  # GPUs' worth held by jobs: a MIG instance counts its share
    jobs: int
    idle_allocated: float  # likewise
    util: float | None  # mean over its GPUs' latest samples; None when silent
    sm: float | None
    heard: dt.datetime
    silent: bool
    findings: int = 0
    events: int = 0
    gpu_health: str = ""  # healthy, degraded, drain; "" without a health reading
    gpu_health_label: str = ""
    gpu_health_reason: str = ""


def node_rows(user, now: dt.datetime) -> list[NodeRow]:
    silent_before = now - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    # One row per GPU joined (gpus -> latest is one-to-one), so sums are not multiplied.
    # GPUs the node no longer reports (gone) count nowhere (clusterui.inventory.counting).
    present = counting.present("gpus__", "")
    held = Q(present, gpus__latest__job__isnull=False)
    share = counting.share("gpus__")
    nodes = (
        Node.objects.annotate(
            heard=heard_at(),
            gpu_count=Count("gpus", filter=Q(counting.physical("gpus__"), present),
                            distinct=True),
            allocated=Sum(share, filter=held, default=0.0),
            jobs=Count("gpus__latest__job", filter=held, distinct=True),
            idle=Sum(share, filter=Q(held, LessThan(counting.busy_pct("gpus__"), BUSY_UTIL_PCT)), default=0.0),
            util=Avg("gpus__latest__util_pct", filter=present),
            sm=Avg("gpus__latest__sm_active_pct", filter=present))
        .values_list("id", "cluster__name", "name", "simulated", "gpu_count", "allocated",
                     "jobs", "idle", "util", "sm", "heard")
    )
    findings = dict(Finding.objects.visible_to(user).open().filter(node__isnull=False)
                    .values_list("node_id").annotate(n=Count("id")))
    events = dict(GpuEvent.objects.filter(ts__gte=now - EVENTS_WINDOW)
                  .values_list("gpu__node_id").annotate(n=Count("id")))
    health = node_health()
    rows = []
    for (pk, cluster, name, simulated, gpus, allocated, jobs, idle, util, sm,
         heard) in nodes:
        silent = heard < silent_before
        rows.append(NodeRow(
            id=pk, cluster=cluster, name=name, simulated=simulated, gpus=gpus,
            # A silent node's latest values are old: it holds nothing we can vouch for now.
            # Shares summed (7 x 1/7) are rounded back to what they add up to.
            allocated=0 if silent else round(allocated, 4), jobs=0 if silent else jobs,
            idle_allocated=0 if silent else round(idle, 4), util=None if silent else util,
            sm=None if silent else sm, heard=heard, silent=silent,
            findings=findings.get(pk, 0), events=events.get(pk, 0)))
        if pk in health:
            h = health[pk]
            row = rows[-1]
            row.gpu_health, row.gpu_health_label = h.state, h.label
            row.gpu_health_reason = h.reason
    return rows


def select(rows: list[NodeRow], *, q: str = "", cluster: str = "", state: str = "",
           health: str = "", ordering: str = "name") -> list[NodeRow]:
    """``ordering``: a ``COLUMNS`` key, ``-`` first for descending."""
    if q:
        rows = [r for r in rows if q.lower() in r.name.lower()]
    if cluster:
        rows = [r for r in rows if r.cluster == cluster]
    if state:
        rows = [r for r in rows if r.silent == (state == "silent")]
    if health == "drain":
        rows = [r for r in rows if r.gpu_health == "drain"]
    elif health == "degraded":
        rows = [r for r in rows if r.gpu_health in ("degraded", "drain")]
    elif health == "healthy":  # the overview's count: nodes whose health reading is healthy
        rows = [r for r in rows if r.gpu_health == "healthy"]
    elif health == "findings":
        rows = [r for r in rows if r.findings]
    elif health == "events":
        rows = [r for r in rows if r.events]
    elif health == "idle":
        rows = [r for r in rows if r.idle_allocated]
    key = COLUMNS[ordering.lstrip("-")][1]
    known = [r for r in rows if key(r) is not None]
    unknown = [r for r in rows if key(r) is None]  # a silent node has no utilization now
    return sorted(known, key=key, reverse=ordering.startswith("-")) + unknown
