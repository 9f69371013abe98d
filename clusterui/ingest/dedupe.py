"""One stored copy per (GPU, ts), (NIC, ts) and (job, node, ts), whatever batch carried it.

A collector restarted with a new boot id resends its spool; a node's batches can arrive
twice under different keys. The ingest log's key ``(node, boot_id, seq)`` cannot see that,
so the writer checks the rows themselves, cheaply:

* **The node's data high-water mark.** ``inventory_node.last_seen`` is the newest data time
  ever stored for the node (the writer only ever raises it, to each batch's newest sample).
  The writer reads it ``FOR NO KEY UPDATE`` at the start of the flush
  (``writer._upsert_nodes``): consumers storing batches of the same node serialise on that
  row and each sees the other's commit. A row newer than the mark cannot duplicate anything stored: the live
  case, which costs one comparison per *batch* (its oldest sample against the mark).
* **Late rows** (at or before the mark: spool replays, resends) are looked up in the
  stored rows with one statement per table per flush, per (device, hour) a range scan of
  the ``(device, ts)`` btree; GPU rows also against the packed chunks of their hours
  (``telemetry_gpuchunk``), decoding only the chunk's timestamps, in the same statement
  (one snapshot: a compaction committing meanwhile neither hides nor doubles a row).
* **Within the flush**, batches of one node whose time spans overlap are deduplicated
  against each other (the first in the flush wins).

Duplicates are not stored; each batch's ingest-log row counts them by reason
(``duplicates``, ``duplicate_reasons``): they are not refusals.
"""

import struct
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from clusterui.telemetry import codec

GPU_REASON = "gpu_samples: duplicate of a stored sample (gpu, ts)"
NIC_REASON = "nic_samples: duplicate of a stored sample (nic, ts)"
JOB_REASON = "job_samples: duplicate of a stored sample (job, node, ts)"
EVENT_REASON = "events: duplicate of a stored event (gpu, ts, kind, code, message)"

_HOUR_US = 3_600_000_000
# PostgreSQL's epoch (2000-01-01) in Unix microseconds: rows carry PostgreSQL micros.
_PG_EPOCH_UNIX_US = 946_684_800_000_000
# Rows within this of the mark count as late: the mark went through a datetime, the rows
# through numpy, and they may round a microsecond apart. Checking a few more rows is free.
MARK_SLACK_US = 1_000
_PG_TS = "timestamptz '2000-01-01 00:00:00+00' + {} * interval '1 microsecond'"
_US = "(extract(epoch FROM {} - timestamptz '2000-01-01 00:00:00+00') * 1000000)::int8"


def _rows_of(section: str) -> property:
    """A section's rows, made from its columns when first read; rows set (the duplicates
    dropped) replace the columns."""
    def get(self) -> list[tuple]:
        rows = self._rows.get(section)
        if rows is None:
            rows = self._rows[section] = list(zip(*getattr(self, f"{section}_columns"),
                                                  strict=True))
        return rows

    def put(self, rows: list[tuple]) -> None:
        self._rows[section] = rows

    return property(get, put)


