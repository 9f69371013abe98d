"""Storing validated batches: inventory upserts, the ingest log and bulk COPY of samples.

Any number of batches go in one transaction (the bulk consumer stores hundreds at once;
the Celery task one). Its first writes are the batches' keys in the ingest log, inserted
together with ``ON CONFLICT DO NOTHING``: a key already there means that batch was stored
before (a redelivery) and nothing else of it is written. Samples go in with one binary
``COPY`` per table for all the batches, never row by row; nodes and the "latest" tables with
one statement each.
"""

import datetime as dt
import logging
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import psycopg
from django.db import IntegrityError, connection, transaction

from clusterui.ingest import inventory_cache
from clusterui.ingest.validate import Batch
from clusterui.telemetry import nicrollup, partitions
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

log = logging.getLogger(__name__)
UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

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


def _dt(ts: float | None) -> dt.datetime | None:
    # Adding a timedelta is several times faster than fromtimestamp(ts, UTC).
    return None if ts is None else _EPOCH + dt.timedelta(seconds=ts)


_PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=UTC)
_PG_EPOCH_UNIX = 946_684_800.0


_HOUR_US = 3_600_000_000


def _pg_micros(stamps) -> list[int]:
    """Unix seconds -> microseconds since 2000-01-01 UTC (a binary timestamptz), rounded
    half to even like a datetime."""
    micros = np.rint((np.asarray(stamps, dtype=np.float64) - _PG_EPOCH_UNIX) * 1e6)
    return micros.astype(np.int64).tolist()


def _from_pg_micros(micros: int) -> dt.datetime:
    return _PG_EPOCH + dt.timedelta(microseconds=micros)


def _span(batch: Batch) -> tuple[float | None, float | None]:
    """The batch's first and last data time (samples and events)."""
    lo = hi = None
    for rows in (batch.gpu_rows, batch.nic_rows, batch.job_rows, batch.events):
        if not rows:
            continue
        stamps = [r["ts"] for r in rows] if rows is batch.events else [r[0] for r in rows]
        a, b = min(stamps), max(stamps)
        lo = a if lo is None or a < lo else lo
        hi = b if hi is None or b > hi else hi
    return lo, hi


def _days(spans) -> set[dt.date]:
    days = set()
    for lo, hi in spans:
        if lo is None:
            continue
        day, last = _dt(lo).date(), _dt(hi).date()
        while day <= last:
            days.add(day)
            day += dt.timedelta(days=1)
    return days


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
    spans = [_span(b) for b in batches]
    partitions.ensure_partitions(_days(spans))
    try:
        return _store(batches, spans, received_at)
    except (psycopg.errors.CheckViolation, IntegrityError) as exc:
        # Another process dropped a partition this one believed in: relearn and retry once.
        # (Django's IntegrityError wraps psycopg's CheckViolation.)
        if "no partition" not in str(exc):
            raise
        partitions.forget_known()
        partitions.ensure_partitions(_days(spans))
        return _store(batches, spans, received_at)


