"""Storing validated batches: inventory upserts, the ingest log and bulk COPY of samples.

Any number of batches go in one transaction (the bulk consumer stores hundreds at once;
the Celery task one). Its first writes are the batches' keys in the ingest log, inserted
together with ``ON CONFLICT DO NOTHING``: a key already there means that batch was stored
before (a redelivery) and nothing else of it is written. Samples go in with one binary
``COPY`` per table for all the batches, never row by row; nodes and the "latest" tables with
one statement each.

Each (GPU, ts), (NIC, ts) and (job, node, ts) is stored once, whatever batch carried it
(``dedupe``: free for live data, one lookup per table per flush for late data). Samples
outside the days ingest may create partitions for (``partitions.ingest_window``: older than
raw retention, too far ahead) are refused per item here too, whatever validation let by.
"""

import datetime as dt
import logging
from collections import Counter
from dataclasses import dataclass, replace
from itertools import chain, repeat
from operator import is_

import numpy as np
import psycopg
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from clusterui.fabric import store as fabric_store
from clusterui.findings.late import LATE_LOCK_KEY
from clusterui.gpuhealth.store import store_health
from clusterui.ingest import dedupe, inventory_cache, prepare
from clusterui.ingest.prepare import Prepared
from clusterui.ingest.validate import Batch
from clusterui.telemetry import nicrollup, partitions, pgcopy
from clusterui.telemetry.metrics import (
    GPU_METRIC_NAMES,
    GPU_METRICS,
    GPU_SAMPLE_COLUMNS,
    GPU_SAMPLE_TABLE,
    JOB_METRICS,
    JOB_SAMPLE_COLUMNS,
    JOB_SAMPLE_TABLE,
    NIC_METRICS,
    NIC_SAMPLE_COLUMNS,
    NIC_SAMPLE_TABLE,
)
from clusterui.telemetry.timebounds import UNIX_EPOCH

log = logging.getLogger(__name__)
UTC = dt.UTC
_EPOCH = UNIX_EPOCH

# Binary COPY needs each column's exact type.
_BINARY = {"real": "float4", "integer": "int4", "bigint": "int8", "double precision": "float8"}
# The time column goes as int8: a binary timestamptz *is* microseconds since 2000-01-01 UTC,
# computed for a whole column at once (``_pg_micros``), not a datetime per row.
GPU_COPY_TYPES = ("int8", "int4", "int4", *(_BINARY[m.sql_type] for m in GPU_METRICS))
NIC_COPY_TYPES = ("int8", "int4", *(_BINARY[m.sql_type] for m in NIC_METRICS))
JOB_COPY_TYPES = ("int8", "int4", "int4", *(_BINARY[m.sql_type] for m in JOB_METRICS))


@dataclass
class StoreResult:
    batch_id: int | None
    duplicate: bool
    gpu_samples: int = 0
    nic_samples: int = 0
    job_samples: int = 0
    rejected: int = 0
    duplicates: int = 0  # samples and events already stored (another boot id, a resend)


_dt = prepare.dt_of
_pg_micros = prepare.pg_micros
_span = prepare.span
_SECTIONS = prepare.SECTIONS
_PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=UTC)
_HOUR_US = 3_600_000_000
# Rows per slice of a sample COPY (``_copy``).
_COPY_SLICE_ROWS = 4096


def _from_pg_micros(micros: int) -> dt.datetime:
    return _PG_EPOCH + dt.timedelta(microseconds=micros)


def _refuse_outside(batch: Batch, first: dt.date, last: dt.date) -> bool:
    """Refuse, per item, the samples on days ingest may not create partitions for (older
    than raw retention; later than the latest allowed time). True if any were."""
    lo = (dt.datetime.combine(first, dt.time(), tzinfo=UTC) - _EPOCH).total_seconds()
    hi = (dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), tzinfo=UTC)
          - _EPOCH).total_seconds()
    refused = False
    for section, attr in _SECTIONS:
        rows = getattr(batch, attr)
        if not rows or all(lo <= r[0] < hi for r in rows):
            continue
        keep = []
        for r in rows:
            if r[0] < lo:
                batch.reject(f"{section}: ts older than the raw retention "
                             f"({settings.RAW_RETENTION_DAYS} days): not stored",
                             f"ts {r[0]!r} ({_dt(r[0]):%Y-%m-%d %H:%M:%S} UTC)")
            elif r[0] >= hi:
                batch.reject(f"{section}: ts beyond the latest day ingest accepts: not stored",
                             f"ts {r[0]!r} ({_dt(r[0]):%Y-%m-%d %H:%M:%S} UTC)")
            else:
                keep.append(r)
        setattr(batch, attr, keep)
        refused = True
    return refused


def store_batch(batch: Batch, *, received_at: dt.datetime | None = None) -> StoreResult:
    return store_batches([batch], received_at=received_at)[0]


def store_batches(batches: list[Batch], *, received_at: dt.datetime | None = None
                  ) -> list[StoreResult]:
    """Store the batches in one transaction; one result per batch, in order.

    All or nothing: an error rolls every batch back (the caller retries, or stores them one
    by one to find the bad one).
    """
    if not batches:
        return []
    received_at = received_at or dt.datetime.now(UTC)
    window = partitions.ingest_window()
    spans = [Prepared.of(b).span for b in batches]
    # The window in Unix seconds, compared as ``_refuse_outside`` compares each row.
    first = (dt.datetime.combine(window[0], dt.time(), tzinfo=UTC) - _EPOCH).total_seconds()
    end = first + ((window[1] - window[0]).days + 1) * 86_400
    for i, (batch, (lo, hi)) in enumerate(zip(batches, spans, strict=True)):
        # Cheap test first (the span): only a batch reaching outside is looked at per row.
        if lo is not None and (lo < first or hi >= end) and _refuse_outside(batch, *window):
            spans[i] = Prepared.of(batch).span  # its rows changed: prepared again
    days = set().union(*(Prepared.of(b).days for b in batches))
    partitions.ensure_partitions(days, window=window)
    try:
        return _store(batches, spans, received_at)
    except (psycopg.errors.CheckViolation, IntegrityError) as exc:
        # Another process dropped a partition this one believed in: relearn and retry once.
        # (Django's IntegrityError wraps psycopg's CheckViolation.)
        if "no partition" not in str(exc):
            raise
        partitions.forget_known()
        # What the rolled-back transaction remembered (a new GPU's id) does not exist.
        inventory_cache.forget()
        partitions.ensure_partitions(days, window=window)
        return _store(batches, spans, received_at)


