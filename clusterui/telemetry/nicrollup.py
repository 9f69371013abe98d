"""NIC rollups: per NIC and 5-minute bucket, recomputed from the NIC samples.

NIC samples are kept at full resolution (hot rows, then packed per NIC and hour:
``nicpack``); the rollups are kept beside them so a long range reads a few rows per NIC
instead of every sample (a 1-minute one was dropped by migration 0015: it covered the same
days as the samples and, once they were packed, cost more than they did; minute steps read
the samples):

1. Ingest marks each (NIC, hour) it writes rows into as *due*
   (``telemetry_nicrollupdue``, one row per pair, ``ON CONFLICT DO NOTHING``): late data
   and spool replays mark an old hour due again.
2. Compaction (``take_due`` and ``write_hours``) takes the due hours that have closed
   (it reads the samples in either tier, so neither ``RAW_HOT_MINUTES`` nor the detectors
   hold it back), oldest
   first, a bounded number per transaction: it deletes them from the due table
   (*returning* them, so one marked again meanwhile waits for the next run) and replaces
   those (NIC, hour)s' rollup rows with aggregates of their samples, hot and packed
   (``telemetry_nic_samples``). Running it twice gives the same rows.
3. ``series.nic_series`` reads the rollups except for due hours, and the samples for the
   due hours and what the rollups cannot answer: a sample is counted once either way.

Rollup columns: ``n`` samples; per metric ``<m>_avg`` (over the samples where it is not
null), ``<m>_max``, ``<m>_min``, in double precision like the raw columns, and ``<m>_n``
(how many samples reported it: NULL when all ``n`` did; migration ``0006``).
"""

import datetime as dt

from django.db import connection

from clusterui.telemetry import partitions
from clusterui.telemetry.metrics import (
    NIC_METRIC_NAMES,
    NIC_ROLLUP_DUE_TABLE,
    NIC_ROLLUP_TABLES,
    NODE_ROLLUP_TABLES,
)

HOUR = dt.timedelta(hours=1)
ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_COLS = ", ".join([f"{m}_{a}" for m in NIC_METRIC_NAMES for a in ("avg", "max", "min")]
                  + [f"{m}_n" for m in NIC_METRIC_NAMES])
# ``<m>_n``: the samples that reported the metric, NULL when all of them did (``series``
# weights the average by it when it combines buckets).
_AGGS = ", ".join([f"{a}({m})" for m in NIC_METRIC_NAMES for a in ("avg", "max", "min")]
                  + [f"NULLIF(count({m}), count(*))" for m in NIC_METRIC_NAMES])

_DELETE = """
DELETE FROM {table} r
USING unnest(%(nic)s::int[], %(hour)s::timestamptz[]) AS u(nic_id, hour)
WHERE r.nic_id = u.nic_id AND r.bucket >= u.hour AND r.bucket < u.hour + interval '1 hour'
  AND r.bucket >= %(lo)s AND r.bucket < %(hi)s
"""

_INSERT = f"""
INSERT INTO {{table}} (nic_id, bucket, n, {_COLS})
SELECT s.nic_id, date_bin(%(width)s, s.ts, %(origin)s), count(*), {_AGGS}
FROM unnest(%(nic)s::int[], %(hour)s::timestamptz[]) AS u(nic_id, hour)
CROSS JOIN LATERAL telemetry_nic_samples(ARRAY[u.nic_id], u.hour,
                                         u.hour + interval '1 hour') s
WHERE s.ts >= %(lo)s AND s.ts < %(hi)s
GROUP BY 1, 2
"""