@dataclass
class Pending:
    """One batch's rows in the flush, as the writer COPYs them: (PostgreSQL micros,
    device id, ...). Given as columns (one sequence per column, in that order; empty: no
    rows), as the writer builds them; ``gpu``, ``nic`` and ``job`` are the rows, made from
    the columns only when read (late or overlapping rows: a live batch's never are), and
    rows set there (the duplicates dropped) replace the columns."""

    node: tuple[str, str]
    node_id: int
    lo_us: int | None  # the batch's oldest and newest data time
    hi_us: int | None
    gpu_columns: list
    nic_columns: list
    job_columns: list
    dropped: Counter = field(default_factory=Counter)
    jobs: frozenset[int] = frozenset()  # the jobs the batch attributes samples to
    _rows: dict = field(default_factory=dict, repr=False)

    def columns(self, section: str) -> list:
        """The section's columns as they are now (after any rows were dropped)."""
        rows = self._rows.get(section)
        if rows is None:
            return getattr(self, f"{section}_columns")
        return list(zip(*rows, strict=True))

    def count(self, section: str) -> int:
        rows = self._rows.get(section)
        if rows is not None:
            return len(rows)
        columns = getattr(self, f"{section}_columns")
        return len(columns[0]) if columns else 0

    def times(self, section: str):
        """The section's times (PostgreSQL micros), without making rows."""
        rows = self._rows.get(section)
        if rows is not None:
            return [r[0] for r in rows]
        columns = getattr(self, f"{section}_columns")
        return columns[0] if columns else ()

    gpu = _rows_of("gpu")
    nic = _rows_of("nic")
    job = _rows_of("job")

    @property
    def total_dropped(self) -> int:
        return sum(self.dropped.values())


def drop_duplicates(cur, pending: list[Pending], marks: dict[tuple[str, str], int | None]
                    ) -> None:
    """Remove from ``pending`` every row stored before or earlier in this flush, counting
    them in each one's ``dropped``. ``marks``: each node's high-water mark before this flush
    (PostgreSQL micros; None: nothing stored yet)."""
    by_node: dict[tuple[str, str], list[Pending]] = defaultdict(list)
    for p in pending:
        by_node[p.node].append(p)
    for group in by_node.values():
        if len(group) > 1 and _overlap(group):
            _within_flush(group)
    late = []
    for p in pending:
        mark = marks.get(p.node)
        if mark is None or p.lo_us is None or p.lo_us > mark + MARK_SLACK_US:
            continue  # live: newer than anything stored for this node
        late.append((p, mark + MARK_SLACK_US))
    if not late:
        return
    gpu = [(p, [r for r in p.gpu if r[0] <= m]) for p, m in late]
    nic = [(p, [r for r in p.nic if r[0] <= m]) for p, m in late]
    job = [(p, [r for r in p.job if r[0] <= m]) for p, m in late]
    _drop(gpu, _stored_gpu(cur, [r for _p, rows in gpu for r in rows]), "gpu", GPU_REASON)
    _drop(nic, _stored_nic(cur, [r for _p, rows in nic for r in rows]), "nic", NIC_REASON)
    _drop(job, _stored_jobs(cur, [(p.node_id, r) for p, rows in job for r in rows]), "job",
          JOB_REASON, per_node=True)


def _overlap(group: list[Pending]) -> bool:
    spans = sorted((p.lo_us, p.hi_us) for p in group if p.lo_us is not None)
    return any(b[0] <= a[1] for a, b in zip(spans, spans[1:], strict=False))


def _within_flush(group: list[Pending]) -> None:
    for attr, reason in (("gpu", GPU_REASON), ("nic", NIC_REASON), ("job", JOB_REASON)):
        seen: set[tuple[int, int]] = set()
        for p in group:
            rows = getattr(p, attr)
            keep = []
            for r in rows:
                key = (r[1], r[0])
                if key in seen:
                    p.dropped[reason] += 1
                else:
                    seen.add(key)
                    keep.append(r)
            if len(keep) != len(rows):
                setattr(p, attr, keep)


def _drop(candidates, stored: set[tuple], attr: str, reason: str, *, per_node=False
          ) -> None:
    if not stored:
        return
    for p, rows in candidates:
        def key(r, p=p):
            return (p.node_id, r[1], r[0]) if per_node else (r[1], r[0])

        if not rows or not any(key(r) in stored for r in rows):
            continue
        keep = [r for r in getattr(p, attr) if key(r) not in stored]
        p.dropped[reason] += len(getattr(p, attr)) - len(keep)
        setattr(p, attr, keep)


