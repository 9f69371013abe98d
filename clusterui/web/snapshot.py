"""The cluster now: every GPU's latest sample, from the small "latest" table kept by
ingest, in one query whatever the cluster's size.

One cell per physical GPU (``clusterui.inventory.counting``): a MIG-enabled GPU is one cell
that sums its instances' shares (allocated, busy, idle), never a cell per instance. GPUs
their node no longer reports (gone: replaced, MIG instances destroyed) have no cell."""

import datetime as dt
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, F, Q, Value
from django.utils import timezone

from clusterui.inventory import counting
from clusterui.inventory.counting import BUSY_UTIL_PCT
from clusterui.inventory.models import Gpu, heard_at
from clusterui.jobs import visibility


@dataclass
class GpuCell:
    node_id: int
    node: str
    index: int
    model: str
    util: float | None  # None: no current sample (node silent or never reported)
    sm_active: float | None
    job_id: int | None  # the allocation, when the viewer may see that job
    job_label: str = ""
    allocated: bool = False  # held by a job (a MIG GPU: any of its instances)
    # GPUs' worth of this GPU held by jobs, busy, and held but idle: 0 or 1 for a whole
    # GPU, the sum of its instances' shares for a MIG-enabled GPU (3 of 7 slices: 3/7).
    allocated_share: float = 0.0
    busy_share: float = 0.0
    idle_share: float = 0.0
    mig: bool = False  # a MIG-enabled GPU with instances: NVML gives it no utilization


@dataclass
class Snapshot:
    cells: list[GpuCell] = field(default_factory=list)
    nodes: int = 0
    silent_nodes: int = 0
    simulated: bool = False

    @property
    def gpus(self) -> int:
        return len(self.cells)

    @property
    def mig(self) -> bool:
        """Some GPU is split into MIG instances (the KPIs then count shares)."""
        return any(c.mig for c in self.cells)

    @property
    def reporting(self) -> list[GpuCell]:
        return [c for c in self.cells if c.util is not None]

    @property
    def allocated(self) -> float:
        """GPUs' worth held by jobs: a MIG instance counts its share of its GPU."""
        return _total(c.allocated_share for c in self.cells)

    @property
    def busy(self) -> float:
        """GPUs' worth busy now: NVML utilization at or above ``BUSY_UTIL_PCT``; a MIG
        instance by its SM activity (NVML gives it no utilization), as its share."""
        return _total(c.busy_share for c in self.cells)

    @property
    def mean_util(self) -> float | None:
        values = [c.util for c in self.reporting]
        return sum(values) / len(values) if values else None

    @property
    def idle_allocated(self) -> float:
        """Allocated to a job yet below the busy threshold: the waste happening now (a MIG
        instance as its share)."""
        return _total(c.idle_share for c in self.cells)


__all__ = ["BUSY_UTIL_PCT", "GpuCell", "Snapshot", "cluster_snapshot"]  # the threshold too


def _total(shares) -> float:
    """Shares summed, rounded back to what they add up to (7 x 1/7 is 1, not 0.99...)."""
    return round(sum(shares), 4)


def cluster_snapshot(user, now: dt.datetime | None = None, *, cluster: str = "") -> Snapshot:
    """One query: every GPU with its node, latest sample and that sample's job, which
    ``user`` may see or not (``jobs/visibility.py``, the rule of ``Job.objects.visible_to``).
    Whether a node is silent is decided by the database: 8,000 rows' timestamps are never
    parsed, and the jobs on them are joined there, not sent back as a list of thousands of
    ids. ``cluster``: that cluster's GPUs only ("": every cluster's)."""
    now = now or timezone.now()
    silent_before = now - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    if not user.is_authenticated:
        visible = Value(False)
    elif (rule := visibility.rule_for(user)) is None:
        visible = Value(True)
    else:
        visible = rule.q("latest__job__")
    gpus = Gpu.objects.filter(counting.present())
    gpus = gpus.filter(node__cluster__name=cluster) if cluster else gpus
    rows = (
        # A node's physical GPUs first, in index order, then its MIG instances: each
        # instance finds its GPU's cell, whatever index it reports.
        gpus.order_by("node__cluster__name", "node__name",
                      F("parent_id").asc(nulls_first=True), "index")
        # Silent by arrival (Node.heard_at): a node back-filling old data is reporting.
        .annotate(heard=heard_at("node__"))
        .annotate(silent=Q(heard__lt=silent_before),
                  sampled=Q(latest__gpu_id__isnull=False),
                  visible=ExpressionWrapper(visible, output_field=BooleanField()))
        .annotate(busy_pct=counting.busy_pct(), share=counting.share())
        .values_list("id", "parent_id", "share", "busy_pct", "node_id", "node__name",
                     "node__simulated", "silent", "index", "model", "sampled",
                     "latest__util_pct", "latest__sm_active_pct", "latest__job_id",
                     "visible", "latest__job__external_id")
    )
    snap = Snapshot()
    seen_nodes: set[int] = set()
    physical: dict[int, GpuCell] = {}
    for (pk, parent_id, share, busy_pct, node_id, node, simulated, silent, index, model,
         sampled, util, sm, job_id, visible, label) in rows:
        if node_id not in seen_nodes:
            seen_nodes.add(node_id)
            snap.silent_nodes += silent
            snap.simulated |= simulated
        current = sampled and not silent
        held = current and job_id is not None
        busy = current and busy_pct is not None and busy_pct >= BUSY_UTIL_PCT
        idle = held and busy_pct is not None and busy_pct < BUSY_UTIL_PCT
        if parent_id in physical:  # a MIG instance: its share, on its GPU's cell
            cell = physical[parent_id]
            cell.mig = True
            cell.allocated |= held
        else:
            # Another user's job: the cell says "allocated" only.
            shown = held and visible
            cell = physical[pk] = GpuCell(
                node_id=node_id, node=node, index=index, model=model,
                util=util if current else None, sm_active=sm if current else None,
                job_id=job_id if shown else None, job_label=label if shown else "",
                allocated=held)
            snap.cells.append(cell)
        cell.allocated_share += share * held
        cell.busy_share += share * busy
        cell.idle_share += share * idle
    snap.nodes = len(seen_nodes)
    return snap
