"""Ingest's part for fabric health: split the fabric fields off the NIC rows, and store them.

Called by ``ingest.validate`` (``split_rows``) and ``ingest.writer`` (``write``, in the
flush's transaction, with its psycopg cursor). A batch carrying no fabric field (an older
collector, an Ethernet interface) writes nothing here.
"""

import datetime as dt
import json

from clusterui.fabric.metrics import (
    ERROR_FIELDS,
    FABRIC_FIELDS,
    LINK_ACTIVE,
    ROCE_FIELDS,
)

_AT = {name: i for i, name in enumerate(FABRIC_FIELDS)}
_LINK = ("link_state", "phys_state", "link_width", "link_gbps", "counters_saturated")


def split_rows(rows: list[tuple], nic_width: int) -> tuple[list[tuple], list[tuple]]:
    """(ts, nic, *NIC metrics, *fabric metrics) rows -> the NIC rows, and (ts, nic, *fabric)
    for the rows that have any fabric value."""
    keep = 2 + nic_width
    nic = [r[:keep] for r in rows]
    if not rows or len(rows[0]) == keep:
        return nic, []
    # A tuple compare runs in C: no Python work per value on the common all-null tail.
    none = (None,) * (len(rows[0]) - keep)
    fabric = [(r[0], r[1], *r[keep:]) for r in rows if r[keep:] != none]
    return nic, fabric


_ERRORS_SQL = f"""
INSERT INTO fabric_porterrors (nic_id, ts, {", ".join(ERROR_FIELDS)})
SELECT * FROM unnest(%s::int4[], %s::timestamptz[], {", ".join(["%s::int8[]"] * len(ERROR_FIELDS))})
ON CONFLICT (nic_id, ts) DO NOTHING
"""

_NEWER = "EXCLUDED.ts >= fabric_portlink.ts"
_LINK_SQL = f"""
INSERT INTO fabric_portlink (nic_id, ts, {", ".join(_LINK)}, congestion, nominal_gbps,
                             nominal_width, active_seen)
SELECT u.nic, u.ts, u.ls, u.ps, u.lw, u.lg, u.cs, u.cong::jsonb, u.ng, u.nw, u.act
FROM unnest(%s::int4[], %s::timestamptz[], %s::int2[], %s::int2[], %s::int2[], %s::float8[],
            %s::int2[], %s::text[], %s::float8[], %s::int2[], %s::timestamptz[])
     AS u(nic, ts, ls, ps, lw, lg, cs, cong, ng, nw, act)
ON CONFLICT (nic_id) DO UPDATE SET
    {", ".join(f"{c} = CASE WHEN {_NEWER} THEN EXCLUDED.{c} ELSE fabric_portlink.{c} END"
               for c in (*_LINK, "congestion"))},
    ts = GREATEST(fabric_portlink.ts, EXCLUDED.ts),
    nominal_width = CASE WHEN EXCLUDED.nominal_gbps > COALESCE(fabric_portlink.nominal_gbps, 0)
                         THEN EXCLUDED.nominal_width ELSE fabric_portlink.nominal_width END,
    nominal_gbps = GREATEST(fabric_portlink.nominal_gbps, EXCLUDED.nominal_gbps),
    active_seen = GREATEST(fabric_portlink.active_seen, EXCLUDED.active_seen)
"""


def _when(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def write(cur, rows: list[tuple]) -> None:
    """Store (ts, nic id, *fabric metrics) rows: each port's newest link state and nominal
    rate (``PortLink``), and the samples where an error counter rose (``PortErrors``)."""
    if not rows:
        return
    errors = [r for r in rows
              if any(r[2 + _AT[f]] for f in ERROR_FIELDS)]  # None and 0 are no error
    if errors:
        cols = [[r[1] for r in errors], [_when(r[0]) for r in errors]]
        cols += [[r[2 + _AT[f]] for r in errors] for f in ERROR_FIELDS]
        cur.execute(_ERRORS_SQL, cols)
    newest: dict[int, tuple] = {}
    nominal: dict[int, tuple[float, int | None]] = {}
    active: dict[int, float] = {}
    for r in rows:
        nic, values = r[1], r[2:]
        if nic not in newest or r[0] >= newest[nic][0]:
            newest[nic] = r
        gbps = values[_AT["link_gbps"]]
        if values[_AT["link_state"]] == LINK_ACTIVE:
            active[nic] = max(active.get(nic, r[0]), r[0])
            if gbps is not None and gbps > nominal.get(nic, (0.0, None))[0]:
                nominal[nic] = (gbps, values[_AT["link_width"]])
    nics = sorted(newest)
    link = [[newest[n][2 + _AT[c]] for n in nics] for c in _LINK]
    congestion = [json.dumps({f: newest[n][2 + _AT[f]] for f in ROCE_FIELDS
                              if newest[n][2 + _AT[f]] is not None}) for n in nics]
    cur.execute(_LINK_SQL, [
        nics, [_when(newest[n][0]) for n in nics], *link, congestion,
        [nominal.get(n, (None, None))[0] for n in nics],
        [nominal.get(n, (None, None))[1] for n in nics],
        [_when(active[n]) if n in active else None for n in nics],
    ])