def _store(batches: list[Batch], spans, received_at: dt.datetime) -> list[StoreResult]:
    seen = [
        _dt(hi if hi is not None else b.sent_at) or received_at
        for b, (_lo, hi) in zip(batches, spans, strict=True)
    ]
    results: list[StoreResult] = []
    pending: list[dedupe.Pending] = []
    touch = _Touch()  # unchanged inventories whose data moved on (``inventory_cache.behind``)
    running, ended = set(), set()  # the jobs' database ids as this flush's batches report them
    fabric_rows: list[tuple] = []  # (ts, nic id, *fabric metrics): ``clusterui.fabric``
    # wrap_database_errors: psycopg's errors from the raw cursor become Django's, which is
    # what callers (the Celery task's retry list, the bulk consumer) catch.
    with transaction.atomic(), connection.cursor() as wrapper, connection.wrap_database_errors:
        # A server-binding psycopg cursor: COPY needs psycopg's own, and parameters sent
        # apart from the query (in binary) cost no per-element quoting of the arrays.
        cur = psycopg.Cursor(wrapper.cursor.connection)
        # First, before any row is locked: a detector pass running now (it holds the lock
        # exclusively) commits before this flush reads how far the pass got (``_mark_late``),
        # and no pass starts until this flush committed. Shared: flushes never wait on each
        # other.
        cur.execute("SELECT pg_advisory_xact_lock_shared(%s)", (LATE_LOCK_KEY,))
        nodes, marks, quiet = _upsert_nodes(cur, batches, seen, received_at)
        batch_ids = _log_batches(cur, batches, spans, nodes, received_at)
        _count_runs(cur, batches, batch_ids, nodes, received_at)
        for batch, when, batch_id, (lo, hi) in zip(batches, seen, batch_ids, spans,
                                                    strict=True):
            if batch_id is None:
                results.append(StoreResult(batch_id=None, duplicate=True))
                continue
            node_id, cluster_id = nodes[(batch.cluster, batch.node)]
            gpu_ids, behind = _cached("gpus", node_id, batch.gpus, when, _upsert_gpus, cur,
                                      batch, node_id, cluster_id, when, batch_id)
            if behind:
                touch.add("gpus", gpu_ids.values(), when)
            if gpu_ids.refused:  # another cluster's GPUs: their rows and events go too
                batch = _without_refused_gpus(cur, batch, gpu_ids.refused, batch_id)
            nic_ids, behind = _cached("nics", node_id, batch.nics, when, _upsert_nics, cur,
                                      batch, node_id, when)
            if behind:
                touch.add("nics", nic_ids.values(), when)
            job_ids, behind = _cached("jobs", node_id, [batch.jobs, gpu_ids], when,
                                      _upsert_jobs, cur, batch, cluster_id, node_id, gpu_ids,
                                      when)
            for ext, reported in batch.jobs.items():
                if ext in job_ids:
                    (running if reported["ended_at"] is None else ended).add(job_ids[ext])
            if behind:  # the job rows' own last_seen is ``_touch_jobs``'s
                touch.add("job_gpus", ((job_ids[j["id"]], gpu_ids[g])
                                       for j in batch.jobs.values() for g in j["gpus"]
                                       if g in gpu_ids and j["id"] in job_ids), when)
            # Column-wise, at C speed: batch-local references become database ids, times
            # become PostgreSQL's microseconds.
            # Kept as columns (``dedupe.Pending`` makes rows only of late batches).
            # (``prepare``: done where the batch was validated, by the bulk consumer.)
            prep = Prepared.of(batch)
            g = n = j = ()
            if prep.gpu:
                ts, gpu, job, *values = prep.gpu
                g = [ts, list(map(gpu_ids.__getitem__, gpu)), list(map(job_ids.get, job)),
                     *values]
            if prep.nic:
                ts, nic, *values = prep.nic
                n = [ts, list(map(nic_ids.__getitem__, nic)), *values]
            fabric_rows.extend((r[0], nic_ids[r[1]], *r[2:]) for r in batch.fabric_rows)
            if prep.job:
                ts, job, *values = prep.job
                j = [ts, list(map(job_ids.__getitem__, job)), [node_id] * len(ts), *values]
            events_stored_before = _insert_events(cur, batch, gpu_ids, batch_id)
            store_health(cur, batch.gpu_health, gpu_ids)
            span_us = _pg_micros([lo, hi]) if lo is not None else (None, None)
            pending.append(dedupe.Pending((batch.cluster, batch.node), node_id, *span_us,
                                          g, n, j, jobs=frozenset(job_ids.values())))
            if events_stored_before:
                pending[-1].dropped[dedupe.EVENT_REASON] += events_stored_before
            results.append(StoreResult(
                batch_id=batch_id, duplicate=False, rejected=batch.rejected_total))
        touch.write(cur)
        # Rows stored before (another boot id, a resend) or twice in this flush are dropped.
        dedupe.drop_duplicates(cur, pending, marks)
        counted = []
        for p, result in zip(pending, (r for r in results if not r.duplicate), strict=True):
            result.gpu_samples, result.nic_samples = p.count("gpu"), p.count("nic")
            result.job_samples, result.duplicates = p.count("job"), p.total_dropped
            if p.dropped:
                counted.append((result, p.dropped))
        _count_duplicates(cur, counted)
        _mark_late(cur, pending, marks, quiet, received_at)
        # The sample rows as columns (numpy, one array per column), for the COPYs, the
        # jobs' times and the "latest" tables alike.
        gpu_cols = _columns(GPU_SAMPLE_COLUMNS, GPU_COPY_TYPES,
                            [p.columns("gpu") for p in pending])
        nic_cols = _columns(NIC_SAMPLE_COLUMNS, NIC_COPY_TYPES,
                            [p.columns("nic") for p in pending])
        job_cols = _columns(JOB_SAMPLE_COLUMNS, JOB_COPY_TYPES,
                            [p.columns("job") for p in pending])
        _touch_jobs(cur, gpu_cols, job_cols, received_at, running - ended)
        _copy(cur, GPU_SAMPLE_TABLE, gpu_cols)
        _copy(cur, NIC_SAMPLE_TABLE, nic_cols)
        # The (NIC, hour)s written into: their rollups are due (compaction recomputes them).
        if nic_cols:
            ts, nic_ids = nic_cols[0][2], nic_cols[1][2]
            nicrollup.mark_due(cur, zip(nic_ids.tolist(), (ts - ts % _HOUR_US).tolist(),
                                        strict=True))
        _copy(cur, JOB_SAMPLE_TABLE, job_cols)
        _update_latest(cur, gpu_cols, nic_cols)
        fabric_store.write(cur, fabric_rows)
    return results


# What this process last wrote of each job's times: {job id: (data time in PostgreSQL
# microseconds, arrival time)}. Bounded like the inventory cache.
_JOB_TIMES: dict[int, tuple[int, dt.datetime]] = {}
_JOB_TIMES_MAX = 200_000
# A job's times are written when its data moved on by a minute, or its arrival time is a
# minute old (at most a quarter of JOB_STALE_AFTER_S): writing every job on every flush cost
# 7-13 % of node-sized ingest (measured). ``close_stale_jobs`` takes the exact end from the
# raw samples after ``last_seen``.
_SEEN_EVERY_US = 60_000_000


def _reported_every() -> dt.timedelta:
    return dt.timedelta(seconds=min(60.0, settings.JOB_STALE_AFTER_S / 4))


def _newest_per_job(gpu: list[tuple], job: list[tuple]) -> dict[int, int]:
    """{job id: its newest sample time (PostgreSQL microseconds)} over the GPU rows (their
    job, where they have one) and the job rows, of the flush's columns (``_columns``)."""
    ids, stamps = [], []
    for cols, at in ((gpu, 2), (job, 1)):
        if not cols:
            continue
        _name, _kind, job_ids, nulls = cols[at]
        ts = cols[0][2]
        if nulls is not None:
            job_ids, ts = job_ids[~nulls], ts[~nulls]
        ids.append(job_ids)
        stamps.append(ts)
    job_ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    if not len(job_ids):
        return {}
    ts = np.concatenate(stamps)
    order = np.lexsort((ts, job_ids))  # by job, then time: each job's last is its newest
    job_ids, ts = job_ids[order], ts[order]
    last = np.append(job_ids[1:] != job_ids[:-1], True)
    return dict(zip(job_ids[last].tolist(), ts[last].tolist(), strict=True))


