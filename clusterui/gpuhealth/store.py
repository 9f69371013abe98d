"""Ingest's part: each GPU's newest health reading upserted into ``GpuHealth``.

A row is written only when a value changed or the stored reading is ``REFRESH_S`` old, and
never by an older reading (a spool replay). A null means "not read this time" and keeps the
value known before (a counter NVML cannot report is null in every reading anyway).
"""

import datetime as dt

from clusterui.gpuhealth.fields import COUNTS, FIELDS
from clusterui.gpuhealth.models import REFRESH_S

_TYPES = tuple("bigint" if f in COUNTS else "boolean" for f in FIELDS)
_MERGED = {f: f"COALESCE(EXCLUDED.{f}, h.{f})" for f in FIELDS}
_CHANGED = " OR ".join(f"{_MERGED[f]} IS DISTINCT FROM h.{f}" for f in FIELDS)
_SQL = f"""
INSERT INTO gpuhealth_gpuhealth AS h (gpu_id, ts, changed_at, {", ".join(FIELDS)})
SELECT u.gpu, u.ts, u.ts, {", ".join(f"u.{f}" for f in FIELDS)}
FROM unnest(%s::bigint[], %s::timestamptz[],
            {", ".join(f"%s::{t}[]" for t in _TYPES)}) AS u(gpu, ts, {", ".join(FIELDS)})
ON CONFLICT (gpu_id) DO UPDATE SET
    ts = EXCLUDED.ts,
    changed_at = CASE WHEN {_CHANGED} THEN EXCLUDED.ts ELSE h.changed_at END,
    {", ".join(f"{f} = {_MERGED[f]}" for f in FIELDS)}
WHERE EXCLUDED.ts > h.ts AND ({_CHANGED}
                              OR EXCLUDED.ts >= h.ts + interval '{REFRESH_S} seconds')
"""


def store_health(cur, rows: list[tuple], gpu_ids: dict[int, int]) -> int:
    """``rows``: the batch's ``(ts, gpu index, *FIELDS)``; refused GPUs are left out."""
    rows = [r for r in rows if r[1] in gpu_ids]
    if not rows:
        return 0
    columns = list(zip(*rows, strict=True))
    cur.execute(_SQL, [[gpu_ids[g] for g in columns[1]],
                       [dt.datetime.fromtimestamp(t, dt.UTC) for t in columns[0]],
                       *(list(c) for c in columns[2:])])
    return len(rows)
