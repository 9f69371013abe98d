"""Per-GPU charts of what the communication-bound finding measures, shared by the node
and job pages: NVLink traffic against each GPU's NVLink capacity, PCIe traffic, and GPM
tensor and DRAM activity beside SM activity. Read in the pages' one ``gpu_series`` call
(``METRICS``); a GPU that does not report a metric (no GPM, no NVLink) draws no line."""

from clusterui.web.figures import timeseries as ts_figs

METRICS = ("sm_active_pct", "tensor_active_pct", "dram_active_pct", "nvlink_tx_bytes_per_s",
           "nvlink_rx_bytes_per_s", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")


def _directions(link: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{link}_{d}_bytes_per_s", d) for d in ("rx", "tx"))


def charts(gs, labels: dict[int, str], gpus, *, sm_band=None) -> dict:
    """``{"sm", "tensor", "dram", "nvlink", "pcie": figure or None}`` from a series holding
    ``METRICS``; ``labels``: gpu id -> name, in display order."""

    def activity(metric, what, band=None):
        return ts_figs.per_gpu_chart(gs, metric, labels, y_title=f"{what} (GPM) %",
                                     y_range=ts_figs.PCT_RANGE, band=band, say_unreported=True)

    def traffic(link, **capacity):
        # Transmit and receive apiece: NVLink's capacity is per direction.
        return ts_figs.per_gpu_chart(gs, _directions(link), labels, y_title="GB/s",
                                     scale=ts_figs.GB_PER_BYTE, hover_format=".1f", **capacity)

    return {
        "sm": activity("sm_active_pct", "SM activity", sm_band),
        "tensor": activity("tensor_active_pct", "Tensor activity"),
        "dram": activity("dram_active_pct", "DRAM activity"),
        "nvlink": traffic("nvlink", capacities={g.id: g.nvlink_bytes_per_s for g in gpus},
                          capacity_label="NVLink capacity {:,.0f} GB/s per direction"),
        "pcie": traffic("pcie"),
    }