def _ranges(rows, key=lambda r: r[1]) -> tuple[list, list, list]:
    """Per (device, hour) of these rows, the device and the [lo, hi] micros they span."""
    spans: dict[tuple, list[int]] = {}
    for r in rows:
        k = (key(r), r[0] - r[0] % _HOUR_US)
        s = spans.get(k)
        if s is None:
            spans[k] = [r[0], r[0]]
        elif r[0] < s[0]:
            s[0] = r[0]
        elif r[0] > s[1]:
            s[1] = r[0]
    keys = sorted(spans)
    return [k[0] for k in keys], [spans[k][0] for k in keys], [spans[k][1] for k in keys]


def _stored(cur, table: str, column: str, rows) -> set[tuple[int, int]]:
    """(device, micros) of the stored rows among ``rows``' (device, hour) ranges."""
    if not rows:
        return set()
    dev, lo, hi = _ranges(rows)
    cur.execute(
        f"""
        SELECT u.dev, {_US.format("s.ts")}
        FROM unnest(%b::int4[], %b::int8[], %b::int8[]) AS u(dev, lo, hi)
        CROSS JOIN LATERAL (
            SELECT ts FROM {table} s
            WHERE s.{column} = u.dev AND s.ts >= {_PG_TS.format("u.lo")}
              AND s.ts <= {_PG_TS.format("u.hi")}) s
        WHERE s.ts >= {_PG_TS.format("%b::int8")} AND s.ts <= {_PG_TS.format("%b::int8")}
        """,
        (dev, lo, hi, min(lo), max(hi)), binary=True)
    return set(cur.fetchall())


def _stored_jobs(cur, rows) -> set[tuple[int, int, int]]:
    """Like ``_stored`` for job rows, which are per (job, node): ``rows`` are (node, row);
    returns (node, job, micros)."""
    if not rows:
        return set()
    by_node: dict[int, list] = defaultdict(list)
    for node_id, r in rows:
        by_node[node_id].append(r)
    dev, lo, hi, nodes = [], [], [], []
    for node_id, rs in by_node.items():
        d, a, b = _ranges(rs)
        dev += d
        lo += a
        hi += b
        nodes += [node_id] * len(d)
    cur.execute(
        f"""
        SELECT u.node, u.dev, {_US.format("s.ts")}
        FROM unnest(%b::int4[], %b::int4[], %b::int8[], %b::int8[]) AS u(dev, node, lo, hi)
        CROSS JOIN LATERAL (
            SELECT ts FROM telemetry_jobsample s
            WHERE s.job_id = u.dev AND s.node_id = u.node AND s.ts >= {_PG_TS.format("u.lo")}
              AND s.ts <= {_PG_TS.format("u.hi")}) s
        WHERE s.ts >= {_PG_TS.format("%b::int8")} AND s.ts <= {_PG_TS.format("%b::int8")}
        """,
        (dev, nodes, lo, hi, min(lo), max(hi)), binary=True)
    return set(cur.fetchall())


def _stored_gpu(cur, rows) -> set[tuple[int, int]]:
    """(GPU, micros) of the rows already stored, hot or packed. A packed sample is kept
    at the millisecond (``codec``), so a row matches a packed one at its millisecond."""
    if not rows:
        return set()
    dev, lo, hi = _ranges(rows)
    hours = [a - a % _HOUR_US for a in lo]
    cur.execute(
        f"""
        SELECT u.dev, {_US.format("s.ts")}, NULL::bytea
        FROM unnest(%b::int4[], %b::int8[], %b::int8[]) AS u(dev, lo, hi)
        CROSS JOIN LATERAL (
            SELECT ts FROM telemetry_gpusample s
            WHERE s.gpu_id = u.dev AND s.ts >= {_PG_TS.format("u.lo")}
              AND s.ts <= {_PG_TS.format("u.hi")}) s
        WHERE s.ts >= {_PG_TS.format("%b::int8")} AND s.ts <= {_PG_TS.format("%b::int8")}
        UNION ALL
        SELECT u.dev, u.hour, c.data
        FROM unnest(%b::int4[], %b::int8[]) AS u(dev, hour)
        JOIN telemetry_gpuchunk c
          ON c.gpu_id = u.dev AND c.start = {_PG_TS.format("u.hour")}
        WHERE c.start >= {_PG_TS.format("%b::int8")} AND c.start <= {_PG_TS.format("%b::int8")}
        """,
        (dev, lo, hi, min(lo), max(hi), dev, hours, min(hours), max(hours)), binary=True)
    found: set[tuple[int, int]] = set()
    packed_ms: dict[int, set[int]] = defaultdict(set)
    for gpu, us, data in cur.fetchall():
        if data is None:
            found.add((gpu, us))
        else:
            packed_ms[gpu].update(chunk_timestamps(bytes(data)).tolist())
    return found | _packed_matches(rows, packed_ms)


