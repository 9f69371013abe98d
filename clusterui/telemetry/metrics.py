"""The sample tables' columns: one definition shared by the schema check, ingest
validation and the bulk writer.

Each metric has the SQL type it is stored as and the range a real device can report;
ingest rejects a sample whose value falls outside it (with that reason). Byte rates and the
energy counter are ``double precision``: stored exactly as ingested (the float64 a JSON
parser reads), in the hot table and (migration 0008) the rollups' min, max and mean; the
other gauges are ``real``, whose float32 keeps far more than the collector's resolution
(``docs/collector.md``, "Resolution").
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    sql_type: str
    lo: float
    hi: float
    integer: bool = False
    label: str = ""
    unit: str = ""


PCT = (0.0, 100.0)
RATE_MAX = 1e13  # 10 TB/s: above any link that exists

GPU_METRICS: tuple[Metric, ...] = (
    Metric("util_pct", "real", *PCT, label="GPU utilization (NVML)", unit="%"),
    Metric("mem_util_pct", "real", *PCT, label="Memory controller busy", unit="%"),
    Metric("mem_used_mib", "integer", 0, 1 << 24, integer=True, label="Memory used", unit="MiB"),
    Metric("power_w", "real", 0, 10_000, label="Power", unit="W"),
    Metric("temp_c", "real", -60, 200, label="Temperature", unit="°C"),
    Metric("sm_clock_mhz", "real", 0, 10_000, label="SM clock", unit="MHz"),
    Metric("sm_active_pct", "real", *PCT, label="SM activity (GPM)", unit="%"),
    Metric("tensor_active_pct", "real", *PCT, label="Tensor activity (GPM)", unit="%"),
    Metric("dram_active_pct", "real", *PCT, label="DRAM activity (GPM)", unit="%"),
    Metric("pcie_tx_bytes_per_s", "double precision", 0, RATE_MAX, label="PCIe TX", unit="B/s"),
    Metric("pcie_rx_bytes_per_s", "double precision", 0, RATE_MAX, label="PCIe RX", unit="B/s"),
    Metric("nvlink_tx_bytes_per_s", "double precision", 0, RATE_MAX, label="NVLink TX", unit="B/s"),
    Metric("nvlink_rx_bytes_per_s", "double precision", 0, RATE_MAX, label="NVLink RX", unit="B/s"),
    Metric("throttle_reasons", "bigint", 0, (1 << 63) - 1, integer=True,
           label="Clock event reasons", unit="bitmask"),
    Metric("energy_j", "double precision", 0, 1e15, label="Energy counter", unit="J"),
)

NIC_METRICS: tuple[Metric, ...] = (
    Metric("rx_bytes_per_s", "double precision", 0, RATE_MAX, label="Receive", unit="B/s"),
    Metric("tx_bytes_per_s", "double precision", 0, RATE_MAX, label="Transmit", unit="B/s"),
)

JOB_METRICS: tuple[Metric, ...] = (
    Metric("cpu_cores_used", "real", 0, 1e5, label="Host CPU", unit="cores"),
    Metric("host_mem_used_bytes", "bigint", 0, 1 << 56, integer=True,
           label="Host memory", unit="B"),
)

GPU_METRIC_NAMES = tuple(m.name for m in GPU_METRICS)
NIC_METRIC_NAMES = tuple(m.name for m in NIC_METRICS)
JOB_METRIC_NAMES = tuple(m.name for m in JOB_METRICS)

# Partitioned (by day on ts) sample tables and the columns ingest COPYs into, in order.
GPU_SAMPLE_TABLE = "telemetry_gpusample"
NIC_SAMPLE_TABLE = "telemetry_nicsample"
JOB_SAMPLE_TABLE = "telemetry_jobsample"
SAMPLE_TABLES = (GPU_SAMPLE_TABLE, NIC_SAMPLE_TABLE, JOB_SAMPLE_TABLE)

GPU_SAMPLE_COLUMNS = ("ts", "gpu_id", "job_id", *GPU_METRIC_NAMES)
NIC_SAMPLE_COLUMNS = ("ts", "nic_id", *NIC_METRIC_NAMES)
JOB_SAMPLE_COLUMNS = ("ts", "job_id", "node_id", *JOB_METRIC_NAMES)

# The packed tier and the rollups (migrations 0003 and 0004, written by compaction): chunks
# and 1- and 5-minute rollups have day partitions, 1-hour rollups month partitions.
GPU_CHUNK_TABLE = "telemetry_gpuchunk"
# The GPU rollups by bucket width, packed (``rollupcodec.py``): one blob per (GPU, hour) of
# 1- and 5-minute buckets (migration 0009), per (GPU, day) of 1-hour buckets (0011).
GPU_ROLLUP_TABLES = {60: "telemetry_gpurollup1mpack", 300: "telemetry_gpurollup5mpack",
                     3600: "telemetry_gpurollup1hpack"}
GPU_PACKED_ROLLUP_WIDTHS = frozenset(GPU_ROLLUP_TABLES)
# Seconds of buckets one blob of each width holds, from its ``start``.
GPU_ROLLUP_BLOB_SPAN = {60: 3600, 300: 3600, 3600: 86400}
# Per job and hour (the trends page); a 1-minute one was dropped by migration 0010: no reader.
JOB_ROLLUP_TABLES = {3600: "telemetry_jobrollup1h"}
# The NIC rollup (migration 0005, kept by compaction from the NIC samples), day partitions;
# and the (NIC, hour)s whose rollups are due (ingest marks them). Minute steps read the
# samples: the 1-minute NIC rollup covered the same days and, once the samples were packed,
# cost more than they did (migration 0015).
NIC_ROLLUP_TABLES = {300: "telemetry_nicrollup5m"}
NIC_ROLLUP_DUE_TABLE = "telemetry_nicrollupdue"
# Per node (migration 0007, written by compaction from the GPU rollups it just wrote): the
# sums and counts of its GPUs' utilization, SM activity and power per bucket, so that the
# cluster history reads one narrow row per node instead of eight wide ones per GPU.
NODE_ROLLUP_TABLES = {300: "telemetry_noderollup5m", 3600: "telemetry_noderollup1h"}
NODE_ROLLUP_METRICS = ("util_pct", "sm_active_pct", "power_w")
MONTHLY_TABLES = frozenset((GPU_ROLLUP_TABLES[3600], JOB_ROLLUP_TABLES[3600],
                            NODE_ROLLUP_TABLES[3600]))
# The packed NIC tier (migration 0014, written by compaction, ``nicpack``): per NIC and clock
# hour, the hour's samples as arrays; day partitions, kept as long as the raw GPU tier.
NIC_PACK_TABLE = "telemetry_nicpack"
PACKED_TABLES = (GPU_CHUNK_TABLE, NIC_PACK_TABLE, *GPU_ROLLUP_TABLES.values(),
                 *JOB_ROLLUP_TABLES.values(), *NODE_ROLLUP_TABLES.values())
# Metrics a rollup keeps avg, max and min of (the rest: throttle reasons as bit_or, the
# energy counter as min, max and last). The averages are float4 ("real") except those of
# double precision metrics (the byte rates), which are float8 like their min and max.
ROLLUP_GAUGES = tuple(m.name for m in GPU_METRICS
                      if m.name not in ("throttle_reasons", "energy_j"))
# The gauges whose lowest and highest sample the GPU rollups keep as well as their sum: the
# bands the pages draw around a mean (the GPU page: all four; the node and job pages: SM
# activity, else utilization). Of the other gauges the rollups keep the sum, which the charts
# of a mean read (and of ROLLUP_PEAKS the max); their other extremes are read from the raw
# tier, kept RAW_RETENTION_DAYS (``series.rollup_width``; an older range is refused). With
# all three of every gauge the 1-minute rollup was 1.5 to 1.65 times its size now
# (``benchmarks/storage.py``, ``benchmarks/storage_vs_peers.py``, docs/scaling.md).
ROLLUP_EXTREMES = ("util_pct", "sm_active_pct", "power_w", "sm_clock_mhz")
# ... and the gauges whose highest sample alone they keep besides the sum: a job's peak
# memory per hour (the job rollups, ``packed._unpacked_rows``).
ROLLUP_PEAKS = ("mem_used_mib",)
ROLLUP_FLOAT8 = frozenset(m.name for m in GPU_METRICS if m.name in ROLLUP_GAUGES
                          and m.sql_type == "double precision")
