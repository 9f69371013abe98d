"""Bounded bookkeeping: ingest-log rows older than INGEST_LOG_RETENTION_DAYS are deleted.

One row per batch stored (``ingest_ingestbatch``, about 280 bytes) and one per batch
refused (``ingest_rejectedbatch``): at 100,000 GPUs and a 10 s flush that is some 30 GB a
day, so beat (``prune-ingest-log``) deletes the old ones, oldest first, in transactions of
``INGEST_LOG_PRUNE_ROWS`` rows (short locks, bounded WAL per commit) until none is left or
the run's time budget is spent; the next run goes on.

Nothing of the telemetry goes with them: the only reference to a log row is
``telemetry_gpuevent.batch_id`` (which batch brought the event), set to NULL in the same
transaction before its batch row is deleted. Idempotency needs no old keys: a batch
redelivered after a week is long out of every queue. The health page takes gaps from counts kept
per collector run (``IngestRun``, kept by the writer), so pruning creates no phantom gaps;
a run is pruned once its last batch is older than the retention.
"""

import datetime as dt
import logging
import time
from dataclasses import dataclass

from celery import shared_task
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

log = logging.getLogger(__name__)


@dataclass
class PruneResult:
    batches: int = 0  # ingest_ingestbatch rows deleted
    refusals: int = 0  # ingest_rejectedbatch rows deleted
    runs: int = 0  # ingest_ingestrun rows whose last batch is that old
    events_detached: int = 0  # telemetry_gpuevent rows whose batch_id was set to NULL
    transactions: int = 0
    unfinished: bool = False  # stopped by the time budget: the next run goes on


def prune_ingest_log(now: dt.datetime | None = None, *, rows: int | None = None,
                     budget_s: float = 60.0) -> PruneResult:
    now = now or timezone.now()
    cutoff = now - dt.timedelta(days=settings.INGEST_LOG_RETENTION_DAYS)
    rows = rows or settings.INGEST_LOG_PRUNE_ROWS
    began = time.monotonic()
    result = PruneResult()
    for table in ("ingest_ingestbatch", "ingest_rejectedbatch", "ingest_ingestrun"):
        while True:
            if time.monotonic() - began > budget_s:
                result.unfinished = True
                break
            with transaction.atomic(), connection.cursor() as cur:
                # Oldest first through the received_at index (the runs, a row per collector
                # run, are read whole: ingest 0008); SKIP LOCKED: two pruning passes never
                # wait on each other. (A run is pruned once its last batch is that old.)
                column = "last_received" if table == "ingest_ingestrun" else "received_at"
                cur.execute(
                    f"SELECT id FROM {table} WHERE {column} < %s "
                    f"ORDER BY {column} LIMIT %s FOR UPDATE SKIP LOCKED",
                    [cutoff, rows])
                ids = [r[0] for r in cur.fetchall()]
                if not ids:
                    break
                if table == "ingest_ingestbatch":
                    cur.execute("UPDATE telemetry_gpuevent SET batch_id = NULL "
                                "WHERE batch_id = ANY(%s)", [ids])
                    result.events_detached += cur.rowcount
                cur.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [ids])
                if table == "ingest_ingestbatch":
                    result.batches += cur.rowcount
                elif table == "ingest_rejectedbatch":
                    result.refusals += cur.rowcount
                else:
                    result.runs += cur.rowcount
            result.transactions += 1
            if len(ids) < rows:
                break
    if result.batches or result.refusals:
        log.info("ingest log pruned before %s: %d batches, %d refusals (%d events kept, "
                 "detached)%s", cutoff, result.batches, result.refusals,
                 result.events_detached, "; more next run" if result.unfinished else "")
    return result


@shared_task(name="clusterui.ingest.prune_ingest_log", ignore_result=True)
def prune_ingest_log_task():
    """Delete ingest-log rows older than INGEST_LOG_RETENTION_DAYS (bounded batches)."""
    prune_ingest_log(budget_s=settings.CELERY_TASK_TIME_LIMIT * 0.5)
