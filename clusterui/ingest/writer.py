"""Storing a validated batch: inventory upserts, the ingest log and bulk COPY of samples.

One transaction per batch. Its first write is the batch's key in the ingest log; when that
key is already there the batch was stored before (a redelivery) and nothing else is written.
Samples go in with ``COPY``, never row by row; inventory with one statement per kind.
"""

import datetime as dt
import logging
from dataclasses import dataclass

import psycopg
from django.db import connection, transaction

from clusterui.ingest import inventory_cache
from clusterui.ingest.validate import Batch
from clusterui.telemetry import partitions
from clusterui.telemetry.metrics import (
    GPU_METRIC_NAMES,
    GPU_METRICS,
    GPU_SAMPLE_COLUMNS,
    GPU_SAMPLE_TABLE,
    JOB_SAMPLE_COLUMNS,
    JOB_SAMPLE_TABLE,
    NIC_SAMPLE_COLUMNS,
    NIC_SAMPLE_TABLE,
)

log = logging.getLogger(__name__)
UTC = dt.UTC


@dataclass
class StoreResult:
    batch_id: int | None
    duplicate: bool
    gpu_samples: int = 0
    nic_samples: int = 0
    job_samples: int = 0
    rejected: int = 0


def _dt(ts: float | None) -> dt.datetime | None:
    return None if ts is None else dt.datetime.fromtimestamp(ts, UTC)


def store_batch(batch: Batch, *, received_at: dt.datetime | None = None) -> StoreResult:
    received_at = received_at or dt.datetime.now(UTC)
    stamps = list(batch.timestamps) + [e["ts"] for e in batch.events]
    partitions.ensure_partitions({_dt(ts).date() for ts in stamps})
    try:
        return _store(batch, stamps, received_at)
    except psycopg.errors.CheckViolation as exc:
        # Another process dropped a partition this one believed in: relearn and retry once.
        if "no partition" not in str(exc):
            raise
        partitions.forget_known()
        partitions.ensure_partitions({_dt(ts).date() for ts in stamps})
        return _store(batch, stamps, received_at)


