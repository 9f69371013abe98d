"""The packed NIC tier: each NIC's samples of a clock hour as one row of arrays.

A hot NIC row (``telemetry_nicsample``) costs 93 bytes on disk for two float64 byte rates:
its heap tuple, line pointer and ``(nic_id, ts)`` index entry. Compaction (``compaction``)
moves the hot rows of every closed hour before its horizon (the same horizon as the GPU
samples', so the detectors, which read hot rows, have read them) into one
``telemetry_nicpack`` row per (NIC, hour): ``ts_ms`` (milliseconds from the hour, ascending),
``rx_bytes_per_s`` and ``tx_bytes_per_s`` (double precision, bit for bit; NULL elements
where the sample had none), in one statement per hour and batch of NICs:

- the hot rows are deleted *returning* them (a row ingest adds meanwhile is neither deleted
  nor lost: it waits for the next run);
- merged with the hour's row already packed (late data, a spool replayed): one sample per
  millisecond, the hot one winning, as the GPU chunks merge;
- written back with an upsert.

Times are kept to the millisecond, like the GPU chunks' (``dedupe`` compares a late row with
a packed one at its millisecond). ``telemetry_nic_samples(nics, lo, hi)`` (migration 0014)
reads both tiers as rows like the hot table's.
"""

import datetime as dt

from django.db import connection

from clusterui.telemetry.metrics import NIC_PACK_TABLE, NIC_SAMPLE_TABLE

HOUR = dt.timedelta(hours=1)
# Both tiers' samples of NICs %s (int[]) in [%s, %s): a FROM item with columns nic_id, ts
# and the NIC metrics.
SAMPLES = "telemetry_nic_samples(%s::int[], %s::timestamptz, %s::timestamptz)"

_PACK = f"""
WITH moved AS (
    DELETE FROM {NIC_SAMPLE_TABLE}
    WHERE nic_id = ANY(%(nics)s) AND ts >= %(lo)s AND ts < %(hi)s
    RETURNING nic_id, ts, rx_bytes_per_s, tx_bytes_per_s
),
old AS (
    SELECT * FROM {NIC_PACK_TABLE}
    WHERE nic_id = ANY(%(nics)s) AND hour = %(lo)s AND nic_id IN (SELECT nic_id FROM moved)
),
samples AS (
    SELECT nic_id, round(extract(epoch FROM ts - %(lo)s) * 1000)::int AS ms,
           rx_bytes_per_s AS rx, tx_bytes_per_s AS tx, 1 AS hot
    FROM moved
    UNION ALL
    SELECT p.nic_id, u.ms, u.rx, u.tx, 0
    FROM old p
    CROSS JOIN LATERAL unnest(p.ts_ms, p.rx_bytes_per_s, p.tx_bytes_per_s) AS u(ms, rx, tx)
),
one AS (
    SELECT DISTINCT ON (nic_id, ms) nic_id, ms, rx, tx, hot
    FROM samples ORDER BY nic_id, ms, hot DESC
)
INSERT INTO {NIC_PACK_TABLE} AS t (hour, nic_id, ts_ms, rx_bytes_per_s, tx_bytes_per_s)
SELECT %(lo)s, nic_id, array_agg(ms ORDER BY ms), array_agg(rx ORDER BY ms),
       array_agg(tx ORDER BY ms)
FROM one GROUP BY nic_id
ON CONFLICT (nic_id, hour) DO UPDATE SET ts_ms = EXCLUDED.ts_ms,
    rx_bytes_per_s = EXCLUDED.rx_bytes_per_s, tx_bytes_per_s = EXCLUDED.tx_bytes_per_s
RETURNING (SELECT count(*) FROM moved), t.nic_id IN (SELECT nic_id FROM old)
"""


def nics_with_rows(hour: dt.datetime) -> list[int]:
    """The NICs with hot rows in this clock hour."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT DISTINCT nic_id FROM {NIC_SAMPLE_TABLE} "
                    "WHERE ts >= %s AND ts < %s", [hour, hour + HOUR])
        return sorted(r[0] for r in cur.fetchall())


def pack_hour(nic_ids: list[int], hour: dt.datetime) -> tuple[int, int, int]:
    """Move these NICs' hot rows of the clock hour starting at ``hour`` into their packed
    rows, in the caller's transaction (the partitions exist: ``packed.ensure_partitions``).
    Returns (hot rows moved, packed rows written, of which merged with one already there)."""
    with connection.cursor() as cur:
        cur.execute(_PACK, {"nics": nic_ids, "lo": hour, "hi": hour + HOUR})
        written = cur.fetchall()
    if not written:
        return 0, 0, 0
    return written[0][0], len(written), sum(1 for _, merged in written if merged)
