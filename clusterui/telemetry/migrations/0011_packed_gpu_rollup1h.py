"""The 1-hour GPU rollups packed too: one blob per (GPU, day) of its hourly buckets instead of
a row per (GPU, hour) (issue 17: 1.36 B per raw sample kept 400 days, 39 B per sample of
the raw retention at steady state).

``telemetry_gpurollup1hpack``: ``gpu_id``, ``start`` (the day), ``n``, ``data``
(``clusterui.telemetry.rollupcodec``, format 1, width 3,600 s, job 0), month partitions on
``start`` as the row table had, primary key ``(gpu_id, start)``. The rows of
``telemetry_gpurollup1h`` are packed into it month by month (as migration 0009 packed the
1- and 5-minute ones: a float4 mean becomes the sum it stood for), then that table is
dropped. Migrating back drops the packed table and does not recreate the rows.
"""

import datetime as dt

import numpy as np
from django.db import migrations

from clusterui.telemetry import rollupcodec

GAUGES = ("util_pct", "mem_util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz",
          "sm_active_pct", "tensor_active_pct", "dram_active_pct", "pcie_tx_bytes_per_s",
          "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
SOURCE = "telemetry_gpurollup1h"
TARGET = "telemetry_gpurollup1hpack"
DAY_MS = 86_400_000

CREATE = f"""
CREATE TABLE {TARGET} (
    start timestamptz NOT NULL,
    gpu_id integer NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT {TARGET}_pkey PRIMARY KEY (gpu_id, start)
) PARTITION BY RANGE (start);
ALTER TABLE {TARGET} ALTER COLUMN data SET STORAGE EXTERNAL;
COMMENT ON INDEX {TARGET}_pkey IS
    'series reads one GPU over a range; compaction replaces a (GPU, day)''s blob';
"""


def _columns() -> str:
    cols = ["gpu_id", "(extract(epoch FROM bucket) * 1000)::bigint", "n",
            "throttle_reasons_or", "energy_j_min", "energy_j_max", "energy_j_last"]
    for m in GAUGES:
        cols += [f"{m}_avg::float8", f"{m}_n", f"{m}_max::float8", f"{m}_min::float8"]
    return ", ".join(cols)


def _floats(col):
    return np.array([np.nan if v is None else v for v in col], np.float64)


def _pack(rows) -> list[tuple]:
    cols = list(zip(*rows, strict=True))
    gpu = np.array(cols[0], np.int64)
    bucket = np.array(cols[1], np.int64)
    day = bucket - bucket % DAY_MS
    cuts = np.flatnonzero((gpu[1:] != gpu[:-1]) | (day[1:] != day[:-1])) + 1
    out = []
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(rows)], strict=True):
        n = np.array(cols[2][a:b], np.int64)
        throttle = cols[3][a:b]
        k = {"throttle_reasons": np.array([0 if v is None else c for v, c in
                                           zip(throttle, n, strict=True)], np.int64)}
        stats = {"throttle_reasons": {"or": np.array([v or 0 for v in throttle], np.int64)}}
        energy = [_floats(cols[i][a:b]) for i in (4, 5, 6)]
        k["energy_j"] = np.where(np.isnan(energy[0]), 0, n)
        stats["energy_j"] = dict(zip(("min", "max", "last"), energy, strict=True))
        for j, m in enumerate(GAUGES):
            avg = _floats(cols[7 + 4 * j][a:b])
            kk = np.array([total if c is None else c for c, total in
                           zip(cols[8 + 4 * j][a:b], n, strict=True)], np.int64)
            kk[np.isnan(avg)] = 0
            k[m] = kk
            stats[m] = {"sum": np.nan_to_num(avg) * kk, "max": _floats(cols[9 + 4 * j][a:b]),
                        "min": _floats(cols[10 + 4 * j][a:b])}
        start = int(day[a])
        out.append((int(gpu[a]), dt.datetime.fromtimestamp(start / 1000, dt.UTC), int(n.sum()),
                    rollupcodec.pack_rows(start, 3600, bucket[a:b], np.zeros(b - a, np.int64),
                                          n, k, stats)))
    return out


def pack_rows(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)", [SOURCE])
        if cur.fetchone()[0] is None:
            return
        cur.execute(
            """SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s ORDER BY 1""",
            [SOURCE])
        for (name,) in cur.fetchall():
            month = dt.datetime.strptime(name.rsplit("_p", 1)[1], "%Y%m").replace(tzinfo=dt.UTC)
            end = (month + dt.timedelta(days=32)).replace(day=1)
            cur.execute(f'CREATE TABLE IF NOT EXISTS "{TARGET}_p{month:%Y%m}" PARTITION OF '
                        f"{TARGET} FOR VALUES FROM ('{month.isoformat()}') TO "
                        f"('{end.isoformat()}')")
            cur.execute(f"SELECT {_columns()} FROM {SOURCE} WHERE bucket >= %s AND bucket < %s "
                        "ORDER BY gpu_id, bucket", [month, end])
            rows = cur.fetchall()
            if rows:
                cur.executemany(f"INSERT INTO {TARGET} (gpu_id, start, n, data) "
                                "VALUES (%s, %s, %s, %s)", _pack(rows))
        cur.execute(f"DROP TABLE {SOURCE}")


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0010_drop_jobrollup1m")]

    operations = [
        migrations.RunSQL(CREATE, f"DROP TABLE IF EXISTS {TARGET};"),
        migrations.RunPython(pack_rows, migrations.RunPython.noop),
    ]
