"""The packed NIC tier (``telemetry_nicpack``): one row per NIC and clock hour, the hour's
samples as three arrays in time order (``ts_ms``, milliseconds from the hour; the two byte
rates, double precision, exact; a NULL element where the sample had no value).

Compaction moves the hot rows (``telemetry_nicsample``) of each closed hour before its
horizon into them (``clusterui.telemetry.nicpack``): a hot row cost 93 bytes (heap tuple
and ``(nic_id, ts)`` index entry) for its two values. Day partitions, dropped after
``RAW_RETENTION_DAYS`` like the hot ones.

``telemetry_nic_samples(nics, lo, hi)`` gives every sample of those NICs in [lo, hi) from
both tiers, as rows like the hot table's: what the series, the NIC rollups and the
benchmarks read. A plain SQL function, so the planner inlines it and prunes the partitions
of both tables.
"""

from django.db import migrations

NIC_PACK = """
CREATE TABLE telemetry_nicpack (
    hour timestamptz NOT NULL,
    nic_id integer NOT NULL,
    ts_ms integer[] NOT NULL,
    rx_bytes_per_s double precision[] NOT NULL,
    tx_bytes_per_s double precision[] NOT NULL,
    CONSTRAINT telemetry_nicpack_pkey PRIMARY KEY (nic_id, hour)
) PARTITION BY RANGE (hour);
COMMENT ON INDEX telemetry_nicpack_pkey IS
    'one row per NIC and hour (compaction upserts it); series and rollups read one NIC over a range';

CREATE FUNCTION telemetry_nic_samples(nics integer[], lo timestamptz, hi timestamptz)
RETURNS TABLE (nic_id integer, ts timestamptz, rx_bytes_per_s double precision,
               tx_bytes_per_s double precision)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT s.nic_id, s.ts, s.rx_bytes_per_s, s.tx_bytes_per_s
    FROM telemetry_nicsample s
    WHERE s.nic_id = ANY(nics) AND s.ts >= lo AND s.ts < hi
    UNION ALL
    SELECT p.nic_id, p.hour + u.ms * interval '1 millisecond', u.rx, u.tx
    FROM telemetry_nicpack p
    CROSS JOIN LATERAL unnest(p.ts_ms, p.rx_bytes_per_s, p.tx_bytes_per_s) AS u(ms, rx, tx)
    WHERE p.nic_id = ANY(nics) AND p.hour > lo - interval '1 hour' AND p.hour < hi
      AND p.hour + u.ms * interval '1 millisecond' >= lo
      AND p.hour + u.ms * interval '1 millisecond' < hi
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0013_gpuevent_identity")]

    operations = [
        migrations.RunSQL(NIC_PACK, "DROP FUNCTION IF EXISTS telemetry_nic_samples; "
                                    "DROP TABLE IF EXISTS telemetry_nicpack;"),
    ]
