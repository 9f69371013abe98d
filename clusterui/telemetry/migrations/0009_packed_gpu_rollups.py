"""The 1- and 5-minute GPU rollups packed: one blob per (GPU, hour) instead of a row per
(GPU, bucket, job) (issue 17: the 1-minute rows cost 51.7 B per raw sample, more than the
raw packed tier).

``telemetry_gpurollup1mpack`` / ``telemetry_gpurollup5mpack``: ``gpu_id``, ``start`` (the
hour), ``n`` (its samples), ``data`` (``clusterui.telemetry.rollupcodec``, format 1), day
partitions on ``start``, primary key ``(gpu_id, start)``. The rows of
``telemetry_gpurollup1m`` / ``5m`` are packed into them, day by day, then those tables are
dropped. A row table kept each mean as a float4; packed, it becomes a sum (mean x the
samples that reported it) quantised as the raw tier quantises the metric: the same within
the float4's own error. The reverse migration recreates nothing (the row tables' data is
not unpacked again): it drops the packed tables.
"""

import datetime as dt

import numpy as np
from django.db import migrations

from clusterui.telemetry import rollupcodec

# Frozen: the gauges of the row tables as they are now.
GAUGES = ("util_pct", "mem_util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz",
          "sm_active_pct", "tensor_active_pct", "dram_active_pct", "pcie_tx_bytes_per_s",
          "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
TABLES = {"telemetry_gpurollup1m": ("telemetry_gpurollup1mpack", 60),
          "telemetry_gpurollup5m": ("telemetry_gpurollup5mpack", 300)}
HOUR_MS = 3_600_000

CREATE = """
CREATE TABLE {table} (
    start timestamptz NOT NULL,
    gpu_id integer NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT {table}_pkey PRIMARY KEY (gpu_id, start)
) PARTITION BY RANGE (start);
-- The blob is compressed by the codec: TOAST must not try again.
ALTER TABLE {table} ALTER COLUMN data SET STORAGE EXTERNAL;
COMMENT ON INDEX {table}_pkey IS
    'series reads one GPU over a range; compaction replaces a (GPU, hour)''s blob';
"""


def _columns() -> str:
    cols = ["gpu_id", "(extract(epoch FROM bucket) * 1000)::bigint", "job_id", "n",
            "throttle_reasons_or", "energy_j_min", "energy_j_max", "energy_j_last"]
    for m in GAUGES:
        cols += [f"{m}_avg::float8", f"{m}_n", f"{m}_max::float8", f"{m}_min::float8"]
    return ", ".join(cols)


def _pack_day(cur, source: str, target: str, width: int, lo, hi) -> None:
    cur.execute(f"SELECT {_columns()} FROM {source} WHERE bucket >= %s AND bucket < %s "
                "ORDER BY gpu_id, bucket, job_id", [lo, hi])
    rows = cur.fetchall()
    if not rows:
        return
    cols = list(zip(*rows, strict=True))
    gpu = np.array(cols[0], np.int64)
    bucket = np.array(cols[1], np.int64)
    hour = bucket - bucket % HOUR_MS
    cuts = np.flatnonzero((gpu[1:] != gpu[:-1]) | (hour[1:] != hour[:-1])) + 1
    out = []
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(rows)], strict=True):
        def col(i, kind=np.float64, a=a, b=b):
            return np.array([np.nan if v is None else v for v in cols[i][a:b]], kind)
        n = np.array(cols[3][a:b], np.int64)
        k, stats = {}, {}
        throttle = cols[4][a:b]
        k["throttle_reasons"] = np.array([0 if v is None else c for v, c in
                                          zip(throttle, n, strict=True)], np.int64)
        stats["throttle_reasons"] = {"or": np.array([v or 0 for v in throttle], np.int64)}
        energy = [col(5), col(6), col(7)]
        k["energy_j"] = np.where(np.isnan(energy[0]), 0, n)
        stats["energy_j"] = dict(zip(("min", "max", "last"), energy, strict=True))
        for j, m in enumerate(GAUGES):
            avg, count = col(8 + 4 * j), cols[9 + 4 * j][a:b]
            kk = np.array([c if c is not None else total for c, total in
                           zip(count, n, strict=True)], np.int64)
            kk[np.isnan(avg)] = 0
            k[m] = kk
            stats[m] = {"sum": np.nan_to_num(avg) * kk, "max": col(10 + 4 * j),
                        "min": col(11 + 4 * j)}
        start = int(hour[a])
        out.append((int(gpu[a]), dt.datetime.fromtimestamp(start / 1000, dt.UTC), int(n.sum()),
                    rollupcodec.pack_rows(start, width, bucket[a:b], cols[2][a:b], n, k, stats)))
    cur.executemany(f"INSERT INTO {target} (gpu_id, start, n, data) VALUES (%s, %s, %s, %s)",
                    out)


def pack_rows(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        for source, (target, width) in TABLES.items():
            cur.execute(
                """SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                   JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s ORDER BY 1""",
                [source])
            for (name,) in cur.fetchall():
                day = dt.datetime.strptime(name.rsplit("_p", 1)[1], "%Y%m%d").replace(
                    tzinfo=dt.UTC)
                lo, hi = day, day + dt.timedelta(days=1)
                cur.execute(f'CREATE TABLE IF NOT EXISTS "{target}_p{day:%Y%m%d}" PARTITION OF '
                            f"{target} FOR VALUES FROM ('{lo.isoformat()}') TO "
                            f"('{hi.isoformat()}')")
                _pack_day(cur, source, target, width, lo, hi)
            cur.execute(f"DROP TABLE IF EXISTS {source}")


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0008_exact_byte_rates")]

    operations = [
        *(migrations.RunSQL(CREATE.format(table=t), f"DROP TABLE IF EXISTS {t};")
          for t, _ in TABLES.values()),
        migrations.RunPython(pack_rows, migrations.RunPython.noop),
    ]
