"""Drop the 1-minute NIC rollup: minute steps read the NIC samples themselves.

The 1-minute NIC rollup (migration 0005) was kept ``ROLLUP_1M_RETENTION_DAYS`` (14), as
long as the samples it summarised (``RAW_RETENTION_DAYS``, 14), so it only made reads
faster; once the samples were packed (0014: one row of arrays per NIC and hour) it cost
more than they did (24.2 bytes per port sample against 22.4, ``benchmarks/
storage_vs_peers.py --nics-per-node 2``), while a chart of one node's ports at 1-minute
steps reads a few packed rows per port. The 5-minute NIC rollup stays (31 days, the
cluster history's node rollups are made from it).

Reversed, the table comes back empty and every (NIC, hour) of the 5-minute rollup is
marked due, so compaction fills it again from the samples it still has.
"""

from django.db import migrations

METRICS = ("rx_bytes_per_s", "tx_bytes_per_s")  # frozen: the NIC metrics as they are now

_COLS = ",\n    ".join([f"{m}_{a} double precision" for m in METRICS
                        for a in ("avg", "max", "min")] + [f"{m}_n integer" for m in METRICS])
RECREATE = f"""
CREATE TABLE telemetry_nicrollup1m (
    bucket timestamptz NOT NULL,
    nic_id integer NOT NULL,
    n integer NOT NULL,
    {_COLS},
    CONSTRAINT telemetry_nicrollup1m_pkey PRIMARY KEY (nic_id, bucket)
) PARTITION BY RANGE (bucket);
INSERT INTO telemetry_nicrollupdue (nic_id, hour)
SELECT DISTINCT nic_id, date_bin('1 hour', bucket, '2000-01-01') FROM telemetry_nicrollup5m
ON CONFLICT DO NOTHING;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0014_nicpack")]

    operations = [
        migrations.RunSQL("DROP TABLE IF EXISTS telemetry_nicrollup1m;", RECREATE),
    ]