# The nodes of these (NIC, hour)s: their NICs' summed traffic per 5-minute bucket again from
# all the node's NIC rollups of those hours, then each hour's mean of those buckets.
_NODE_5M = f"""
INSERT INTO {NODE_ROLLUP_TABLES[300]} (node_id, bucket, gpus, nics, nic_bytes_per_s)
SELECT k.node_id, r.bucket, 0, count(DISTINCT r.nic_id),
       sum(COALESCE(r.rx_bytes_per_s_avg, 0) + COALESCE(r.tx_bytes_per_s_avg, 0))
FROM (SELECT DISTINCT n.node_id, u.hour
      FROM unnest(%(nic)s::int[], %(hour)s::timestamptz[]) AS u(nic_id, hour)
      JOIN inventory_nic n ON n.id = u.nic_id) t
JOIN inventory_nic k ON k.node_id = t.node_id
JOIN {NIC_ROLLUP_TABLES[300]} r ON r.nic_id = k.id AND r.bucket >= t.hour
 AND r.bucket < t.hour + interval '1 hour' AND r.bucket >= %(lo)s AND r.bucket < %(hi)s
GROUP BY 1, 2
ON CONFLICT (bucket, node_id) DO UPDATE SET nics = EXCLUDED.nics,
    nic_bytes_per_s = EXCLUDED.nic_bytes_per_s
"""
_NODE_1H = f"""
INSERT INTO {NODE_ROLLUP_TABLES[3600]} (node_id, bucket, gpus, nics, nic_bytes_per_s)
SELECT r.node_id, t.hour, 0, max(r.nics), avg(r.nic_bytes_per_s)
FROM (SELECT DISTINCT n.node_id, u.hour
      FROM unnest(%(nic)s::int[], %(hour)s::timestamptz[]) AS u(nic_id, hour)
      JOIN inventory_nic n ON n.id = u.nic_id) t
JOIN {NODE_ROLLUP_TABLES[300]} r ON r.node_id = t.node_id AND r.bucket >= t.hour
 AND r.bucket < t.hour + interval '1 hour' AND r.bucket >= %(lo)s AND r.bucket < %(hi)s
WHERE r.nic_bytes_per_s IS NOT NULL
GROUP BY 1, 2
ON CONFLICT (bucket, node_id) DO UPDATE SET nics = EXCLUDED.nics,
    nic_bytes_per_s = EXCLUDED.nic_bytes_per_s
"""


def mark_due(cur, pairs) -> None:
    """Mark these (NIC id, hour start as PostgreSQL microseconds since 2000) pairs due, with
    ``cur`` (ingest's psycopg cursor, in its transaction). Sorted: two writers marking the
    same pairs lock them in the same order."""
    pairs = sorted(set(pairs))
    if not pairs:
        return
    cur.execute(
        f"INSERT INTO {NIC_ROLLUP_DUE_TABLE} (nic_id, hour) "
        "SELECT u.nic_id, timestamptz '2000-01-01 00:00:00+00' + u.us * interval '1 microsecond' "
        "FROM unnest(%b::int4[], %b::int8[]) AS u(nic_id, us) ON CONFLICT DO NOTHING",
        [[p[0] for p in pairs], [p[1] for p in pairs]], binary=True)


def write_hours(pairs: list[tuple[int, dt.datetime]]) -> int:
    """Replace the rollup rows of these (NIC id, hour start) pairs with aggregates of their
    samples, in the caller's transaction; return the 5-minute rows written."""
    if not pairs:
        return 0
    hours = [h for _, h in pairs]
    lo, hi = min(hours), max(hours) + HOUR
    days = {h.date() for h in hours}
    partitions.forget_known()  # checked in the catalog: a rollback may have removed some
    partitions.ensure_partitions(days, tables=(*NIC_ROLLUP_TABLES.values(),
                                               *NODE_ROLLUP_TABLES.values()))
    params = {"nic": [n for n, _ in pairs], "hour": hours, "lo": lo, "hi": hi,
              "origin": ORIGIN}
    written = 0
    with connection.cursor() as cur:
        for width, table in NIC_ROLLUP_TABLES.items():
            cur.execute(_DELETE.format(table=table), params)
            cur.execute(_INSERT.format(table=table),
                        {**params, "width": dt.timedelta(seconds=width)})
            if width == 300:
                written = cur.rowcount
        # The nodes' traffic, for the cluster history (hours start on the hour: the 5-minute
        # buckets of an hour are all in its day's partition).
        cur.execute(_NODE_5M, params)
        cur.execute(_NODE_1H, params)
    return written


def take_due(before: dt.datetime, limit: int) -> list[tuple[int, dt.datetime]]:
    """Delete and return up to ``limit`` due (NIC, hour)s older than ``before``, oldest
    first (in the caller's transaction; another run's are skipped, not waited for)."""
    with connection.cursor() as cur:
        cur.execute(
            f"""
            DELETE FROM {NIC_ROLLUP_DUE_TABLE} d
            USING (SELECT nic_id, hour FROM {NIC_ROLLUP_DUE_TABLE} WHERE hour < %s
                   ORDER BY hour, nic_id LIMIT %s FOR UPDATE SKIP LOCKED) t
            WHERE d.nic_id = t.nic_id AND d.hour = t.hour
            RETURNING d.nic_id, d.hour
            """,
            [before, limit])
        return sorted(cur.fetchall(), key=lambda r: (r[1], r[0]))
