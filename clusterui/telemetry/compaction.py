"""Compaction: hot GPU rows older than the horizon become packed hour chunks and rollups.

Ingest COPYs GPU samples into the hot table (``telemetry_gpusample``). Every few minutes
(beat, ``clusterui.telemetry.compact``) this moves every hot row older than the *horizon*
into its (GPU, hour) chunk:

1. The horizon is the start of the clock hour ``RAW_HOT_MINUTES`` before now (with the
   default 10, an hour is packed from 10 minutes after it closed: the hot table holds the
   current hour and a little more, so a day's chart aggregates less than an hour of raw
   rows), and never later than the oldest sample the detectors have still to read
   (``clusterui.findings.runner.oldest_unread``): they read raw rows from the hot table only.
2. One closed hour at a time, oldest first (so memory is bounded by one hour of
   ``COMPACTION_GPUS_PER_TRANSACTION`` GPUs, whatever the backlog), for that many GPUs at a
   time, in one transaction: delete their hot rows of that hour, *returning* them (one
   statement: a row that ingest adds meanwhile is neither deleted nor lost, it waits for
   the next run); merge each (GPU, hour)
   with the chunk it already has (late data, spool replays; one sample per millisecond,
   the newest write wins); write the chunks and recompute their rollups (``packed``).
3. One run at a time: a session advisory lock; a second run started meanwhile returns at
   once. A run stops starting transactions after ``budget_s``; the next run goes on.
4. Then the NIC rollups: the (NIC, hour)s ingest marked due, once their hour has closed,
   are recomputed from their samples, ``NIC_HOURS_PER_TRANSACTION`` at a time
   (``nicrollup``), hot and packed alike, so there is no reason to wait
   ``RAW_HOT_MINUTES``: a batch arriving after its hour was rolled up marks it due again.
5. Then the NIC samples: the hot rows of every closed hour before the same horizon move
   into their (NIC, hour) packed rows, ``NIC_HOURS_PER_TRANSACTION`` NICs of one hour per
   transaction, merged with what that hour already has (``nicpack``).
6. Last (unless the budget stopped the run), each hot day partition (GPU and NIC) whose
   whole day lies before the horizon and that still takes more than its empty size is
   truncated: the
   DELETEs above leave a packed day's rows on disk as dead tuples, and its (gpu_id, ts)
   index whole, until a VACUUM (nothing here runs one, and autovacuum may be off) or until
   retention drops the partition. Each in its own short transaction: lock the partition
   (``ACCESS EXCLUSIVE``, waiting ``TRUNCATE_LOCK_TIMEOUT`` at most: ingest writing late
   rows into it, or a read, wins and the next run tries again), check it holds no row,
   ``TRUNCATE``. Under that lock no row can arrive between the check and the truncate; a
   row that came after the DELETEs keeps the partition as it is, for the next run.
   Truncated, not dropped: the partition stays, so ingest's cache of the partitions it
   created (``partitions._known``) stays true, and a late sample for that day lands in it
   and is merged by the next run as any late data (dropped, that sample's flush would find
   no partition; and a DROP locks the parent table, so all of ingest, for its duration).

``packed.raw_samples`` reads a GPU's (or a job's) samples at full resolution across both
tiers; ``telemetry_nic_samples`` (``nicpack.SAMPLES``) a NIC's.
"""

import datetime as dt
import logging
import time
import zlib
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from clusterui.telemetry import codec, nicpack, nicrollup, packed, partitions
from clusterui.telemetry.metrics import (
    GPU_CHUNK_TABLE,
    GPU_METRIC_NAMES,
    GPU_SAMPLE_TABLE,
    NIC_SAMPLE_TABLE,
)

log = logging.getLogger(__name__)

LOCK_KEY = zlib.crc32(b"clusterui.telemetry.compact")
HOUR = dt.timedelta(hours=1)
# (NIC, hour)s rolled up, or packed, per transaction: at 10 s, 360,000 raw rows.
NIC_HOURS_PER_TRANSACTION = 1000
_COLS = ", ".join(GPU_METRIC_NAMES)
# How long truncating a packed day's hot partition waits for its lock; then it is skipped
# until the next run (a lock wait also queues ingest and reads of that partition behind it).
TRUNCATE_LOCK_TIMEOUT = "3s"


@dataclass
class CompactResult:
    horizon: dt.datetime | None = None
    held_back: bool = False  # the detectors' progress set the horizon, not RAW_HOT_MINUTES
    transactions: int = 0
    rows: int = 0  # hot rows moved
    chunks: int = 0  # chunks written (new or merged)
    merged: int = 0  # of which merged with an existing chunk
    nic_hours: int = 0  # (NIC, hour)s whose rollups were recomputed
    nic_rows: int = 0  # hot NIC rows packed
    nic_packed: int = 0  # (NIC, hour) packed rows written (new or merged)
    nic_merged: int = 0  # of which merged with one already there
    truncated: int = 0  # hot day partitions truncated once their day was packed
    freed_bytes: int = 0  # what they took on disk beyond their empty size
    unfinished: bool = False  # stopped by the time budget: the next run goes on
    locked_out: bool = False
    seconds: float = 0.0


