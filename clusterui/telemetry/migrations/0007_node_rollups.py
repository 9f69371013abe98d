"""Node rollups: per node and bucket (5 minutes, 1 hour), the sums and sample counts of its
GPUs' utilization, SM activity and power, written by compaction from the GPU rollups of the
same hours (``packed.write_hours``), and its NICs' summed traffic (receive + transmit, the
sum of each NIC's mean), from the NIC rollups (``nicrollup.write_hours``; the hourly value
is the mean of the hour's 5-minute ones). The cluster history heatmap reads them: 1,000 nodes x
a week is 168,000 narrow rows here against 1.3 million wide GPU rollup rows.

Partitioned like the GPU rollups they come from (5-minute by day, hourly by month); the
rollups already stored are summed into them here, partition by partition.
"""

from django.db import migrations

METRICS = ("util_pct", "sm_active_pct", "power_w")  # frozen


def _table(suffix: str) -> str:
    cols = ",\n    ".join(f"{m}_sum double precision,\n    {m}_n integer" for m in METRICS)
    return f"""
CREATE TABLE telemetry_noderollup{suffix} (
    bucket timestamptz NOT NULL,
    node_id integer NOT NULL,
    gpus integer NOT NULL,
    {cols},
    nics integer,
    nic_bytes_per_s double precision,
    CONSTRAINT telemetry_noderollup{suffix}_pkey PRIMARY KEY (bucket, node_id)
) PARTITION BY RANGE (bucket);
COMMENT ON INDEX telemetry_noderollup{suffix}_pkey IS
    'the history reads every node over a range, and the newest bucket rolled up; compaction upserts a node''s buckets';
"""


def _sums(alias: str) -> str:
    return ", ".join(
        f"sum({alias}.{m}_avg::float8 * COALESCE({alias}.{m}_n, {alias}.n)), "
        f"sum(COALESCE({alias}.{m}_n, {alias}.n)) FILTER (WHERE {alias}.{m}_avg IS NOT NULL)"
        for m in METRICS)


def backfill(apps, schema_editor):
    """Each GPU rollup partition's rows, summed per node into a partition of the same
    bounds."""
    with schema_editor.connection.cursor() as cur:
        for suffix in ("5m", "1h"):
            source, target = f"telemetry_gpurollup{suffix}", f"telemetry_noderollup{suffix}"
            cur.execute(
                """
                SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i
                JOIN pg_class c ON c.oid = i.inhrelid
                JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s
                """, [source])
            for name, bound in cur.fetchall():
                part = target + name[len(source):]
                cur.execute(f'CREATE TABLE IF NOT EXISTS "{part}" PARTITION OF {target} {bound}')
                cols = ", ".join(f"{m}_sum, {m}_n" for m in METRICS)
                cur.execute(
                    f"""
                    INSERT INTO "{part}" (node_id, bucket, gpus, {cols})
                    SELECT g.node_id, r.bucket, count(DISTINCT r.gpu_id), {_sums("r")}
                    FROM "{name}" r JOIN inventory_gpu g ON g.id = r.gpu_id
                    GROUP BY 1, 2
                    """)


def backfill_nics(apps, schema_editor):
    """The NIC rollups already stored, summed per node into the 5-minute node rollups, and
    the hours' means into the hourly ones."""
    with schema_editor.connection.cursor() as cur:
        cur.execute(
            """
            SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'telemetry_nicrollup5m'
            """)
        for name, bound in cur.fetchall():
            part = "telemetry_noderollup5m" + name[len("telemetry_nicrollup5m"):]
            cur.execute(f'CREATE TABLE IF NOT EXISTS "{part}" '
                        f"PARTITION OF telemetry_noderollup5m {bound}")
            cur.execute(
                f"""
                INSERT INTO telemetry_noderollup5m (node_id, bucket, gpus, nics,
                                                    nic_bytes_per_s)
                SELECT k.node_id, r.bucket, 0, count(DISTINCT r.nic_id),
                       sum(COALESCE(r.rx_bytes_per_s_avg, 0) + COALESCE(r.tx_bytes_per_s_avg, 0))
                FROM "{name}" r JOIN inventory_nic k ON k.id = r.nic_id
                GROUP BY 1, 2
                ON CONFLICT (bucket, node_id) DO UPDATE SET nics = EXCLUDED.nics,
                    nic_bytes_per_s = EXCLUDED.nic_bytes_per_s
                """)
        cur.execute(
            """
            SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'telemetry_noderollup5m'
            """)
        for _name, bound in cur.fetchall():
            lo, hi = (part.split("'")[1] for part in bound.split(" TO "))
            month = lo[:7].replace("-", "")
            cur.execute(f'CREATE TABLE IF NOT EXISTS "telemetry_noderollup1h_p{month}" '
                        f"PARTITION OF telemetry_noderollup1h FOR VALUES FROM "
                        f"('{lo[:7]}-01 00:00:00+00') TO "
                        f"(('{lo[:7]}-01 00:00:00+00'::timestamptz + interval '1 month'))")
            cur.execute(
                """
                INSERT INTO telemetry_noderollup1h (node_id, bucket, gpus, nics, nic_bytes_per_s)
                SELECT node_id, date_trunc('hour', bucket, 'UTC'), 0, max(nics),
                       avg(nic_bytes_per_s)
                FROM telemetry_noderollup5m
                WHERE bucket >= %s AND bucket < %s AND nic_bytes_per_s IS NOT NULL
                GROUP BY 1, 2
                ON CONFLICT (bucket, node_id) DO UPDATE SET nics = EXCLUDED.nics,
                    nic_bytes_per_s = EXCLUDED.nic_bytes_per_s
                """, [lo, hi])


DROP = """
DROP TABLE IF EXISTS telemetry_noderollup5m;
DROP TABLE IF EXISTS telemetry_noderollup1h;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0006_rollup_metric_counts"), ("inventory", "0001_initial")]

    operations = [
        migrations.RunSQL(_table("5m") + _table("1h"), DROP),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RunPython(backfill_nics, migrations.RunPython.noop),
    ]