def _touch_jobs(cur, gpu: list[tuple], job: list[tuple], received_at: dt.datetime,
                running: set[int]) -> None:
    """Keep each job's data time (newest sample) and arrival time fresh to within a minute, with
    one statement per flush. The job upsert itself is skipped while a node's inventory is
    unchanged (``inventory_cache``), and during a back-fill a minute of wall-clock time is
    hours of data: a job's end, when no collector reports it any more, and whether it is
    still being reported must not lag by that.

    ``running``: the jobs this flush's batches report running (none reports them ended).
    One ended for silence (``close_stale_jobs``) with data newer than its end runs again,
    as the upsert's rule has it (``_upsert_jobs``): the upsert alone did not do it where
    the node's first batch after the end held older data (a back-fill overlapping what
    was stored, batches out of order) and its next ones were only touched here."""
    newest = _newest_per_job(gpu, job)
    due = []
    refresh = _reported_every()
    for job, seen in newest.items():
        known = _JOB_TIMES.get(job)
        if (known is None or seen - known[0] >= _SEEN_EVERY_US
                or received_at - known[1] >= refresh):
            due.append(job)
    if not due:
        return
    due.sort()  # one lock order for concurrent flushes
    revive = "u.running AND j.ended_at IS NOT NULL AND u.seen > j.ended_at"  # old row's
    cur.execute(
        f"""
        UPDATE jobs_job j SET last_seen = GREATEST(j.last_seen, u.seen),
                              reported_at = GREATEST(j.reported_at, %s),
                              state = CASE WHEN {revive} THEN 'running' ELSE j.state END,
                              ended_at = CASE WHEN {revive} THEN NULL ELSE j.ended_at END,
                              exit_state = CASE WHEN {revive} THEN '' ELSE j.exit_state END,
                              exit_code = CASE WHEN {revive} THEN NULL ELSE j.exit_code END,
                              exit_signal = CASE WHEN {revive} THEN NULL ELSE j.exit_signal END
        FROM unnest(%b::bigint[], %b::timestamptz[], %b::bool[]) AS u(id, seen, running)
        WHERE j.id = u.id
        """,
        (received_at, due, [_from_pg_micros(newest[j]) for j in due],
         [j in running for j in due]),
        binary=True,
    )
    written = {job: (newest[job], received_at) for job in due}

    def remember():  # only once committed: a retried flush must write them again
        if len(_JOB_TIMES) + len(written) > _JOB_TIMES_MAX:
            _JOB_TIMES.clear()
        _JOB_TIMES.update(written)

    transaction.on_commit(remember)


def _count_runs(cur, batches: list[Batch], batch_ids, nodes, received_at) -> None:
    """Fold the batches logged now into their runs' (node, boot id) sequence range and
    count (``IngestRun``: the health page's gaps), one statement, in key order."""
    runs: dict[tuple[int, str], list[int]] = {}
    for batch, batch_id in zip(batches, batch_ids, strict=True):
        if batch_id is None or batch.seq < 1:
            continue
        key = (nodes[(batch.cluster, batch.node)][0], batch.boot_id)
        run = runs.get(key)
        if run is None:
            runs[key] = [batch.seq, batch.seq, 1]
        else:
            run[0], run[1], run[2] = min(run[0], batch.seq), max(run[1], batch.seq), run[2] + 1
    if not runs:
        return
    keys = sorted(runs)
    cur.execute(
        """
        INSERT INTO ingest_ingestrun (node_id, boot_id, first_seq, last_seq, batches,
                                      first_received, last_received)
        SELECT u.node, u.boot, u.lo, u.hi, u.n, %s, %s
        FROM unnest(%b::bigint[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[])
             AS u(node, boot, lo, hi, n)
        ON CONFLICT ON CONSTRAINT ingestrun_node_boot_uniq DO UPDATE SET
            first_seq = LEAST(ingest_ingestrun.first_seq, EXCLUDED.first_seq),
            last_seq = GREATEST(ingest_ingestrun.last_seq, EXCLUDED.last_seq),
            batches = ingest_ingestrun.batches + EXCLUDED.batches,
            last_received = GREATEST(ingest_ingestrun.last_received, EXCLUDED.last_received)
        """,
        (received_at, received_at, [k[0] for k in keys], [k[1] for k in keys],
         [runs[k][0] for k in keys], [runs[k][1] for k in keys], [runs[k][2] for k in keys]),
        binary=True,
    )


def _count_duplicates(cur, counted: list[tuple[StoreResult, dict]]) -> None:
    """Record on their ingest-log rows the samples of these batches that were duplicates
    (stored counts are what was stored)."""
    if not counted:
        return
    cur.execute(
        """
        UPDATE ingest_ingestbatch b SET duplicates = u.dup, duplicate_reasons = u.reasons,
            gpu_samples = u.gpu, nic_samples = u.nic, job_samples = u.job
        FROM unnest(%b::bigint[], %b::int[], %b::jsonb[], %b::int[], %b::int[], %b::int[])
             AS u(id, dup, reasons, gpu, nic, job)
        WHERE b.id = u.id
        """,
        ([r.batch_id for r, _d in counted], [r.duplicates for r, _d in counted],
         [psycopg.types.json.Jsonb(dict(d)) for _r, d in counted],
         [r.gpu_samples for r, _d in counted], [r.nic_samples for r, _d in counted],
         [r.job_samples for r, _d in counted]),
        binary=True,
    )


# A node created by a concurrent flush after this one looked: check all its rows.
_UNKNOWN_MARK = 2**62