def floor_hour(t: dt.datetime) -> dt.datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def horizon(now: dt.datetime | None = None) -> tuple[dt.datetime, bool]:
    """(Where compaction stops, whether the detectors held it back.) Hot rows older than
    the horizon are packed; hour-aligned, so only closed hours are ever packed."""
    from clusterui.findings.runner import oldest_unread

    now = now or timezone.now()
    hot = floor_hour(now - dt.timedelta(minutes=settings.RAW_HOT_MINUTES))
    unread = oldest_unread(now)
    if unread is not None and floor_hour(unread) < hot:
        return floor_hour(unread), True
    return hot, False


def compact(now: dt.datetime | None = None, *, budget_s: float = 120.0,
            gpus_per_transaction: int | None = None) -> CompactResult:
    began = time.monotonic()
    result = CompactResult()
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        if not cur.fetchone()[0]:
            result.locked_out = True
            return result
    try:
        _compact(now, budget_s, gpus_per_transaction or settings.COMPACTION_GPUS_PER_TRANSACTION,
                 result, began)
        if not result.unfinished:
            _roll_up_nics(now, budget_s, result, began)
        if not result.unfinished:
            _pack_nics(budget_s, result, began)
        if not result.unfinished:
            _truncate_packed_days(budget_s, result, began)
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    result.seconds = time.monotonic() - began
    if result.nic_hours:
        log.info("NIC rollups: %d (NIC, hour)s recomputed", result.nic_hours)
    if result.nic_rows:
        log.info("NIC samples: %d hot rows into %d (NIC, hour) rows (%d merged)",
                 result.nic_rows, result.nic_packed, result.nic_merged)
    if result.rows or result.truncated:
        log.info("compaction up to %s: %d hot rows into %d chunks (%d merged), %d "
                 "transactions, %d hot partitions truncated (%.1f MB freed), %.1f s%s",
                 result.horizon, result.rows, result.chunks, result.merged,
                 result.transactions, result.truncated, result.freed_bytes / 1e6,
                 result.seconds, " (held back by the detectors)" if result.held_back else "")
    return result


def _compact(now, budget_s: float, per_txn: int, result: CompactResult, began: float) -> None:
    limit, result.held_back = horizon(now)
    result.horizon = limit
    days = _days_to_compact(limit, GPU_SAMPLE_TABLE)
    if not days:
        return
    starts = [packed.dt_to_ms(dt.datetime.combine(d, dt.time(), tzinfo=dt.UTC)) for d in days]
    packed.ensure_partitions(starts)
    # One closed hour at a time, oldest first: a transaction holds at most
    # ``per_txn`` GPUs x one hour of samples in memory, whatever the backlog.
    for hour in _hours_to_compact(days, limit):
        with connection.cursor() as cur:
            cur.execute(f"SELECT DISTINCT gpu_id FROM {GPU_SAMPLE_TABLE} "
                        "WHERE ts >= %s AND ts < %s", [hour, hour + HOUR])
            gpu_ids = sorted(r[0] for r in cur.fetchall())
        for i in range(0, len(gpu_ids), per_txn):
            if time.monotonic() - began > budget_s:
                result.unfinished = True
                return
            with transaction.atomic():
                _compact_gpus(gpu_ids[i:i + per_txn], hour, hour + HOUR, result)
            result.transactions += 1


def _roll_up_nics(now, budget_s: float, result: CompactResult, began: float) -> None:
    limit = floor_hour(now or timezone.now())  # every closed hour
    while True:
        if time.monotonic() - began > budget_s:
            result.unfinished = True
            return
        with transaction.atomic():
            pairs = nicrollup.take_due(limit, NIC_HOURS_PER_TRANSACTION)
            nicrollup.write_hours(pairs)
        if not pairs:
            return
        result.nic_hours += len(pairs)
        result.transactions += 1


def _pack_nics(budget_s: float, result: CompactResult, began: float) -> None:
    """The NICs' hot rows of the closed hours before the horizon into their packed rows
    (the module's docstring, step 5)."""
    days = _days_to_compact(result.horizon, NIC_SAMPLE_TABLE)
    if not days:
        return
    packed.ensure_partitions(
        [packed.dt_to_ms(dt.datetime.combine(d, dt.time(), tzinfo=dt.UTC)) for d in days])
    for hour in _hours_to_compact(days, result.horizon):
        nic_ids = nicpack.nics_with_rows(hour)
        for i in range(0, len(nic_ids), NIC_HOURS_PER_TRANSACTION):
            if time.monotonic() - began > budget_s:
                result.unfinished = True
                return
            with transaction.atomic():
                rows, written, merged = nicpack.pack_hour(
                    nic_ids[i:i + NIC_HOURS_PER_TRANSACTION], hour)
            result.nic_rows += rows
            result.nic_packed += written
            result.nic_merged += merged
            result.transactions += 1


