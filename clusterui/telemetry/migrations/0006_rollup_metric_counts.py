"""Per-metric sample counts in the rollups, so that combining rollup rows weights each
average by the samples that reported the metric, not by every sample of the bucket.

A rollup's ``<m>_avg`` is the mean over the samples where ``m`` was not null; a reader that
combines buckets (a 10-minute step from 1-minute rows, a job's hour from its GPUs' minutes)
weighted it by the bucket's total ``n``. Where a metric is missing from some samples only
(GPM's first reading after a collector starts, intermittent GPM, a NIC rate's first
sample), that gave a minute with one reading of SM activity the weight of six.

- ``telemetry_gpurollup1m`` / ``5m`` / ``1h``: ``<gauge>_n`` for every gauge;
- ``telemetry_nicrollup1m`` / ``5m``: ``<metric>_n`` for each NIC rate;
- ``telemetry_jobrollup1m`` / ``1h``: ``util_n``, ``sm_active_n``, ``busy_n``.

``<m>_n`` is NULL when every one of the bucket's ``n`` samples reported the metric (the
usual case: a NULL costs one bit of the row's null bitmap, not four bytes), else the count
(0 when none did). Rows written before this migration have NULL and read as before; the
NIC hours already rolled up are marked due again, so compaction recomputes them from their
raw rows with the counts (the GPU rollups' raw rows are packed: their old rows stay).
"""

from django.db import migrations

# Frozen: the rollup gauges and NIC metrics as they are now.
GPU_GAUGES = (
    "util_pct", "mem_util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz",
    "sm_active_pct", "tensor_active_pct", "dram_active_pct", "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s",
)
NIC_METRICS = ("rx_bytes_per_s", "tx_bytes_per_s")
JOB_COUNTS = ("util_n", "sm_active_n", "busy_n")


def _add(table: str, cols) -> str:
    adds = ", ".join(f"ADD COLUMN {c} integer" for c in cols)
    return f"ALTER TABLE {table} {adds};\n"


def _drop(table: str, cols) -> str:
    drops = ", ".join(f"DROP COLUMN IF EXISTS {c}" for c in cols)
    return f"ALTER TABLE {table} {drops};\n"


TABLES = (
    *((f"telemetry_gpurollup{s}", [f"{m}_n" for m in GPU_GAUGES]) for s in ("1m", "5m", "1h")),
    *((f"telemetry_nicrollup{s}", [f"{m}_n" for m in NIC_METRICS]) for s in ("1m", "5m")),
    *((f"telemetry_jobrollup{s}", JOB_COUNTS) for s in ("1m", "1h")),
)

# The NIC hours already rolled up (those not due), due again: recomputed with their counts.
RESEED = """
INSERT INTO telemetry_nicrollupdue (nic_id, hour)
SELECT DISTINCT nic_id, date_bin('1 hour', bucket, '2000-01-01') FROM telemetry_nicrollup5m
ON CONFLICT DO NOTHING;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0005_nic_rollups")]

    operations = [
        migrations.RunSQL("".join(_add(t, c) for t, c in TABLES) + RESEED,
                          "".join(_drop(t, c) for t, c in TABLES)),
    ]
