"""What the GPU page shows, gathered without a request: one GPU's series over the range
(activity, memory, power, temperature, clock, PCIe and NVLink traffic), the jobs that held
it (scoped to what the viewer may see) and its charts."""

from clusterui.telemetry.series import gpu_series, pick_step
from clusterui.web import nodepage
from clusterui.web.figures import timeseries as ts_figs
from clusterui.web.figures.common import points_per_series

METRICS = ("util_pct", "sm_active_pct", "tensor_active_pct", "dram_active_pct",
           "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz", "pcie_tx_bytes_per_s",
           "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
# Metrics drawn with a min-max band: the ones whose dips a finding is about.
BANDED = ("util_pct", "sm_active_pct", "power_w", "sm_clock_mhz")


def allocations(gpu, user, start, end) -> list[dict]:
    return [a for a in nodepage.allocations(gpu.node, user, start, end)
            if a["gpu_id"] == gpu.id]


def figures(gpu, allocs, start, end) -> tuple[dict, int]:
    minimum = gpu.node.sample_interval_s or 1
    step = pick_step(start, end, minimum=minimum, max_points=points_per_series(4))
    s = gpu_series([gpu.id], METRICS, start, end, step=step)
    # Each bucket's lowest and highest sample, where a bucket holds several: the band
    # behind the mean shows the dips (and the clock's drops) a mean hides.
    low = high = None
    if step > minimum:
        low = gpu_series([gpu.id], BANDED, start, end, step=step, agg="min")
        high = gpu_series([gpu.id], BANDED, start, end, step=step, agg="max")

    def one(*args, **kwargs):
        return ts_figs.one_gpu_chart(*args, low=low, high=high, **kwargs)

    return {
        "activity": one(s, gpu.id, [("util_pct", "GPU utilization (NVML)"),
                                    ("sm_active_pct", "SM activity (GPM)"),
                                    ("tensor_active_pct", "Tensor activity (GPM)"),
                                    ("dram_active_pct", "DRAM activity (GPM)")],
                        y_title="%", y_range=ts_figs.PCT_RANGE),
        "memory": one(s, gpu.id, [("mem_used_mib", "Memory used")], y_title="GiB",
                      scale=ts_figs.GIB_PER_MIB, hover_format=".1f",
                      capacity=(gpu.memory_total_mib,
                                f"capacity {(gpu.memory_total_mib or 0) / 1024:,.0f} GiB")),
        "power": one(s, gpu.id, [("power_w", "Power")], y_title="W",
                     capacity=(gpu.power_limit_w,
                               f"power limit {gpu.power_limit_w or 0:,.0f} W")),
        "temperature": one(s, gpu.id, [("temp_c", "Temperature")], y_title="°C"),
        "clock": one(s, gpu.id, [("sm_clock_mhz", "SM clock")], y_title="MHz"),
        "traffic": one(s, gpu.id, [("pcie_tx_bytes_per_s", "PCIe transmit"),
                                   ("pcie_rx_bytes_per_s", "PCIe receive"),
                                   ("nvlink_tx_bytes_per_s", "NVLink transmit"),
                                   ("nvlink_rx_bytes_per_s", "NVLink receive")],
                       y_title="GB/s", scale=ts_figs.GB_PER_BYTE, hover_format=".1f",
                       capacity=(gpu.nvlink_bytes_per_s,
                                 f"NVLink capacity {(gpu.nvlink_bytes_per_s or 0) * 1e-9:,.0f}"
                                 " GB/s")),
        "jobs": ts_figs.jobs_timeline(allocs, start, end),
    }, s.step
