"""The 5-minute GPU rollups, ``telemetry_gpurollup5m``: the 1-minute table's columns and
key (split by job), day partitions on ``bucket``; a day's chart (step 300 s) reads them.

Compaction writes them with the other rollups from then on (``clusterui.telemetry.packed``);
this migration fills them for the hours already compacted, from their 1-minute rollups
(each average weighted by the minutes' sample counts, as ``series`` combines them), so a
chart over old data has no hole. Its partitions are made here for those days and on demand
by compaction after that.
"""

import datetime as dt

from django.db import migrations

# Frozen here, as in 0003: the gauges and the GPU rollup table as they are now.
GAUGES = (
    ("util_pct", "real"), ("mem_util_pct", "real"), ("mem_used_mib", "integer"),
    ("power_w", "real"), ("temp_c", "real"), ("sm_clock_mhz", "real"),
    ("sm_active_pct", "real"), ("tensor_active_pct", "real"), ("dram_active_pct", "real"),
    ("pcie_tx_bytes_per_s", "real"), ("pcie_rx_bytes_per_s", "real"),
    ("nvlink_tx_bytes_per_s", "real"), ("nvlink_rx_bytes_per_s", "real"),
)
TABLE = "telemetry_gpurollup5m"
SOURCE = "telemetry_gpurollup1m"


def gauge_columns() -> str:
    cols = []
    for name, sql_type in GAUGES:
        cols += [f"{name}_avg real", f"{name}_max {sql_type}", f"{name}_min {sql_type}"]
    return ",\n    ".join(cols)


CREATE = f"""
CREATE TABLE {TABLE} (
    bucket timestamptz NOT NULL,
    energy_j_min double precision,
    energy_j_max double precision,
    energy_j_last double precision,
    throttle_reasons_or bigint,
    gpu_id integer NOT NULL,
    job_id integer NOT NULL,
    n integer NOT NULL,
    {gauge_columns()},
    CONSTRAINT {TABLE}_pkey PRIMARY KEY (gpu_id, bucket, job_id)
) PARTITION BY RANGE (bucket);
COMMENT ON INDEX {TABLE}_pkey IS
    'series reads one GPU over a range; compaction replaces a (GPU, hour)''s rows';
"""


def _backfill_sql() -> str:
    cols, exprs = [], []
    for name, _ in GAUGES:
        cols += [f"{name}_avg", f"{name}_max", f"{name}_min"]
        exprs += [f"sum({name}_avg::float8 * n) / NULLIF(sum(n) FILTER "
                  f"(WHERE {name}_avg IS NOT NULL), 0)",
                  f"max({name}_max)", f"min({name}_min)"]
    return f"""
        INSERT INTO "{{partition}}" (gpu_id, bucket, job_id, n, throttle_reasons_or,
            energy_j_min, energy_j_max, energy_j_last, {", ".join(cols)})
        SELECT gpu_id, date_bin('5 minutes', bucket, '2000-01-01 00:00:00+00'), job_id, sum(n),
               bit_or(throttle_reasons_or), min(energy_j_min), max(energy_j_max),
               (array_agg(energy_j_last ORDER BY bucket DESC)
                    FILTER (WHERE energy_j_last IS NOT NULL))[1],
               {", ".join(exprs)}
        FROM {SOURCE} WHERE bucket >= %s AND bucket < %s
        GROUP BY 1, 2, 3
    """


def backfill(apps, schema_editor):
    conn = schema_editor.connection
    with conn.cursor() as cur:
        cur.execute(
            """SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s ORDER BY 1""",
            [SOURCE])
        days = [dt.datetime.strptime(name.rsplit("_p", 1)[1], "%Y%m%d").replace(tzinfo=dt.UTC)
                for (name,) in cur.fetchall()]
        sql = _backfill_sql()
        for day in days:
            lo, hi = day, day + dt.timedelta(days=1)
            partition = f"{TABLE}_p{day:%Y%m%d}"
            cur.execute(f'CREATE TABLE IF NOT EXISTS "{partition}" PARTITION OF {TABLE} '
                        f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}')")
            cur.execute(sql.format(partition=partition), [lo, hi])


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0003_packed_and_rollups")]

    operations = [
        migrations.RunSQL(CREATE, f"DROP TABLE IF EXISTS {TABLE};"),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