def _store(batches: list[Batch], spans, received_at: dt.datetime) -> list[StoreResult]:
    seen = [
        _dt(hi if hi is not None else b.sent_at) or received_at
        for b, (_lo, hi) in zip(batches, spans, strict=True)
    ]
    results: list[StoreResult] = []
    gpu_rows: list[tuple] = []
    nic_rows: list[tuple] = []
    job_rows: list[tuple] = []
    # wrap_database_errors: psycopg's errors from the raw cursor become Django's, which is
    # what callers (the Celery task's retry list, the bulk consumer) catch.
    with transaction.atomic(), connection.cursor() as wrapper, connection.wrap_database_errors:
        # A server-binding psycopg cursor: COPY needs psycopg's own, and parameters sent
        # apart from the query (in binary) cost no per-element quoting of the arrays.
        cur = psycopg.Cursor(wrapper.cursor.connection)
        nodes = _upsert_nodes(cur, batches, seen, received_at)
        batch_ids = _log_batches(cur, batches, spans, nodes, received_at)
        for batch, when, batch_id in zip(batches, seen, batch_ids, strict=True):
            if batch_id is None:
                results.append(StoreResult(batch_id=None, duplicate=True))
                continue
            node_id, cluster_id = nodes[(batch.cluster, batch.node)]
            gpu_ids = _cached(cur, "gpus", node_id, batch.gpus, _upsert_gpus, batch, node_id,
                              when)
            nic_ids = _cached(cur, "nics", node_id, batch.nics, _upsert_nics, batch, node_id,
                              when)
            job_ids = _cached(cur, "jobs", node_id, [batch.jobs, gpu_ids], _upsert_jobs, batch,
                              cluster_id, gpu_ids, when)
            # Column-wise, at C speed: batch-local references become database ids, times
            # become PostgreSQL's microseconds.
            if batch.gpu_rows:
                ts, gpu, job, *values = zip(*batch.gpu_rows, strict=True)
                gpu_rows.extend(zip(_pg_micros(ts), map(gpu_ids.__getitem__, gpu),
                                    map(job_ids.get, job), *values, strict=True))
            if batch.nic_rows:
                ts, nic, *values = zip(*batch.nic_rows, strict=True)
                nic_rows.extend(zip(_pg_micros(ts), map(nic_ids.__getitem__, nic), *values,
                                    strict=True))
            if batch.job_rows:
                ts, job, *values = zip(*batch.job_rows, strict=True)
                job_rows.extend(zip(_pg_micros(ts), map(job_ids.__getitem__, job), repeat(node_id),
                                    *values))
            _insert_events(cur, batch, gpu_ids, batch_id)
            results.append(StoreResult(
                batch_id=batch_id, duplicate=False, gpu_samples=len(batch.gpu_rows),
                nic_samples=len(batch.nic_rows), job_samples=len(batch.job_rows),
                rejected=batch.rejected_total,
            ))
        _copy(cur, GPU_SAMPLE_TABLE, GPU_SAMPLE_COLUMNS, GPU_COPY_TYPES, gpu_rows)
        _copy(cur, NIC_SAMPLE_TABLE, NIC_SAMPLE_COLUMNS, NIC_COPY_TYPES, nic_rows)
        # The (NIC, hour)s written into: their rollups are due (compaction recomputes them).
        nicrollup.mark_due(cur, {(r[1], r[0] - r[0] % _HOUR_US) for r in nic_rows})
        _copy(cur, JOB_SAMPLE_TABLE, JOB_SAMPLE_COLUMNS, JOB_COPY_TYPES, job_rows)
        _update_latest(cur, gpu_rows, nic_rows)
    return results


def _upsert_nodes(cur, batches: list[Batch], seen: list[dt.datetime], received_at
                  ) -> dict[tuple[str, str], tuple[int, int]]:
    """Clusters and nodes, one statement each: {(cluster, node): (node id, cluster id)}.

    Several batches of one node in a flush make one row (its newest description), sorted so
    that two consumers lock nodes in the same order.
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
    cur.execute(
        """
        INSERT INTO inventory_cluster (name, created_at)
        SELECT u.name, %s FROM unnest(%b::text[]) AS u(name)
        ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING name, id
        """,
        (received_at, clusters),
    )
    cluster_ids = dict(cur.fetchall())
    rows = [newest[k] for k in keys]
    cur.execute(
        """
        INSERT INTO inventory_node
            (cluster_id, name, agent_version, simulated, sample_interval_s, first_seen,
             last_seen)
        SELECT u.cluster, u.name, u.version, u.simulated, u.interval, u.seen, u.seen
        FROM unnest(%b::int[], %b::text[], %b::text[], %b::bool[], %b::float8[],
                    %b::timestamptz[]) AS u(cluster, name, version, simulated, interval, seen)
        ON CONFLICT (cluster_id, name) DO UPDATE SET
            agent_version = EXCLUDED.agent_version,
            simulated = EXCLUDED.simulated,
            sample_interval_s = COALESCE(EXCLUDED.sample_interval_s,
                                         inventory_node.sample_interval_s),
            last_seen = GREATEST(inventory_node.last_seen, EXCLUDED.last_seen)
        RETURNING cluster_id, name, id
        """,
        (
            [cluster_ids[c] for c, _n in keys], [n for _c, n in keys],
            [b.agent_version for _w, b, _i in rows], [b.simulated for _w, b, _i in rows],
            [i for _w, _b, i in rows], [w for w, _b, _i in rows],
        ),
        binary=True,  # arrays in binary: no per-element quoting
    )
    by_name = {(cid, name): nid for cid, name, nid in cur.fetchall()}
    return {(c, n): (by_name[(cluster_ids[c], n)], cluster_ids[c]) for c, n in keys}


def _log_batches(cur, batches: list[Batch], spans, nodes, received_at) -> list[int | None]:
    """Insert the batches' keys into the ingest log; the new id of each, None for a batch
    stored before (or twice in this flush: the first copy wins)."""
    node_ids = [nodes[(b.cluster, b.node)][0] for b in batches]
    cur.execute(
        """
        INSERT INTO ingest_ingestbatch
            (node_id, boot_id, seq, sent_at, received_at, first_ts, last_ts,
             gpu_samples, nic_samples, job_samples, events, rejected,
             rejected_reasons, rejected_examples, spool_dropped, key_id)
        SELECT u.node, u.boot, u.seq, u.sent, %s, u.first, u.last, u.gpu, u.nic, u.job,
               u.events, u.rejected, u.reasons, u.examples, u.dropped, u.key
        FROM unnest(%b::bigint[], %b::text[], %b::bigint[], %b::timestamptz[],
                    %b::timestamptz[], %b::timestamptz[], %b::int[], %b::int[], %b::int[],
                    %b::int[], %b::int[], %b::jsonb[], %b::jsonb[], %b::int[], %b::text[])
             WITH ORDINALITY AS u(node, boot, seq, sent, first, last, gpu, nic, job, events,
                                  rejected, reasons, examples, dropped, key, pos)
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
        ),
        binary=True,  # arrays in binary: no per-element quoting
    )
    new = {(node, boot, seq): batch_id for node, boot, seq, batch_id in cur.fetchall()}
    ids = []
    for node_id, batch in zip(node_ids, batches, strict=True):
        ids.append(new.pop((node_id, batch.boot_id, batch.seq), None))
    return ids