def _packed_matches(rows, packed_ms: dict[int, set[int]]) -> set[tuple[int, int]]:
    """(device, micros) of the rows whose millisecond is among their device's packed
    samples' (``packed_ms``: device -> Unix ms)."""
    return {(r[1], r[0]) for r in rows
            if (stamps := packed_ms.get(r[1])) and _ms(r[0]) in stamps}


def _stored_nic(cur, rows) -> set[tuple[int, int]]:
    """(NIC, micros) of the rows already stored, hot (``_stored``) or packed: a packed
    sample is kept at the millisecond (``clusterui.telemetry.nicpack``), so a row matches
    a packed one at its millisecond."""
    found = _stored(cur, "telemetry_nicsample", "nic_id", rows)
    if not rows:
        return found
    dev, lo, _hi = _ranges(rows)
    hours = [a - a % _HOUR_US for a in lo]
    cur.execute(
        f"""
        SELECT u.dev, {_US.format("p.hour")}, p.ts_ms
        FROM unnest(%b::int4[], %b::int8[]) AS u(dev, hour)
        JOIN telemetry_nicpack p ON p.nic_id = u.dev AND p.hour = {_PG_TS.format("u.hour")}
        WHERE p.hour >= {_PG_TS.format("%b::int8")} AND p.hour <= {_PG_TS.format("%b::int8")}
        """,
        (dev, hours, min(hours), max(hours)), binary=True)
    packed_ms: dict[int, set[int]] = defaultdict(set)
    for nic, hour_us, offsets in cur.fetchall():
        start_ms = (hour_us + _PG_EPOCH_UNIX_US) // 1000
        packed_ms[nic].update(start_ms + o for o in offsets)
    return found | _packed_matches(rows, packed_ms)


def _ms(pg_us: int) -> int:
    """A row's time as a packed chunk keeps it: Unix ms, rounded like compaction rounds
    (``packed.TS_MS``)."""
    return (pg_us + _PG_EPOCH_UNIX_US + 500) // 1000


def chunk_timestamps(blob: bytes) -> np.ndarray:
    """A chunk's sample times (Unix ms) without decoding its values: only the first
    column's bytes are inflated (``codec``'s layout: header, then ``ts`` first)."""
    version, compressor = struct.unpack_from("<BB", blob)
    if version != codec.VERSION or compressor != codec.ZLIB:
        return codec.unpack(blob).ts  # a format this shortcut does not know
    inflate = zlib.decompressobj()
    head = inflate.decompress(memoryview(blob)[2:], 12 + 1 + 8 + 1)
    start, n = struct.unpack_from("<qI", head)
    flags, width = head[12], head[21]
    if flags:  # never written for ts, which has no nulls: take the slow, sure way
        return codec.unpack(blob).ts
    need = 22 + (n - 1) * width
    body = head + inflate.decompress(inflate.unconsumed_tail, need - len(head))
    offsets, _pos = codec._get_ints(memoryview(body), 13, n)
    return offsets + start
