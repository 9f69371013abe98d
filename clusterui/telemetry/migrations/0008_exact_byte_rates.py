"""Byte rates stored exactly: ``double precision`` instead of ``real`` (float32, which kept a
rate of hundreds of GB/s only to within 2**-24 of it: up to 16 KiB/s off at 450 GB/s).

- ``telemetry_gpusample``: the four ``*_bytes_per_s`` columns;
- ``telemetry_gpurollup1m`` / ``5m`` / ``1h``: their ``_avg``, ``_max`` and ``_min``.

All are partitioned: ``ALTER TABLE`` on the parent changes every partition (and the
partitions made later inherit the type). It rewrites them under an ACCESS EXCLUSIVE lock:
ingest waits for the hot table's (small once compaction has run: ``RAW_HOT_MINUTES``),
compaction and charts for the rollups' (their retention's worth of rows). Values already
stored keep the float32 error they had; only what is ingested from here on is exact. The
packed tier's new chunks use codec version 2 (exact byte rates); version 1 chunks are
still read.
"""

from django.db import migrations

# Frozen: the byte rates as they are now.
RATES = ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s",
         "nvlink_rx_bytes_per_s")
ROLLUPS = ("telemetry_gpurollup1m", "telemetry_gpurollup5m", "telemetry_gpurollup1h")


def _alter(sql_type: str) -> str:
    out = ["ALTER TABLE telemetry_gpusample "
           + ", ".join(f"ALTER COLUMN {m} TYPE {sql_type}" for m in RATES) + ";"]
    for table in ROLLUPS:
        out.append(f"ALTER TABLE {table} " + ", ".join(
            f"ALTER COLUMN {m}_{a} TYPE {sql_type}" for m in RATES
            for a in ("avg", "max", "min")) + ";")
    return "\n".join(out)


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0007_node_rollups")]

    operations = [migrations.RunSQL(_alter("double precision"), _alter("real"))]
