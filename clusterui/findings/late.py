"""Samples that arrive after the detector pass moved past their time.

The pass reads each job's new data as (``through``, t1]: a batch stored later with older
samples (batches out of order, or a node's spool replayed while the job's other nodes went
on) would never be read. Ingest records such a batch's span (``LateSpan``, written by
``writer._mark_late``); the next pass, holding ``LATE_LOCK_KEY`` so that no late batch
commits while it runs, takes the spans and for each job that holds GPUs on the node and had
passed the span's start:

- adds the span's samples up to ``through`` to the job's slices and totals (``accumulate``)
  exactly as a pass would have, except energy: the counter's difference across the gap was
  already counted, so late samples add none;
- has the pass judge the job again (its window ends at ``through``), and where the span
  ends before that window begins, judges the window the span ends (``judge``): a finding
  raised there says it came from late data;
- re-finalizes a job already finalized (within ``DETECTOR_LATE_HORIZON_S`` of its end).

A span no job had passed (the pass waited for the node) is simply deleted: its samples are
after ``through`` and the pass reads them as usual.
"""

import datetime as dt
import zlib
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.db import OperationalError, connection, transaction

from clusterui.findings import slices
from clusterui.findings.models import JobEfficiency
from clusterui.jobs.models import Job

LATE_LOCK_KEY = zlib.crc32(b"clusterui.findings.late_spans")
_MICRO = dt.timedelta(microseconds=1)


@dataclass
class Late:
    """One job's samples on one node that the pass had passed: (t0, t1]."""

    job: Job
    eff: JobEfficiency
    node_id: int
    t0: dt.datetime
    t1: dt.datetime
    received_at: dt.datetime


# How long a pass waits for the flushes being stored to commit. While it waits, flushes that
# start queue behind it (PostgreSQL grants locks in order): a flush held up for long (a row
# another session locked) must not stall all of ingest behind a waiting pass. The pass gives
# up instead (``LateLockBusy``) and the next beat tries again.
LATE_LOCK_TIMEOUT = "5s"


class LateLockBusy(Exception):
    """A flush held the late-span lock for longer than ``LATE_LOCK_TIMEOUT``."""


def take_spans() -> list[tuple[int, dt.datetime, dt.datetime, dt.datetime]]:
    """Wait for the flushes being stored to commit (at most ``LATE_LOCK_TIMEOUT``, else
    ``LateLockBusy``), then take every recorded span."""
    with connection.cursor() as cur:
        cur.execute("SELECT current_setting('lock_timeout'), "
                    "set_config('lock_timeout', %s, true)", [LATE_LOCK_TIMEOUT])
        before = cur.fetchone()[0]
        try:
            with transaction.atomic():  # a savepoint: the pass's transaction stays usable
                cur.execute("SELECT pg_advisory_xact_lock(%s)", [LATE_LOCK_KEY])
        except OperationalError as exc:
            if isinstance(exc.__cause__, psycopg.errors.LockNotAvailable):
                raise LateLockBusy from exc
            raise
        finally:
            cur.execute("SELECT set_config('lock_timeout', %s, true)", [before])
        cur.execute('DELETE FROM findings_latespan RETURNING node_id, start, "end", '
                    "received_at")
        return cur.fetchall()


_JOBS_SQL = """
SELECT DISTINCT a.job_id, g.node_id
FROM jobs_jobgpu a
JOIN inventory_gpu g ON g.id = a.gpu_id
JOIN jobs_job j ON j.id = a.job_id
JOIN findings_jobefficiency e ON e.job_id = j.id
WHERE g.node_id = ANY(%s) AND e.through IS NOT NULL
  AND (j.ended_at IS NULL OR j.ended_at >= %s)
"""


def affected(spans, jobs: list[Job], now: dt.datetime) -> list[Late]:
    """The (job, node) pairs whose passed-over time a span reaches into.

    ``jobs`` are the pass's own (loaded with their efficiency); a job outside it (already
    finalized) is loaded here when it ended within the horizon."""
    if not spans:
        return []
    horizon = now - dt.timedelta(seconds=settings.DETECTOR_LATE_HORIZON_S)
    with connection.cursor() as cur:
        cur.execute(_JOBS_SQL, [sorted({s[0] for s in spans}), horizon])
        pairs = cur.fetchall()
    known = {j.id: j for j in jobs}
    extra = {j.id: j for j in Job.objects.filter(
        id__in={job_id for job_id, _n in pairs} - set(known)).select_related("efficiency")}
    out = []
    for job_id, node_id in pairs:
        job = known.get(job_id) or extra.get(job_id)
        eff = getattr(job, "efficiency", None) if job else None
        if eff is None or eff.through is None:
            continue
        for span_node, lo, hi, received in spans:
            if span_node != node_id or lo > eff.through:
                continue
            end = min(hi, eff.through)
            if job.ended_at is not None:
                end = min(end, job.ended_at)
            start = job.started_at or job.first_seen
            # A span of one sample (a batch of one sample: 60 s sampling) has lo == hi.
            if end < lo or (start is not None and end <= start):
                continue
            out.append(Late(job, eff, node_id, lo - _MICRO, end, received))
    return out


def works(items: list[Late], gpus_of, intervals: dict[int, float], window_s: int,
          cpus) -> list[slices.Work]:
    """One ``slices.Work`` per late item: the job's GPUs on that node, no energy carried."""
    out = []
    for item in items:
        gpus = [(g.gpu_id, g.node_id, g.nvlink_bytes_per_s, None, None)
                for g in gpus_of.get(item.job.id, ()) if g.node_id == item.node_id]
        if not gpus:
            continue
        out.append(slices.Work(
            job_id=item.job.id, t0=item.t0, t1=item.t1,
            keep_from=slices.minute_floor(item.t1 - dt.timedelta(seconds=window_s)),
            cpus_per_node=cpus(item.job), gpus=gpus,
            nodes={item.node_id: intervals.get(item.node_id) or 10.0}))
    return out


def without_energy(totals: dict) -> dict:
    """A late GPU's totals, energy left out: the counter's difference from the sample
    before the gap to the one after it already holds the energy of the samples between."""
    return {**totals, "energy": None, "energy_last": None}


def note(item_end: dt.datetime, received_at: dt.datetime) -> str:
    """What a finding raised from late data adds to its explanation."""
    item_end, received_at = item_end.astimezone(dt.UTC), received_at.astimezone(dt.UTC)
    return (f" Raised from data that reached ClusterUI late: samples up to "
            f"{item_end:%Y-%m-%d %H:%M} UTC arrived at {received_at:%Y-%m-%d %H:%M} UTC, "
            f"after the job had been judged past that time.")