def _upsert_nodes(cur, batches: list[Batch], seen: list[dt.datetime], received_at
                  ) -> tuple[dict[tuple[str, str], tuple[int, int]],
                             dict[tuple[str, str], int | None], set[tuple[str, str]]]:
    """Clusters and nodes, one statement each: ({(cluster, node): (node id, cluster id)},
    {(cluster, node): its data high-water mark before this flush}, the (cluster, node)s
    that were silent by arrival until this flush).

    Several batches of one node in a flush make one row (its newest description), sorted so
    that two consumers lock nodes in the same order. The nodes' rows are locked first (in
    id order) and their ``last_seen`` (data time: the newest sample stored for the node)
    read as the mark, in PostgreSQL micros, that ``dedupe`` needs: a concurrent flush of
    the same node waits here and then sees this one's rows.

    ``FOR NO KEY UPDATE`` (as for GPUs and jobs below), not ``FOR UPDATE``: rows of other
    nodes' flushes that refer to these (a job whose origin node this is) take ``FOR KEY
    SHARE`` in their foreign-key checks at commit, which ``FOR UPDATE`` would make wait for
    this flush to end (``tests/ingest/test_flush_locks.py``).
    """
    newest: dict[tuple[str, str], tuple[dt.datetime, Batch, float | None]] = {}
    for batch, when in zip(batches, seen, strict=True):
        key = (batch.cluster, batch.node)
        prev = newest.get(key)
        interval = batch.interval_s if batch.interval_s is not None else (
            prev[2] if prev else None)
        if prev is None or when >= prev[0]:
            newest[key] = (when, batch, interval)
        else:
            newest[key] = (prev[0], prev[1], prev[2] if prev[2] is not None else interval)
    keys = sorted(newest)
    clusters = sorted({c for c, _n in keys})
    # Inserted when new, never updated: an upsert that updated the row (to learn its id)
    # would hold its lock to the end of the flush, and every other flush of the cluster
    # would wait for this one.
    cur.execute(
        """
        INSERT INTO inventory_cluster (name, created_at)
        SELECT u.name, %s FROM unnest(%b::text[]) AS u(name)
        ON CONFLICT (name) DO NOTHING
        """,
        (received_at, clusters),
    )
    # The ids by a statement of their own: one read with the insert would not see a row a
    # concurrent flush committed while this one waited on it.
    cur.execute("SELECT name, id FROM inventory_cluster WHERE name = ANY(%b::text[])",
                (clusters,))
    cluster_ids = dict(cur.fetchall())
    cur.execute(
        """
        SELECT n.cluster_id, n.name, n.last_seen, n.reported_at FROM inventory_node n
        JOIN unnest(%b::int[], %b::text[]) AS u(cluster, name)
          ON n.cluster_id = u.cluster AND n.name = u.name
        ORDER BY n.id FOR NO KEY UPDATE OF n
        """,
        ([cluster_ids[c] for c, _n in keys], [n for _c, n in keys]),
        binary=True,
    )
    before, quiet_ids = {}, set()
    silent_since = received_at - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    for cid, name, last, reported in cur.fetchall():
        before[(cid, name)] = last
        if reported is not None and reported < silent_since:
            quiet_ids.add((cid, name))
    rows = [newest[k] for k in keys]
    cur.execute(
        """
        INSERT INTO inventory_node
            (cluster_id, name, agent_version, simulated, sample_interval_s, first_seen,
             last_seen, reported_at)
        SELECT u.cluster, u.name, u.version, u.simulated, u.interval, u.seen, u.seen, %s
        FROM unnest(%b::int[], %b::text[], %b::text[], %b::bool[], %b::float8[],
                    %b::timestamptz[]) AS u(cluster, name, version, simulated, interval, seen)
        ON CONFLICT (cluster_id, name) DO UPDATE SET
            agent_version = EXCLUDED.agent_version,
            simulated = EXCLUDED.simulated,
            sample_interval_s = COALESCE(EXCLUDED.sample_interval_s,
                                         inventory_node.sample_interval_s),
            last_seen = GREATEST(inventory_node.last_seen, EXCLUDED.last_seen),
            reported_at = GREATEST(inventory_node.reported_at, EXCLUDED.reported_at)
        RETURNING cluster_id, name, id, xmax = 0
        """,
        (
            received_at,
            [cluster_ids[c] for c, _n in keys], [n for _c, n in keys],
            [b.agent_version for _w, b, _i in rows], [b.simulated for _w, b, _i in rows],
            [i for _w, _b, i in rows], [w for w, _b, _i in rows],
        ),
        binary=True,  # arrays in binary: no per-element quoting
    )
    by_name, marks = {}, {}
    for cid, name, nid, inserted in cur.fetchall():
        by_name[(cid, name)] = nid
        last = before.get((cid, name))
        marks[(cid, name)] = (None if inserted else _UNKNOWN_MARK) if last is None else \
            (last - _PG_EPOCH) // dt.timedelta(microseconds=1)
    return ({(c, n): (by_name[(cluster_ids[c], n)], cluster_ids[c]) for c, n in keys},
            {(c, n): marks[(cluster_ids[c], n)] for c, n in keys},
            {(c, n) for c, n in keys if (cluster_ids[c], n) in quiet_ids})


def _mark_late(cur, pending: list[dedupe.Pending], marks, quiet, received_at: dt.datetime
               ) -> None:
    """Record the batches the detector pass may already have moved past (``LateSpan``).

    A batch is late when its oldest stored sample is not newer than how far the pass has
    read one of the batch's jobs (``JobEfficiency.through``): a node after another of the
    same job (a backlog sent node after node), a node whose batches were in flight while
    the pass gave it up as silent. Also when it is older than the newest data its node had
    before this flush (batches out of order), or when its node was silent by arrival until
    now (a spool replayed after an outage), for samples of a GPU the batch attributes to no
    job. A span no job had passed costs the next pass one lookup.

    Exact, not a margin: the flush holds ``LATE_LOCK_KEY`` shared from its first statement,
    so the ``through`` read here is the last committed pass's, and no pass commits a newer
    one before these samples are visible to it.
    """
    wanted = sorted({job for p in pending for job in p.jobs})
    through = {}
    if wanted:
        cur.execute("SELECT job_id, through FROM findings_jobefficiency "
                    "WHERE job_id = ANY(%s) AND through IS NOT NULL", (wanted,))
        through = {job: (t - _PG_EPOCH) // dt.timedelta(microseconds=1)
                   for job, t in cur.fetchall()}
    spans = []
    for p in pending:
        stamps = [*p.times("gpu"), *p.times("nic"), *p.times("job")]
        if not stamps:
            continue
        lo, hi = min(stamps), max(stamps)
        mark = marks.get(p.node)
        out_of_order = mark is not None and mark != _UNKNOWN_MARK and lo <= mark
        passed = any(lo <= through[job] for job in p.jobs if job in through)
        if passed or out_of_order or p.node in quiet:
            spans.append((p.node_id, _from_pg_micros(lo), _from_pg_micros(hi)))
    if spans:
        cur.executemany(
            "INSERT INTO findings_latespan (node_id, start, \"end\", received_at) "
            "VALUES (%s, %s, %s, %s)",
            [(node_id, lo, hi, received_at) for node_id, lo, hi in spans])


def _log_batches(cur, batches: list[Batch], spans, nodes, received_at) -> list[int | None]:
    """Insert the batches' keys into the ingest log; the new id of each, None for a batch
    stored before (or twice in this flush: the first copy wins)."""
    node_ids = [nodes[(b.cluster, b.node)][0] for b in batches]
    cur.execute(
        """
        INSERT INTO ingest_ingestbatch
            (node_id, boot_id, seq, sent_at, received_at, first_ts, last_ts,
             gpu_samples, nic_samples, job_samples, events, rejected,
             rejected_reasons, rejected_examples, spool_dropped, key_id, signature_version)
        SELECT u.node, u.boot, u.seq, u.sent, %s, u.first, u.last, u.gpu, u.nic, u.job,
               u.events, u.rejected, u.reasons, u.examples, u.dropped, u.key, u.version
        FROM unnest(%b::bigint[], %b::text[], %b::bigint[], %b::timestamptz[],
                    %b::timestamptz[], %b::timestamptz[], %b::int[], %b::int[], %b::int[],
                    %b::int[], %b::int[], %b::jsonb[], %b::jsonb[], %b::int[], %b::text[],
                    %b::int2[])
             WITH ORDINALITY AS u(node, boot, seq, sent, first, last, gpu, nic, job, events,
                                  rejected, reasons, examples, dropped, key, version, pos)
        ORDER BY u.pos
        ON CONFLICT ON CONSTRAINT ingest_batch_key DO NOTHING
        RETURNING node_id, boot_id, seq, id
        """,
        (
            received_at, node_ids, [b.boot_id for b in batches], [b.seq for b in batches],
            [_dt(b.sent_at) for b in batches], [_dt(lo) for lo, _hi in spans],
            [_dt(hi) for _lo, hi in spans], [len(b.gpu_rows) for b in batches],
            [len(b.nic_rows) for b in batches], [len(b.job_rows) for b in batches],
            [len(b.events) for b in batches], [b.rejected_total for b in batches],
            [psycopg.types.json.Jsonb(dict(b.rejected)) for b in batches],
            [psycopg.types.json.Jsonb(b.examples) for b in batches],
            [b.spool_dropped for b in batches], [b.key_id for b in batches],
            [b.signature_version for b in batches],
        ),
        binary=True,  # arrays in binary: no per-element quoting
    )
    new = {(node, boot, seq): batch_id for node, boot, seq, batch_id in cur.fetchall()}
    ids = []
    for node_id, batch in zip(node_ids, batches, strict=True):
        ids.append(new.pop((node_id, batch.boot_id, batch.seq), None))
    return ids


