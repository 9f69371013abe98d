"""Node rollups: per node and bucket (5 minutes, 1 hour), the sums and sample counts of its
GPUs' utilization, SM activity and power, written by compaction from the GPU rollups of the
same hours (``packed.write_hours``). The cluster history heatmap reads them: 1,000 nodes x
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
    CONSTRAINT telemetry_noderollup{suffix}_pkey PRIMARY KEY (node_id, bucket)
) PARTITION BY RANGE (bucket);
COMMENT ON INDEX telemetry_noderollup{suffix}_pkey IS
    'compaction upserts a node''s buckets; the history reads every node over a range';
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


DROP = """
DROP TABLE IF EXISTS telemetry_noderollup5m;
DROP TABLE IF EXISTS telemetry_noderollup1h;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0006_rollup_metric_counts"), ("inventory", "0001_initial")]

    operations = [
        migrations.RunSQL(_table("5m") + _table("1h"), DROP),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