def _cached(cur, kind: str, owner_id: int, content, upsert, *args):
    """Upsert an inventory only when it changed (or its last_seen is due a refresh)."""
    ids = inventory_cache.lookup(kind, owner_id, content)
    if ids is None:
        ids = upsert(cur, *args)
        inventory_cache.remember(kind, owner_id, content, ids)
    return ids


def _copy(cur, table: str, columns: tuple[str, ...], types: tuple[str, ...],
          rows: list[tuple]) -> None:
    if not rows:
        return
    with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def _upsert_gpus(cur, batch: Batch, node_id: int, seen_at) -> dict[int, int]:
    if not batch.gpus:
        return {}
    positions = list(batch.gpus)
    g = [batch.gpus[p] for p in positions]
    cur.execute(
        """
        INSERT INTO inventory_gpu (node_id, uuid, index, model, memory_total_mib, power_limit_w,
                                   pci_bus_id, nvlink_bytes_per_s, mig_mode, first_seen, last_seen)
        SELECT %s, u.uuid, u.idx, u.model, u.mem, u.power, u.pci, u.nvl, u.mig, %s, %s
        FROM unnest(%s::text[], %s::int[], %s::text[], %s::int[], %s::float8[], %s::text[],
                    %s::float8[], %s::bool[]) AS u(uuid, idx, model, mem, power, pci, nvl, mig)
        ON CONFLICT (uuid) DO UPDATE SET
            node_id = EXCLUDED.node_id, index = EXCLUDED.index,
            model = COALESCE(NULLIF(EXCLUDED.model, ''), inventory_gpu.model),
            memory_total_mib = COALESCE(EXCLUDED.memory_total_mib, inventory_gpu.memory_total_mib),
            power_limit_w = COALESCE(EXCLUDED.power_limit_w, inventory_gpu.power_limit_w),
            pci_bus_id = COALESCE(NULLIF(EXCLUDED.pci_bus_id, ''), inventory_gpu.pci_bus_id),
            nvlink_bytes_per_s = EXCLUDED.nvlink_bytes_per_s,
            mig_mode = EXCLUDED.mig_mode,
            last_seen = GREATEST(inventory_gpu.last_seen, EXCLUDED.last_seen)
        RETURNING uuid, id
        """,
        (
            node_id, seen_at, seen_at,
            [x["uuid"] for x in g], [x["index"] for x in g], [x["model"] for x in g],
            [x["memory_total_mib"] for x in g], [x["power_limit_w"] for x in g],
            [x["pci_bus_id"] for x in g], [x["nvlink_bytes_per_s"] for x in g],
            [x["mig_mode"] for x in g],
        ),
    )
    by_uuid = dict(cur.fetchall())
    return {p: by_uuid[batch.gpus[p]["uuid"]] for p in positions}


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


