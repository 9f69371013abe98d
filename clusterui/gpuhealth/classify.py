"""What a GPU's health counters call for, by the vendor's guidance, and a node's summary.

- **replace** (RMA): a row remapping failed (``remap_failure``), or the GPU retired
  ``RETIRED_PAGES_REPLACE`` pages or more (pre-Ampere page retirement);
- **reset** (``nvidia-smi -r`` with no process on the GPU, or a reboot): a row remap is
  pending, a page retirement is pending, or uncorrectable ECC errors happened since the
  last reset (the volatile count; a reset sets it to 0);
- **degraded** (watch it, no action): rows remapped for uncorrectable errors, NVLink
  recovery errors, PCIe replays.

A node is "drain suggested" when one of its GPUs needs a reset or replacement, "degraded"
when one is degraded, "healthy" otherwise, and unknown without any health reading. The
sources of each rule are in ``docs/detectors.md`` ("GPU health").
"""

from dataclasses import dataclass, field

# NVIDIA's dynamic page retirement guidance as commonly quoted (see docs/detectors.md:
# the figure is not on the NVIDIA page we could read, so it is marked uncertain there).
RETIRED_PAGES_REPLACE = 60

REPLACE, RESET = "replace", "reset"
HEALTHY, DEGRADED, DRAIN = "healthy", "degraded", "drain"
STATE_LABELS = {HEALTHY: "Healthy", DEGRADED: "Degraded", DRAIN: "Drain suggested"}

SOURCES = {
    "remap_failure": "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/",
    "remap_pending": "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/",
    "ecc_uncorrected_volatile": "https://docs.nvidia.com/deploy/xid-errors/",
    "retired_pages": "https://docs.nvidia.com/deploy/dynamic-page-retirement/",
}
ACTIONS = {
    REPLACE: "drain the node and replace the GPU (RMA)",
    RESET: "drain the node, then reset the GPU (nvidia-smi -r -i <index>, no process on it) "
           "or reboot",
}


@dataclass
class GpuVerdict:
    index: int
    action: str | None = None  # REPLACE, RESET or None
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (why, source)
    warnings: list[str] = field(default_factory=list)

    @property
    def short(self) -> str:
        why = ", ".join(r for r, _ in self.reasons) or ", ".join(self.warnings)
        return f"GPU {self.index}: {why}" + (f" ({self.action})" if self.action else "")


def judge(index: int, h) -> GpuVerdict:
    """``h``: anything with the ``GpuHealth`` fields (a model row)."""
    v = GpuVerdict(index)
    pages = (h.retired_pages_sbe or 0) + (h.retired_pages_dbe or 0)
    if h.remap_failure:
        v.reasons.append(("row remapping failed", SOURCES["remap_failure"]))
    if pages >= RETIRED_PAGES_REPLACE:
        v.reasons.append((f"{pages} retired pages", SOURCES["retired_pages"]))
    if v.reasons:
        v.action = REPLACE
    reset = []
    if h.remap_pending:
        reset.append(("row remap pending", SOURCES["remap_pending"]))
    if h.retired_pages_pending:
        reset.append(("page retirement pending", SOURCES["retired_pages"]))
    if h.ecc_uncorrected_volatile:
        reset.append((f"{h.ecc_uncorrected_volatile} uncorrectable ECC errors since reset",
                      SOURCES["ecc_uncorrected_volatile"]))
    v.reasons += reset
    if reset and v.action is None:
        v.action = RESET
    if h.remapped_uncorrectable:
        v.warnings.append(f"{h.remapped_uncorrectable} rows remapped (uncorrectable)")
    if h.nvlink_recovery_errors:
        v.warnings.append(f"{h.nvlink_recovery_errors} NVLink recovery errors")
    if h.pcie_replays:
        v.warnings.append(f"{h.pcie_replays} PCIe replays")
    return v


@dataclass
class NodeHealth:
    state: str  # HEALTHY, DEGRADED, DRAIN
    gpus: list[GpuVerdict]

    @property
    def label(self) -> str:
        return STATE_LABELS[self.state]

    @property
    def reason(self) -> str:
        """Short, for a drain reason and a table cell: the GPUs that matter."""
        if self.state == HEALTHY:
            return ""
        shown = [g for g in self.gpus if (g.action if self.state == DRAIN else g.warnings)]
        return "; ".join(g.short for g in shown)


def summarize(verdicts: list[GpuVerdict]) -> NodeHealth:
    if any(v.action for v in verdicts):
        state = DRAIN
    elif any(v.warnings for v in verdicts):
        state = DEGRADED
    else:
        state = HEALTHY
    return NodeHealth(state, sorted(verdicts, key=lambda v: v.index))


def node_health(node_ids=None) -> dict[int, NodeHealth]:
    """{node id: NodeHealth} of the nodes (all when None) with a health reading."""
    from clusterui.gpuhealth.models import GpuHealth

    rows = GpuHealth.objects.select_related("gpu")
    if node_ids is not None:
        rows = rows.filter(gpu__node_id__in=list(node_ids))
    by_node: dict[int, list[GpuVerdict]] = {}
    for h in rows:
        by_node.setdefault(h.gpu.node_id, []).append(judge(h.gpu.index, h))
    return {node_id: summarize(v) for node_id, v in by_node.items()}
