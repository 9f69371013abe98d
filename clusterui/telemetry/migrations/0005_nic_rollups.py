"""NIC rollups, kept from the raw NIC rows (which stay where they are).

- ``telemetry_nicrollup1m`` / ``5m``: per NIC and bucket, the sample count ``n`` and avg,
  max and min of each NIC metric; day partitions on ``bucket`` (``partitions.py``).
- ``telemetry_nicrollupdue``: the (NIC, hour)s whose rollups are not (or no longer) up to
  date. Ingest adds the hours it writes NIC rows into; compaction recomputes the closed
  ones and deletes them; a reader takes a due hour from the raw rows.

The NIC hours already stored are marked due here (every NIC, every hour of the NIC sample
partitions: no scan of the raw rows), so compaction rolls them up in the following runs.
"""

from django.db import migrations

METRICS = ("rx_bytes_per_s", "tx_bytes_per_s")  # frozen: the NIC metrics as they are now


def _rollup(suffix: str) -> str:
    cols = ",\n    ".join(f"{m}_{a} double precision" for m in METRICS
                          for a in ("avg", "max", "min"))
    return f"""
CREATE TABLE telemetry_nicrollup{suffix} (
    bucket timestamptz NOT NULL,
    nic_id integer NOT NULL,
    n integer NOT NULL,
    {cols},
    CONSTRAINT telemetry_nicrollup{suffix}_pkey PRIMARY KEY (nic_id, bucket)
) PARTITION BY RANGE (bucket);
COMMENT ON INDEX telemetry_nicrollup{suffix}_pkey IS
    'series reads one NIC over a range; compaction replaces a (NIC, hour)''s rows';
"""


DUE = """
CREATE TABLE telemetry_nicrollupdue (
    nic_id integer NOT NULL,
    hour timestamptz NOT NULL,
    CONSTRAINT telemetry_nicrollupdue_pkey PRIMARY KEY (nic_id, hour)
);
COMMENT ON INDEX telemetry_nicrollupdue_pkey IS
    'ingest marks a (NIC, hour) once; series reads a NIC''s due hours from the raw rows';
CREATE INDEX telemetry_nicrollupdue_hour ON telemetry_nicrollupdue (hour);
COMMENT ON INDEX telemetry_nicrollupdue_hour IS
    'compaction takes the due hours older than its horizon, oldest first';
"""

SEED = """
INSERT INTO telemetry_nicrollupdue (nic_id, hour)
SELECT n.id, h.hour
FROM inventory_nic n,
     (SELECT generate_series(lo, hi - interval '1 hour', interval '1 hour') AS hour
      FROM (SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                 'FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)')) AS b
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent
            WHERE p.relname = 'telemetry_nicsample') parts,
           LATERAL (SELECT b[1]::timestamptz AS lo, b[2]::timestamptz AS hi) bounds) h
WHERE h.hour < now()
ON CONFLICT DO NOTHING;
"""

DROP = """
DROP TABLE IF EXISTS telemetry_nicrollup1m;
DROP TABLE IF EXISTS telemetry_nicrollup5m;
DROP TABLE IF EXISTS telemetry_nicrollupdue;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0004_gpurollup5m")]

    operations = [migrations.RunSQL(_rollup("1m") + _rollup("5m") + DUE + SEED, DROP)]
