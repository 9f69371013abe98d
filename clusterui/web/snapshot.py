"""The cluster now: every GPU's latest sample, from the small "latest" table kept by
ingest, in one query whatever the cluster's size."""

import datetime as dt
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, Q, Value
from django.utils import timezone

from clusterui.inventory.models import Gpu, heard_at
from clusterui.jobs.models import visible_user_name

# A GPU counts as busy at or above this NVML utilization.
BUSY_UTIL_PCT = 10.0


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
    allocated: bool = False


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
    def reporting(self) -> list[GpuCell]:
        return [c for c in self.cells if c.util is not None]

    @property
    def allocated(self) -> int:
        return sum(c.allocated for c in self.cells)

    @property
    def busy(self) -> int:
        return sum(c.util >= BUSY_UTIL_PCT for c in self.reporting)

    @property
    def mean_util(self) -> float | None:
        values = [c.util for c in self.reporting]
        return sum(values) / len(values) if values else None

    @property
    def idle_allocated(self) -> int:
        """Allocated to a job yet below the busy threshold: the waste happening now."""
        return sum(c.allocated and c.util is not None and c.util < BUSY_UTIL_PCT
                   for c in self.cells)


def cluster_snapshot(user, now: dt.datetime | None = None) -> Snapshot:
    """One query: every GPU with its node, latest sample and that sample's job, which
    ``user`` may see or not (``visible_user_name``, the rule of ``Job.objects.visible_to``).
    Whether a node is silent is decided by the database: 8,000 rows' timestamps are never
    parsed, and the jobs on them are joined there, not sent back as a list of thousands of
    ids."""
    now = now or timezone.now()
    silent_before = now - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    if not user.is_authenticated:
        visible = Value(False)
    elif (name := visible_user_name(user)) is None:
        visible = Value(True)
    else:
        visible = Q(latest__job__user=name)
    rows = (
        Gpu.objects.order_by("node__cluster__name", "node__name", "index")
        # Silent by arrival (Node.heard_at): a node back-filling old data is reporting.
        .annotate(heard=heard_at("node__"))
        .annotate(silent=Q(heard__lt=silent_before),
                  sampled=Q(latest__gpu_id__isnull=False),
                  visible=ExpressionWrapper(visible, output_field=BooleanField()))
        .values_list("node_id", "node__name", "node__simulated", "silent", "index", "model",
                     "sampled", "latest__util_pct", "latest__sm_active_pct", "latest__job_id",
                     "visible", "latest__job__external_id")
    )
    snap = Snapshot()
    seen_nodes: set[int] = set()
    for (node_id, node, simulated, silent, index, model, sampled, util, sm, job_id, visible,
         label) in rows:
        if node_id not in seen_nodes:
            seen_nodes.add(node_id)
            snap.silent_nodes += silent
            snap.simulated |= simulated
        current = sampled and not silent
        # Another user's job: the cell says "allocated" only.
        shown = current and job_id is not None and visible
        snap.cells.append(GpuCell(
            node_id=node_id, node=node, index=index, model=model,
            util=util if current else None, sm_active=sm if current else None,
            job_id=job_id if shown else None, job_label=label if shown else "",
            allocated=current and job_id is not None,
        ))
    snap.nodes = len(seen_nodes)
    return snap