def _truncate_packed_days(budget_s: float, result: CompactResult, began: float) -> None:
    """Truncate the hot partitions of the days before the horizon that hold no row (see the
    module's docstring, step 6)."""
    hot = [p for table in (GPU_SAMPLE_TABLE, NIC_SAMPLE_TABLE)
           for p in partitions.existing_partitions(table)]
    for name, day in hot:
        if dt.datetime.combine(day + dt.timedelta(days=1), dt.time(),
                               tzinfo=dt.UTC) > result.horizon:
            continue
        if time.monotonic() - began > budget_s:
            result.unfinished = True
            return
        # Its size, and its size when empty: no heap, a metapage per btree (TOAST's too).
        with connection.cursor() as cur:
            cur.execute(
                "SELECT pg_total_relation_size(c.oid), current_setting('block_size')::bigint "
                "* (SELECT count(*) FROM pg_index x WHERE x.indrelid IN (c.oid, c.reltoastrelid)) "
                "FROM pg_class c WHERE c.oid = %s::regclass", [name])
            size, empty = cur.fetchone()
        if size <= empty:
            continue  # truncated already, or never written to
        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("SELECT set_config('lock_timeout', %s, true)",  # SET LOCAL
                            [TRUNCATE_LOCK_TIMEOUT])
                cur.execute(f'LOCK TABLE "{name}" IN ACCESS EXCLUSIVE MODE')
                cur.execute(f'SELECT EXISTS (SELECT 1 FROM "{name}")')
                if cur.fetchone()[0]:
                    continue  # a late row: the next run packs it, then truncates
                cur.execute(f'TRUNCATE "{name}"')
                cur.execute("SELECT pg_total_relation_size(%s::regclass)", [name])
                freed = size - cur.fetchone()[0]
        except OperationalError as exc:
            if not isinstance(exc.__cause__, psycopg.errors.LockNotAvailable):
                raise
            log.info("hot partition %s not truncated: in use for over %s, the next run tries "
                     "again", name, TRUNCATE_LOCK_TIMEOUT)
            continue
        result.truncated += 1
        result.freed_bytes += freed


def _hours_to_compact(days: list[dt.date], limit: dt.datetime) -> list[dt.datetime]:
    """The clock hours of these days before the horizon, oldest first."""
    hours = []
    for day in days:
        t = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
        for _ in range(24):
            if t >= limit:
                break
            hours.append(t)
            t += HOUR
    return hours


def _days_to_compact(limit: dt.datetime, table: str) -> list[dt.date]:
    """The days of ``table``'s hot partitions that hold rows older than the horizon."""
    days = []
    for name, day in partitions.existing_partitions(table):
        if dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC) >= limit:
            continue
        with connection.cursor() as cur:
            cur.execute(f'SELECT EXISTS (SELECT 1 FROM "{name}" WHERE ts < %s)', [limit])
            if cur.fetchone()[0]:
                days.append(day)
    return days


def _compact_gpus(gpu_ids: list[int], lo: dt.datetime, hi: dt.datetime,
                  result: CompactResult) -> None:
    with connection.cursor() as cur:
        cur.execute(
            f"DELETE FROM {GPU_SAMPLE_TABLE} WHERE gpu_id = ANY(%s) AND ts >= %s AND ts < %s "
            f"RETURNING gpu_id, {packed.TS_MS}, job_id, {_COLS}",
            [gpu_ids, lo, hi])
        rows = cur.fetchall()
    if not rows:
        return
    hot = packed.blocks_from_rows(rows)
    lo = min(packed.ms_to_dt(b.start) for _, b in hot)
    hi = max(packed.ms_to_dt(b.start) for _, b in hot) + HOUR
    old = {}
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT gpu_id, (extract(epoch FROM start) * 1000)::bigint, data "
            f"FROM {GPU_CHUNK_TABLE} WHERE gpu_id = ANY(%s) AND start >= %s AND start < %s",
            [gpu_ids, lo, hi])
        for gpu_id, start, data in cur.fetchall():
            old[(gpu_id, start)] = data
    blocks = []
    for gpu_id, block in hot:
        data = old.get((gpu_id, block.start))
        if data is not None:
            block = packed.merge(codec.unpack(bytes(data)), block)
            result.merged += 1
        blocks.append((gpu_id, block))
    packed.write_hours(blocks)
    result.rows += len(rows)
    result.chunks += len(blocks)