def _cached(kind: str, owner_id: int, content, seen, upsert, *args) -> tuple[dict, bool]:
    """The inventory's ids, upserted only when it changed or its node was not seen for a
    minute (``inventory_cache``); and whether its rows' last_seen is behind its data (the caller
    then touches them at the end of the flush, ``_Touch``: a back-fill's batches each carry
    many minutes of data, and a whole upsert per batch was most of what storing one cost)."""
    ids = inventory_cache.lookup(kind, owner_id, content)
    if ids is None:
        ids = upsert(*args)
        inventory_cache.remember(kind, owner_id, content, ids, seen)
        return ids, False
    if inventory_cache.behind(kind, owner_id, seen):
        inventory_cache.advance(kind, owner_id, seen)
        return ids, True
    return ids, False


class _Touch(dict):
    """{table kind: {row key: newest data time}}: the inventory rows whose last_seen moves
    on in this flush without a whole upsert; written with one statement per table."""

    _SQL = {
        "gpus": ("inventory_gpu", "%b::bigint[]", "t.id = u.k1"),
        "nics": ("inventory_nic", "%b::bigint[]", "t.id = u.k1"),
        "job_gpus": ("jobs_jobgpu", "%b::bigint[], %b::bigint[]",
                     "t.job_id = u.k1 AND t.gpu_id = u.k2"),
    }

    def add(self, kind: str, keys, seen: dt.datetime) -> None:
        rows = self.setdefault(kind, {})
        for key in keys:
            if key not in rows or rows[key] < seen:
                rows[key] = seen

    def write(self, cur) -> None:
        for kind, (table, key_types, match) in self._SQL.items():
            rows = self.get(kind)
            if not rows:
                continue
            keys = sorted(rows)  # one lock order for concurrent flushes
            columns = ([k[0] for k in keys], [k[1] for k in keys]) \
                if kind == "job_gpus" else (keys,)
            names = ", ".join(f"k{i + 1}" for i in range(len(columns)))
            cur.execute(
                f"""
                UPDATE {table} t SET last_seen = GREATEST(t.last_seen, u.seen)
                FROM unnest({key_types}, %b::timestamptz[]) AS u({names}, seen)
                WHERE {match}
                """,
                (*columns, [rows[k] for k in keys]),
                binary=True,
            )


def _columns(names: tuple[str, ...], kinds: tuple[str, ...], parts: list) -> list[tuple]:
    """The batches' rows, given as columns per batch (``parts``: each a sequence per column,
    or empty), as ``pgcopy`` columns ``(name, kind, values, nulls)``: one numpy array per
    column for the whole flush ([] for no rows). A float column is float64, None as NaN
    (NULL to ``pgcopy``); a float4 one is rounded to float32 when packed, as psycopg's
    ``write_row`` rounded it. An integer column (the time in PostgreSQL microseconds too)
    stays int64, never a float (not exact beyond 2**53), with a mask of its Nones; an int
    beyond int64 raises OverflowError as ``write_row`` did (the flush fails, its batches
    are then stored one by one)."""
    parts = [c for c in parts if c and len(c[0])]
    if not parts:
        return []
    n = sum(len(c[0]) for c in parts)
    out = []
    for j, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        def values(j=j):  # the column over all batches, once more
            return parts[0][j] if len(parts) == 1 else chain.from_iterable(c[j] for c in parts)

        if kind in ("float4", "float8"):
            arrays = [c[j] for c in parts]
            if all(type(a) is np.ndarray for a in arrays):  # prepared: float64 already
                column = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
            else:
                column = np.fromiter(values(), np.float64, n)  # None: NaN
            out.append((name, kind, column, None))
            continue
        try:
            out.append((name, kind, np.fromiter(values(), np.int64, n), None))
        except TypeError:  # Nones among the ints (a GPU without a job, an absent metric)
            nulls = np.fromiter(map(is_, values(), repeat(None)), bool, n)
            ints = np.fromiter((0 if v is None else v for v in values()), np.int64, n)
            out.append((name, kind, ints, nulls))
    return out


def _copy(cur, table: str, columns: list[tuple]) -> None:
    """One binary COPY of these columns, sent in slices: PostgreSQL applies one slice while
    the next is packed (packed whole, the server would start only when all is built)."""
    if columns:
        pgcopy.copy_columns(cur, table, columns, rows_per_write=_COPY_SLICE_ROWS)


class GpuIds(dict):
    """{batch position: GPU id} of a batch's GPUs that were stored, and ``refused``:
    {batch position: reason} of those refused because their UUID belongs to a node of
    another cluster. (Kept whole by the inventory cache, so a cached refusal still drops the
    GPU's rows.)"""

    def __init__(self, ids=(), refused=None):
        super().__init__(ids)
        self.refused: dict[int, str] = refused or {}