def _upsert_jobs(cur, batch: Batch, cluster_id: int, gpu_ids: dict[int, int], seen_at
                 ) -> dict[str, int]:
    if not batch.jobs:
        return {}
    # Sorted, so that two workers upserting the same multi-node jobs lock them in one order.
    jobs = sorted(batch.jobs.values(), key=lambda j: (j["scheduler"], j["id"]))
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
                              last_seen)
        SELECT %s, u.sched, u.ext, u.usr, u.name, u.acct, u.part,
               CASE WHEN u.ended IS NULL THEN 'running' ELSE 'ended' END,
               u.started, u.ended, u.cpus, u.seen, u.seen
        FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                    %s::timestamptz[], %s::timestamptz[], %s::int[], %s::timestamptz[])
             AS u(sched, ext, usr, name, acct, part, started, ended, cpus, seen)
        ON CONFLICT ON CONSTRAINT job_identity_uniq DO UPDATE SET
            "user" = COALESCE(NULLIF(EXCLUDED."user", ''), jobs_job."user"),
            name = COALESCE(NULLIF(EXCLUDED.name, ''), jobs_job.name),
            account = COALESCE(NULLIF(EXCLUDED.account, ''), jobs_job.account),
            partition = COALESCE(NULLIF(EXCLUDED.partition, ''), jobs_job.partition),
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
            last_seen = GREATEST(jobs_job.last_seen, EXCLUDED.last_seen)
        RETURNING external_id, id
        """,
        (
            cluster_id,
            [j["scheduler"] for j in jobs], [j["id"] for j in jobs], [j["user"] for j in jobs],
            [j["name"] for j in jobs], [j["account"] for j in jobs],
            [j["partition"] for j in jobs], [_dt(j["started_at"]) for j in jobs],
            [_dt(j["ended_at"]) for j in jobs], [j["cpus"] for j in jobs],
            [_dt(newest[j["id"]]) if j["id"] in newest else seen_at for j in jobs],
        ),
    )
    job_ids = dict(cur.fetchall())
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


def _insert_events(cur, batch: Batch, gpu_ids: dict[int, int], batch_id: int) -> None:
    if not batch.events:
        return
    ev = batch.events
    cur.execute(
        """
        INSERT INTO telemetry_gpuevent (gpu_id, ts, kind, code, message, batch_id)
        SELECT u.gpu, u.ts, u.kind, u.code, u.msg, %s
        FROM unnest(%s::bigint[], %s::timestamptz[], %s::text[], %s::int[], %s::text[])
             AS u(gpu, ts, kind, code, msg)
        """,
        (batch_id, [gpu_ids[e["gpu"]] for e in ev], [_dt(e["ts"]) for e in ev],
         [e["kind"] for e in ev], [e["code"] for e in ev], [e["message"] for e in ev]),
    )


_LATEST_GPU_COLS = ("gpu_id", "ts", "job_id", *GPU_METRIC_NAMES)
_LATEST_GPU_TYPES = ("bigint", "timestamptz", "bigint",
                     *(m.sql_type for m in GPU_METRICS))


def _float(value):
    return None if value is None else float(value)


def _newest(rows: list[tuple]) -> list[tuple]:
    """Each device's newest row (rows are (ts, device id, ...)), in device order."""
    newest: dict[int, tuple] = {}
    for row in rows:
        if row[1] not in newest or row[0] > newest[row[1]][0]:
            newest[row[1]] = row
    return [newest[k] for k in sorted(newest)]


def _update_latest(cur, gpu_rows: list[tuple], nic_rows: list[tuple]) -> None:
    """Upsert the "now" tables in one statement each, newer sample wins."""
    gpus = _newest(gpu_rows)
    if gpus:
        columns = list(zip(*[(r[1], _from_pg_micros(r[0]), *r[2:]) for r in gpus], strict=True))
        # One type per array: validation may leave an int in a real column.
        columns = [c if t not in ("real", "double precision") else
                   [None if v is None else float(v) for v in c]
                   for c, t in zip(columns, _LATEST_GPU_TYPES, strict=True)]
        cols = ", ".join(_LATEST_GPU_COLS)
        arrays = ", ".join(f"%b::{t}[]" for t in _LATEST_GPU_TYPES)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _LATEST_GPU_COLS[1:])
        cur.execute(
            f"INSERT INTO telemetry_gpulatest ({cols}) SELECT * FROM unnest({arrays}) "
            f"ON CONFLICT (gpu_id) DO UPDATE SET {updates} "
            "WHERE telemetry_gpulatest.ts <= EXCLUDED.ts",
            [list(c) for c in columns],
            binary=True,
        )
    nics = _newest(nic_rows)
    if nics:
        columns = list(zip(*[(r[1], _from_pg_micros(r[0]), _float(r[2]), _float(r[3]))
                             for r in nics],
                           strict=True))
        cur.execute(
            "INSERT INTO telemetry_niclatest (nic_id, ts, rx_bytes_per_s, tx_bytes_per_s) "
            "SELECT * FROM unnest(%b::bigint[], %b::timestamptz[], %b::float8[], %b::float8[]) "
            "ON CONFLICT (nic_id) DO UPDATE SET ts = EXCLUDED.ts, "
            "rx_bytes_per_s = EXCLUDED.rx_bytes_per_s, tx_bytes_per_s = EXCLUDED.tx_bytes_per_s "
            "WHERE telemetry_niclatest.ts <= EXCLUDED.ts",
            [list(c) for c in columns],
            binary=True,
        )