def _store(batch: Batch, stamps: list[float], received_at: dt.datetime) -> StoreResult:
    first_ts, last_ts = (min(stamps), max(stamps)) if stamps else (None, None)
    seen_at = _dt(last_ts if last_ts is not None else batch.sent_at) or received_at
    with transaction.atomic(), connection.cursor() as wrapper:
        cur = wrapper.cursor  # the psycopg cursor: COPY needs it
        # The cluster and the node in one round trip.
        cur.execute(
            """
            WITH cluster AS (
                INSERT INTO inventory_cluster (name, created_at) VALUES (%s, %s)
                ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id
            )
            INSERT INTO inventory_node
                (cluster_id, name, agent_version, simulated, sample_interval_s, first_seen,
                 last_seen)
            SELECT cluster.id, %s, %s, %s, %s, %s, %s FROM cluster
            ON CONFLICT (cluster_id, name) DO UPDATE SET
                agent_version = EXCLUDED.agent_version,
                simulated = EXCLUDED.simulated,
                sample_interval_s = COALESCE(EXCLUDED.sample_interval_s,
                                             inventory_node.sample_interval_s),
                last_seen = GREATEST(inventory_node.last_seen, EXCLUDED.last_seen)
            RETURNING id, cluster_id
            """,
            (batch.cluster, received_at, batch.node, batch.agent_version, batch.simulated,
             batch.interval_s, seen_at, seen_at),
        )
        node_id, cluster_id = cur.fetchone()
        cur.execute(
            """
            INSERT INTO ingest_ingestbatch
                (node_id, boot_id, seq, sent_at, received_at, first_ts, last_ts,
                 gpu_samples, nic_samples, job_samples, events, rejected,
                 rejected_reasons, rejected_examples, spool_dropped, key_id)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT ON CONSTRAINT ingest_batch_key DO NOTHING
            RETURNING id
            """,
            (
                node_id, batch.boot_id, batch.seq, _dt(batch.sent_at), received_at,
                _dt(first_ts), _dt(last_ts), len(batch.gpu_rows), len(batch.nic_rows),
                len(batch.job_rows), len(batch.events), batch.rejected_total,
                psycopg.types.json.Jsonb(dict(batch.rejected)),
                psycopg.types.json.Jsonb(batch.examples), batch.spool_dropped, batch.key_id,
            ),
        )
        row = cur.fetchone()
        if row is None:
            return StoreResult(batch_id=None, duplicate=True)
        batch_id = row[0]

        gpu_ids = _cached(cur, "gpus", node_id, batch.gpus, _upsert_gpus, batch, node_id,
                          seen_at)
        nic_ids = _cached(cur, "nics", node_id, batch.nics, _upsert_nics, batch, node_id,
                          seen_at)
        job_ids = _cached(cur, "jobs", node_id, [batch.jobs, gpu_ids], _upsert_jobs, batch,
                          cluster_id, gpu_ids, seen_at)

        gpu_rows = [
            (_dt(r[0]), gpu_ids[r[1]], None if r[2] is None else job_ids[r[2]], *r[3:])
            for r in batch.gpu_rows
        ]
        nic_rows = [(_dt(r[0]), nic_ids[r[1]], *r[2:]) for r in batch.nic_rows]
        job_rows = [(_dt(r[0]), job_ids[r[1]], node_id, *r[2:]) for r in batch.job_rows]
        _copy(cur, GPU_SAMPLE_TABLE, GPU_SAMPLE_COLUMNS, gpu_rows)
        _copy(cur, NIC_SAMPLE_TABLE, NIC_SAMPLE_COLUMNS, nic_rows)
        _copy(cur, JOB_SAMPLE_TABLE, JOB_SAMPLE_COLUMNS, job_rows)
        _insert_events(cur, batch, gpu_ids, batch_id)
        _update_latest(cur, gpu_rows, nic_rows)
    return StoreResult(
        batch_id=batch_id, duplicate=False, gpu_samples=len(gpu_rows),
        nic_samples=len(nic_rows), job_samples=len(job_rows), rejected=batch.rejected_total,
    )


def _cached(cur, kind: str, owner_id: int, content, upsert, *args):
    """Upsert an inventory only when it changed (or its last_seen is due a refresh)."""
    ids = inventory_cache.lookup(kind, owner_id, content)
    if ids is None:
        ids = upsert(cur, *args)
        inventory_cache.remember(kind, owner_id, content, ids)
    return ids


def _copy(cur, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    if not rows:
        return
    with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
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
        columns = list(zip(*[(r[1], r[0], *r[2:]) for r in gpus], strict=True))
        cols = ", ".join(_LATEST_GPU_COLS)
        arrays = ", ".join(f"%s::{t}[]" for t in _LATEST_GPU_TYPES)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _LATEST_GPU_COLS[1:])
        cur.execute(
            f"INSERT INTO telemetry_gpulatest ({cols}) SELECT * FROM unnest({arrays}) "
            f"ON CONFLICT (gpu_id) DO UPDATE SET {updates} "
            "WHERE telemetry_gpulatest.ts <= EXCLUDED.ts",
            [list(c) for c in columns],
        )
    nics = _newest(nic_rows)
    if nics:
        columns = list(zip(*[(r[1], r[0], r[2], r[3]) for r in nics], strict=True))
        cur.execute(
            "INSERT INTO telemetry_niclatest (nic_id, ts, rx_bytes_per_s, tx_bytes_per_s) "
            "SELECT * FROM unnest(%s::bigint[], %s::timestamptz[], %s::float8[], %s::float8[]) "
            "ON CONFLICT (nic_id) DO UPDATE SET ts = EXCLUDED.ts, "
            "rx_bytes_per_s = EXCLUDED.rx_bytes_per_s, tx_bytes_per_s = EXCLUDED.tx_bytes_per_s "
            "WHERE telemetry_niclatest.ts <= EXCLUDED.ts",
            [list(c) for c in columns],
        )