def _upsert_gpus(cur, batch: Batch, node_id: int, cluster_id: int, seen_at, batch_id: int
                 ) -> GpuIds:
    """Upsert the batch's GPUs onto its node. A GPU is its UUID: one that moves between
    nodes of this cluster moves (and gets a "moved" event); one whose UUID belongs to a node
    of another cluster is refused, so no cluster can take over another's GPUs."""
    if not batch.gpus:
        return GpuIds()
    # Sorted by UUID, and the existing rows locked in that order: what they belong to cannot
    # change before this transaction ends, and two batches sharing GPUs cannot deadlock.
    positions = sorted(batch.gpus, key=lambda p: batch.gpus[p]["uuid"])
    cur.execute(
        """
        SELECT g.uuid, g.node_id, n.cluster_id, n.name, c.name
        FROM inventory_gpu g
        JOIN inventory_node n ON n.id = g.node_id
        JOIN inventory_cluster c ON c.id = n.cluster_id
        WHERE g.uuid = ANY(%s::text[])
        ORDER BY g.uuid COLLATE "C"
        FOR NO KEY UPDATE OF g
        """,
        ([batch.gpus[p]["uuid"] for p in positions],),
    )
    owner = {uuid: (node, cluster, node_name, cluster_name)
             for uuid, node, cluster, node_name, cluster_name in cur.fetchall()}
    refused = {}
    for p in positions:
        uuid = batch.gpus[p]["uuid"]
        if uuid in owner and owner[uuid][1] != cluster_id:
            refused[p] = f"gpus: uuid {uuid} belongs to cluster {owner[uuid][3]}; refused"
    positions = [p for p in positions if p not in refused]
    if not positions:
        return GpuIds(refused=refused)
    g = [batch.gpus[p] for p in positions]
    cur.execute(
        """
        INSERT INTO inventory_gpu (node_id, uuid, index, model, memory_total_mib, power_limit_w,
                                   pci_bus_id, nvlink_bytes_per_s, mig_mode, mig_profile,
                                   mig_gi_id, mig_ci_id, mig_share, first_seen, last_seen)
        SELECT %s, u.uuid, u.idx, u.model, u.mem, u.power, u.pci, u.nvl, u.mig, u.profile,
               u.gi, u.ci, u.share, %s, %s
        FROM unnest(%s::text[], %s::int[], %s::text[], %s::int[], %s::float8[], %s::text[],
                    %s::float8[], %s::bool[], %s::text[], %s::int[], %s::int[], %s::float8[])
             AS u(uuid, idx, model, mem, power, pci, nvl, mig, profile, gi, ci, share)
        ON CONFLICT (uuid) DO UPDATE SET
            node_id = EXCLUDED.node_id, index = EXCLUDED.index,
            model = COALESCE(NULLIF(EXCLUDED.model, ''), inventory_gpu.model),
            memory_total_mib = COALESCE(EXCLUDED.memory_total_mib, inventory_gpu.memory_total_mib),
            power_limit_w = COALESCE(EXCLUDED.power_limit_w, inventory_gpu.power_limit_w),
            pci_bus_id = COALESCE(NULLIF(EXCLUDED.pci_bus_id, ''), inventory_gpu.pci_bus_id),
            nvlink_bytes_per_s = EXCLUDED.nvlink_bytes_per_s,
            mig_mode = EXCLUDED.mig_mode, mig_profile = EXCLUDED.mig_profile,
            mig_gi_id = EXCLUDED.mig_gi_id, mig_ci_id = EXCLUDED.mig_ci_id,
            mig_share = EXCLUDED.mig_share,
            last_seen = GREATEST(inventory_gpu.last_seen, EXCLUDED.last_seen)
        -- A GPU inserted meanwhile by another cluster's batch (not locked above) stays put.
        WHERE (SELECT n.cluster_id FROM inventory_node n WHERE n.id = inventory_gpu.node_id)
              = %s
        RETURNING uuid, id
        """,
        (
            node_id, seen_at, seen_at,
            [x["uuid"] for x in g], [x["index"] for x in g], [x["model"] for x in g],
            [x["memory_total_mib"] for x in g], [x["power_limit_w"] for x in g],
            [x["pci_bus_id"] for x in g], [x["nvlink_bytes_per_s"] for x in g],
            [x["mig_mode"] for x in g], [x.get("mig_profile", "") for x in g],
            [x.get("mig_gi_id") for x in g], [x.get("mig_ci_id") for x in g],
            [x.get("mig_share") for x in g], cluster_id,
        ),
    )
    by_uuid = dict(cur.fetchall())
    instances = [(x["uuid"], x["parent_uuid"]) for x in g if x.get("parent_uuid")]
    if instances:
        # A MIG instance hangs under its parent GPU on the same node (sent in this batch
        # or an earlier one); a parent not known yet is linked by a later batch.
        cur.execute(
            """
            UPDATE inventory_gpu c SET parent_id = p.id
            FROM unnest(%s::text[], %s::text[]) AS u(uuid, parent)
            JOIN inventory_gpu p ON p.uuid = u.parent
            WHERE c.uuid = u.uuid AND p.node_id = c.node_id
              AND c.parent_id IS DISTINCT FROM p.id
            """,
            ([i[0] for i in instances], [i[1] for i in instances]),
        )
    ids = GpuIds(refused=refused)
    moved = []
    for p in positions:
        uuid = batch.gpus[p]["uuid"]
        if uuid not in by_uuid:
            ids.refused[p] = f"gpus: uuid {uuid} belongs to another cluster; refused"
            continue
        ids[p] = by_uuid[uuid]
        if uuid in owner and owner[uuid][0] != node_id:
            moved.append((by_uuid[uuid], f"moved from node {owner[uuid][2]} to node {batch.node}"))
    if moved:
        # Within its cluster a GPU may move (its history goes with it); the move is shown
        # with the GPU's other events.
        cur.execute(
            """
            INSERT INTO telemetry_gpuevent (gpu_id, ts, kind, code, message, batch_id)
            SELECT u.gpu, %s, 'moved', NULL, left(u.msg, 512), %s
            FROM unnest(%s::bigint[], %s::text[]) AS u(gpu, msg)
            ON CONFLICT ON CONSTRAINT gpuevent_identity_uniq DO NOTHING
            """,
            (seen_at, batch_id, [m[0] for m in moved], [m[1] for m in moved]),
        )
    return ids


_REFUSED_GPU_ROWS = "gpu_samples: gpu refused (its uuid belongs to another cluster)"
_REFUSED_GPU_EVENTS = "events: gpu refused (its uuid belongs to another cluster)"


def _without_refused_gpus(cur, batch: Batch, refused: dict[int, str], batch_id: int) -> Batch:
    """The batch without the refused GPUs' sample rows and events, each counted under a
    reason, and its ingest-log row corrected to match. (A copy: the caller's batch stays as
    it was, for a retry of the flush.)"""
    gpu_rows = [r for r in batch.gpu_rows if r[1] not in refused]
    events = [e for e in batch.events if e["gpu"] not in refused]
    kept = replace(batch, gpu_rows=gpu_rows, events=events, rejected=Counter(batch.rejected),
                   examples=dict(batch.examples))
    for position, reason in sorted(refused.items()):
        kept.reject(reason, f"gpus[{position}]")
    for reason, before, after, what in (
            (_REFUSED_GPU_ROWS, batch.gpu_rows, gpu_rows, "rows"),
            (_REFUSED_GPU_EVENTS, batch.events, events, "events")):
        if len(before) > len(after):
            kept.rejected[reason] += len(before) - len(after)
            kept.examples.setdefault(reason, f"{len(before) - len(after)} {what} of gpus "
                                             f"{sorted(refused)}")
    lo, hi = _span(kept)
    cur.execute(
        """
        UPDATE ingest_ingestbatch SET gpu_samples = %s, events = %s, rejected = %s,
            rejected_reasons = %s, rejected_examples = %s, first_ts = %s, last_ts = %s
        WHERE id = %s
        """,
        (len(gpu_rows), len(events), kept.rejected_total,
         psycopg.types.json.Jsonb(dict(kept.rejected)), psycopg.types.json.Jsonb(kept.examples),
         _dt(lo), _dt(hi), batch_id),
    )
    return kept


def _upsert_nics(cur, batch: Batch, node_id: int, seen_at) -> dict[int, int]:
    if not batch.nics:
        return {}
    positions = list(batch.nics)
    n = [batch.nics[p] for p in positions]
    cur.execute(
        """
        INSERT INTO inventory_nic (node_id, name, kind, link_bytes_per_s, first_seen, last_seen)
        SELECT %s, u.name, u.kind, u.link, %s, %s
        FROM unnest(%s::text[], %s::text[], %s::float8[]) AS u(name, kind, link)
        ON CONFLICT (node_id, name) DO UPDATE SET
            kind = EXCLUDED.kind, link_bytes_per_s = EXCLUDED.link_bytes_per_s,
            last_seen = GREATEST(inventory_nic.last_seen, EXCLUDED.last_seen)
        RETURNING name, id
        """,
        (node_id, seen_at, seen_at, [x["name"] for x in n], [x["kind"] for x in n],
         [x["link_bytes_per_s"] for x in n]),
    )
    by_name = dict(cur.fetchall())
    return {p: by_name[batch.nics[p]["name"]] for p in positions}


# The job fields that say whose a job is: set by the first report, then changed only by
# reports from the job's origin node (any node may fill one in while it is empty).
_OWNER_FIELDS = ("user", "account", "name")


def _upsert_jobs(cur, batch: Batch, cluster_id: int, node_id: int, gpu_ids: dict[int, int],
                 seen_at) -> dict[str, int]:
    if not batch.jobs:
        return {}
    # Sorted, so that two workers upserting the same multi-node jobs lock them in one order.
    jobs = sorted(batch.jobs.values(), key=lambda j: (j["scheduler"], j["id"]))
    # The jobs that exist, locked in that same order (code point order, as Python sorts), so
    # that what the upsert below finds is what was read here: each change to their owner
    # fields is logged with its true old value.
    cur.execute(
        """
        SELECT j.scheduler, j.external_id, j.id, j.origin_node_id, j."user", j.account, j.name
        FROM jobs_job j
        JOIN unnest(%s::text[], %s::text[]) AS u(sched, ext)
          ON j.scheduler = u.sched AND j.external_id = u.ext
        WHERE j.cluster_id = %s
        ORDER BY j.scheduler COLLATE "C", j.external_id COLLATE "C"
        FOR NO KEY UPDATE OF j
        """,
        ([j["scheduler"] for j in jobs], [j["id"] for j in jobs], cluster_id),
    )
    before = {(sched, ext): rest for sched, ext, *rest in cur.fetchall()}
    # A job's last_seen is its newest sample on this node (data time, not arrival time),
    # so a back-filled or replayed job ends where its data ends.
    newest: dict[str, float] = {}
    for row in batch.gpu_rows:
        if row[2] is not None:
            newest[row[2]] = max(newest.get(row[2], row[0]), row[0])
    for row in batch.job_rows:
        newest[row[1]] = max(newest.get(row[1], row[0]), row[0])
    cur.execute(
        """
        INSERT INTO jobs_job (cluster_id, scheduler, external_id, "user", name, account,
                              partition, state, started_at, ended_at, cpus, first_seen,
                              last_seen, origin_node_id, submitted_at, time_limit_s,
                              exit_state, exit_code, exit_signal, namespace, pod,
                              owner_kind, owner_name)
        SELECT %s, u.sched, u.ext, u.usr, u.name, u.acct, u.part,
               CASE WHEN u.ended IS NULL THEN 'running' ELSE 'ended' END,
               u.started, u.ended, u.cpus, u.seen, u.seen, %s, u.submitted, u.time_limit,
               u.exit_state, u.exit_code, u.exit_signal, u.ns, u.pod, u.owner_kind,
               u.owner_name
        FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                    %s::timestamptz[], %s::timestamptz[], %s::int[], %s::timestamptz[],
                    %s::timestamptz[], %s::int[], %s::text[], %s::int2[], %s::int2[],
                    %s::text[], %s::text[], %s::text[], %s::text[])
             AS u(sched, ext, usr, name, acct, part, started, ended, cpus, seen, submitted,
                  time_limit, exit_state, exit_code, exit_signal, ns, pod, owner_kind,
                  owner_name)
        ON CONFLICT ON CONSTRAINT job_identity_uniq DO UPDATE SET
            "user" = CASE WHEN jobs_job."user" = '' OR jobs_job.origin_node_id = EXCLUDED.origin_node_id
                          THEN COALESCE(NULLIF(EXCLUDED."user", ''), jobs_job."user")
                          ELSE jobs_job."user" END,
            name = CASE WHEN jobs_job.name = '' OR jobs_job.origin_node_id = EXCLUDED.origin_node_id
                        THEN COALESCE(NULLIF(EXCLUDED.name, ''), jobs_job.name)
                        ELSE jobs_job.name END,
            account = CASE WHEN jobs_job.account = '' OR jobs_job.origin_node_id = EXCLUDED.origin_node_id
                           THEN COALESCE(NULLIF(EXCLUDED.account, ''), jobs_job.account)
                           ELSE jobs_job.account END,
            partition = COALESCE(NULLIF(EXCLUDED.partition, ''), jobs_job.partition),
            namespace = COALESCE(NULLIF(EXCLUDED.namespace, ''), jobs_job.namespace),
            pod = COALESCE(NULLIF(EXCLUDED.pod, ''), jobs_job.pod),
            owner_kind = COALESCE(NULLIF(EXCLUDED.owner_kind, ''), jobs_job.owner_kind),
            owner_name = COALESCE(NULLIF(EXCLUDED.owner_name, ''), jobs_job.owner_name),
            started_at = COALESCE(EXCLUDED.started_at, jobs_job.started_at),
            -- Reported running, with data after the end that close_stale_jobs inferred
            -- while the job's data lagged (a back-fill, a spool replay): it runs again.
            ended_at = CASE WHEN EXCLUDED.ended_at IS NULL
                            AND EXCLUDED.last_seen > jobs_job.ended_at THEN NULL
                            ELSE COALESCE(EXCLUDED.ended_at, jobs_job.ended_at) END,
            state = CASE WHEN EXCLUDED.ended_at IS NULL
                         AND EXCLUDED.last_seen > jobs_job.ended_at THEN 'running'
                         WHEN COALESCE(EXCLUDED.ended_at, jobs_job.ended_at) IS NULL
                         AND GREATEST(jobs_job.last_seen, EXCLUDED.last_seen) > jobs_job.last_seen
                         THEN 'running'
                         WHEN COALESCE(EXCLUDED.ended_at, jobs_job.ended_at) IS NULL
                         THEN jobs_job.state ELSE 'ended' END,
            cpus = COALESCE(EXCLUDED.cpus, jobs_job.cpus),
            submitted_at = COALESCE(EXCLUDED.submitted_at, jobs_job.submitted_at),
            time_limit_s = COALESCE(EXCLUDED.time_limit_s, jobs_job.time_limit_s),
            -- How it ended: a report of the end fills it in; one of the job running again
            -- (as for ended_at above) clears it with the end it belonged to.
            exit_state = CASE WHEN EXCLUDED.ended_at IS NULL
                              AND EXCLUDED.last_seen > jobs_job.ended_at THEN ''
                              ELSE COALESCE(NULLIF(EXCLUDED.exit_state, ''), jobs_job.exit_state) END,
            exit_code = CASE WHEN EXCLUDED.ended_at IS NULL
                             AND EXCLUDED.last_seen > jobs_job.ended_at THEN NULL
                             ELSE COALESCE(EXCLUDED.exit_code, jobs_job.exit_code) END,
            exit_signal = CASE WHEN EXCLUDED.ended_at IS NULL
                               AND EXCLUDED.last_seen > jobs_job.ended_at THEN NULL
                               ELSE COALESCE(EXCLUDED.exit_signal, jobs_job.exit_signal) END,
            last_seen = GREATEST(jobs_job.last_seen, EXCLUDED.last_seen)
        RETURNING external_id, id, "user", account, name
        """,
        (
            cluster_id, node_id,
            [j["scheduler"] for j in jobs], [j["id"] for j in jobs], [j["user"] for j in jobs],
            [j["name"] for j in jobs], [j["account"] for j in jobs],
            [j["partition"] for j in jobs], [_dt(j["started_at"]) for j in jobs],
            [_dt(j["ended_at"]) for j in jobs], [j["cpus"] for j in jobs],
            [_dt(newest[j["id"]]) if j["id"] in newest else seen_at for j in jobs],
            [_dt(j.get("submitted_at")) for j in jobs], [j.get("time_limit_s") for j in jobs],
            [j.get("exit_state") or "" for j in jobs], [j.get("exit_code") for j in jobs],
            [j.get("exit_signal") for j in jobs],
            *([j.get(key) or "" for j in jobs] for key in ("namespace", "pod", "owner_kind",
                                                            "owner_name")),
        ),
    )
    stored = {ext: (job_id, dict(zip(_OWNER_FIELDS, values, strict=True)))
              for ext, job_id, *values in cur.fetchall()}
    job_ids = {ext: job_id for ext, (job_id, _values) in stored.items()}
    _log_owner_changes(cur, jobs, before, stored, node_id)
    pairs = sorted({(job_ids[j["id"]], gpu_ids[g]) for j in jobs for g in j["gpus"] if g in gpu_ids})
    if pairs:
        cur.execute(
            """
            INSERT INTO jobs_jobgpu (job_id, gpu_id, first_seen, last_seen)
            SELECT u.job, u.gpu, %s, %s FROM unnest(%s::bigint[], %s::bigint[]) AS u(job, gpu)
            ON CONFLICT ON CONSTRAINT jobgpu_job_gpu_uniq DO UPDATE SET
                last_seen = GREATEST(jobs_jobgpu.last_seen, EXCLUDED.last_seen)
            """,
            (seen_at, seen_at, [p[0] for p in pairs], [p[1] for p in pairs]),
        )
    return job_ids


def _log_owner_changes(cur, jobs: list[dict], before: dict, stored: dict, node_id: int
                       ) -> None:
    """One ``jobs_jobmetadatachange`` row per owner field a report would change: accepted
    (filled in while empty, or from the origin node) or refused (the job kept its value)."""
    rows = []
    for job in jobs:
        job_id, now = stored[job["id"]]
        prev = before.get((job["scheduler"], job["id"]))
        for k, field in enumerate(_OWNER_FIELDS):
            new = job[field]
            if prev is not None:
                old = prev[2 + k]  # (id, origin node, user, account, name)
            elif now[field] != new:
                old = now[field]  # created meanwhile by another transaction, which won
            else:
                continue  # this report created the job: nothing changed
            if new and new != old:
                rows.append((job_id, field, old, new, now[field] == new))
    if rows:
        cur.execute(
            """
            INSERT INTO jobs_jobmetadatachange (job_id, node_id, field, old, new, accepted, at)
            SELECT u.job, %s, u.field, u.old, u.new, u.accepted, now()
            FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::bool[])
                 AS u(job, field, old, new, accepted)
            """,
            (node_id, *(list(c) for c in zip(*rows, strict=True))),
        )


def _insert_events(cur, batch: Batch, gpu_ids: dict[int, int], batch_id: int) -> int:
    """Store the batch's events; return how many were stored before (a resend, a copy
    earlier in this flush): those are not stored again."""
    if not batch.events:
        return 0
    ev = batch.events
    cur.execute(
        """
        INSERT INTO telemetry_gpuevent (gpu_id, ts, kind, code, message, batch_id)
        SELECT u.gpu, u.ts, u.kind, u.code, u.msg, %s
        FROM unnest(%s::bigint[], %s::timestamptz[], %s::text[], %s::int[], %s::text[])
             AS u(gpu, ts, kind, code, msg)
        ON CONFLICT ON CONSTRAINT gpuevent_identity_uniq DO NOTHING
        """,
        (batch_id, [gpu_ids[e["gpu"]] for e in ev], [_dt(e["ts"]) for e in ev],
         [e["kind"] for e in ev], [e["code"] for e in ev], [e["message"] for e in ev]),
    )
    return len(ev) - cur.rowcount


# The "now" tables are upserted from a temporary table filled by one binary COPY per
# flush (``_update_latest``): building the statement's arrays in Python (one datetime and
# one float per value) cost more than the samples' own COPY (measured, 48-row batches).
# Its columns are the latest table's, typed as the samples' (the same casts as before).
_LATEST_GPU_COLS = ("gpu_id", "ts", "job_id", *GPU_METRIC_NAMES)
_LATEST_GPU_TYPES = ("bigint", "timestamptz", "bigint",
                     *(m.sql_type for m in GPU_METRICS))
_LATEST_GPU_COPY_TYPES = ("int8", "int8", "int8", *(_BINARY[m.sql_type] for m in GPU_METRICS))
_LATEST_NIC_COLS = ("nic_id", "ts", "rx_bytes_per_s", "tx_bytes_per_s")
_LATEST_NIC_TYPES = ("bigint", "timestamptz", "double precision", "double precision")
_LATEST_NIC_COPY_TYPES = ("int8", "int8", "float8", "float8")
# Per connection (each consumer process has its own), emptied at commit as well as by the
# upsert that reads it; IF NOT EXISTS: created by a connection's first flush.
_LATEST_STAGING = "".join(
    f"CREATE TEMP TABLE IF NOT EXISTS {name} "
    f"({', '.join(f'{c} {t}' for c, t in zip(cols, types, strict=True))}) "
    "ON COMMIT DELETE ROWS; "
    for name, cols, types in (("ingest_latest_gpu", _LATEST_GPU_COLS, _LATEST_GPU_TYPES),
                              ("ingest_latest_nic", _LATEST_NIC_COLS, _LATEST_NIC_TYPES)))


def _newest(columns: list[tuple]) -> np.ndarray:
    """The positions of each device's newest row (columns are (ts, device id, ...), as
    ``_columns`` makes them), in device order; of rows with equal times the first."""
    ts, device = columns[0][2], columns[1][2]
    order = np.lexsort((-np.arange(len(ts)), ts, device))
    device = device[order]
    return order[np.append(device[1:] != device[:-1], True)]


def _pick(columns: list[tuple], rows: np.ndarray, names, kinds) -> list[tuple]:
    """These rows of the columns under the given names and kinds (an int4 id goes as int8)."""
    return [(name, kind, values[rows], None if nulls is None else nulls[rows])
            for name, kind, (_n, _k, values, nulls) in zip(names, kinds, columns, strict=True)]


def _update_latest(cur, gpu: list[tuple], nic: list[tuple]) -> None:
    """Upsert the "now" tables, newer sample wins: each device's newest row of the flush
    goes into a temporary table (one binary COPY, times as PostgreSQL's microseconds), then
    one INSERT ... SELECT ... ON CONFLICT per table that keeps a stored row newer than it
    (a late or out-of-order batch never moves "now" back), emptying the temporary table as
    it reads it (a caller's enclosing transaction may store again before any commit). Rows
    go in device order, so concurrent flushes lock the latest rows in the same order."""
    if not gpu and not nic:
        return
    cur.execute(_LATEST_STAGING)
    # (ts, device, *values) -> (device, ts, *values): the latest tables' column order.
    if gpu:
        _copy(cur, "ingest_latest_gpu", _pick([gpu[1], gpu[0], *gpu[2:]], _newest(gpu),
                                              _LATEST_GPU_COLS, _LATEST_GPU_COPY_TYPES))
        cols = ", ".join(_LATEST_GPU_COLS)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _LATEST_GPU_COLS[1:])
        cur.execute(
            "WITH staged AS (DELETE FROM ingest_latest_gpu RETURNING *) "
            f"INSERT INTO telemetry_gpulatest ({cols}) "
            f"SELECT {cols} FROM staged ORDER BY gpu_id "
            f"ON CONFLICT (gpu_id) DO UPDATE SET {updates} "
            "WHERE telemetry_gpulatest.ts <= EXCLUDED.ts")
    if nic:
        _copy(cur, "ingest_latest_nic", _pick([nic[1], nic[0], *nic[2:]], _newest(nic),
                                              _LATEST_NIC_COLS, _LATEST_NIC_COPY_TYPES))
        cur.execute(
            "WITH staged AS (DELETE FROM ingest_latest_nic RETURNING *) "
            "INSERT INTO telemetry_niclatest (nic_id, ts, rx_bytes_per_s, tx_bytes_per_s) "
            "SELECT nic_id, ts, rx_bytes_per_s, tx_bytes_per_s FROM staged "
            "ORDER BY nic_id "
            "ON CONFLICT (nic_id) DO UPDATE SET ts = EXCLUDED.ts, "
            "rx_bytes_per_s = EXCLUDED.rx_bytes_per_s, tx_bytes_per_s = EXCLUDED.tx_bytes_per_s "
            "WHERE telemetry_niclatest.ts <= EXCLUDED.ts")
