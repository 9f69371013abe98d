"""The detector pass: efficiency and findings for running jobs and jobs that just ended.

One pass (``run_pass``), in one transaction under an advisory lock (a second pass started
meanwhile returns at once):

1. Pick the jobs: running ones, and ended ones whose books are not closed yet.
2. For each, the new data is (through, t1]: ``through`` is where the last pass stopped;
   ``t1`` is ``DETECTOR_SETTLE_S`` before now, and no later than the newest data of the
   slowest of its nodes that still reports (its batches may still be in flight), and no
   later than the job's end. A job whose end all its nodes have reported past is final.
3. Add the new samples to the per-minute slices and the efficiency totals (``slices``),
   many jobs per statement, and recompute ``JobEfficiency`` (``efficiency``).
4. Read each job's window (``window``): the last ``DETECTOR_WINDOW_S`` of its data, never
   inside its first ``DETECTOR_GRACE_S``. Judge it when it spans ``DETECTOR_MIN_SPAN_S`` and
   every GPU in it has ``DETECTOR_MIN_SAMPLES`` samples; GPU errors are judged always.
5. Open, update or close findings (``record``); close a final job's findings at its end.
6. Node findings for GPU errors on GPUs no job held, and for degraded or erroring fabric
   links (``fabric.verdicts``); prune slices no window reaches.
7. Recount the jobs whose group, end or figures changed into the hourly usage sums the
   overview reads (``usage_rollup.fold``).

The sampling interval is the nodes' own (``Node.sample_interval_s``): nothing assumes 10 s.
"""

import datetime as dt
import logging
import time
import zlib
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from clusterui.fabric import verdicts as fabric_verdicts
from clusterui.findings import bulk, efficiency, late, record, slices, usage_rollup
from clusterui.findings.choices import FindingKind, FindingState
from clusterui.findings.detectors import RETIRED_KINDS, WINDOW_DETECTORS, gpu_errors, gpu_health
from clusterui.findings.models import Finding, JobEfficiency, LateSpan
from clusterui.findings.thresholds import Thresholds
from clusterui.findings.window import GpuEventRow, GpuInfo, JobWindow, read_windows
from clusterui.inventory.choices import NicKind
from clusterui.inventory.models import Nic, Node
from clusterui.jobs.choices import JobState
from clusterui.jobs.models import Job, JobGpu

log = logging.getLogger(__name__)

LOCK_KEY = zlib.crc32(b"clusterui.findings.run_detectors")
DEFAULT_INTERVAL_S = 10.0
CATCH_UP_S = 900  # jobs with more new data than this go in their own statements
# The retired kinds are judged (never decided): a finding of theirs still open closes.
WINDOW_KINDS = {d.KIND for d in WINDOW_DETECTORS} | RETIRED_KINDS


@dataclass
class PassResult:
    jobs: int = 0
    behind: int = 0  # jobs still catching up on a backlog (next passes go on)
    late: int = 0  # (job, node) spans of samples that came after the pass had passed them
    judged: int = 0
    finalized: int = 0
    opened: int = 0
    updated: int = 0
    closed: int = 0
    locked_out: bool = False
    seconds: float = 0.0


@dataclass
class _Plan:
    job: Job
    eff: JobEfficiency
    work: slices.Work
    start: dt.datetime
    interval_s: float
    final: bool
    end: dt.datetime | None
    caught_up: bool = True


def run_pass(now: dt.datetime | None = None, thresholds: Thresholds | None = None
             ) -> PassResult:
    now = now or timezone.now()
    t = thresholds or Thresholds.from_settings()
    began = time.perf_counter()
    result = PassResult()
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_xact_lock(%s)", [LOCK_KEY])
            if not cur.fetchone()[0]:
                result.locked_out = True
                return result
            # The pass groups tens of thousands of rows in memory when it catches up; its
            # statements' cost estimates (arrays of thousands of rows) would make PostgreSQL
            # spend a second JIT-compiling queries that run in tens of milliseconds.
            cur.execute("SET LOCAL work_mem = '64MB'")
            cur.execute("SET LOCAL jit = off")
        try:
            _run(now, t, result)
        except late.LateLockBusy:
            # A flush held the lock too long: nothing was written; the next beat goes on.
            log.warning("detector pass skipped: a flush held the late-span lock for over %s",
                        late.LATE_LOCK_TIMEOUT)
            result.locked_out = True
            return result
    result.seconds = time.perf_counter() - began
    log.info("detector pass: %d jobs, %d judged, %d finalized; findings %d opened, "
             "%d updated, %d closed; %.2f s", result.jobs, result.judged, result.finalized,
             result.opened, result.updated, result.closed, result.seconds)
    return result


def _select_jobs(now: dt.datetime, t: Thresholds) -> list[Job]:
    cutoff = now - dt.timedelta(seconds=t.final_lookback_s)
    unfinished = Q(efficiency__isnull=True) | Q(efficiency__finalized_at__isnull=True)
    return list(
        Job.objects.filter(Q(state=JobState.RUNNING)
                           | (Q(state=JobState.ENDED, ended_at__gte=cutoff) & unfinished))
        .select_related("efficiency")
    )


def oldest_unread(now: dt.datetime | None = None, thresholds: Thresholds | None = None
                  ) -> dt.datetime | None:
    """The time of the oldest raw GPU sample a coming pass may still read, or None.

    Passes read the hot table only (``slices``): a job's samples after its ``through``, and
    a job seen for the first time from its first sample. Compaction moves no hot row at or
    after this time, so no sample leaves the hot table before the detectors have read it.
    """
    now = now or timezone.now()
    t = thresholds or Thresholds.from_settings()
    jobs = _select_jobs(now, t)
    eff = {j.id: getattr(j, "efficiency", None) for j in jobs}
    marks = [e.through for e in eff.values() if e is not None and e.through is not None]
    fresh = [j for j in jobs if eff[j.id] is None or eff[j.id].through is None]
    if fresh:
        gpus_of = _load_gpus([j.id for j in fresh])
        marks += slices.first_samples([(j.id, g.gpu_id, _first_from(j))
                                       for j in fresh for g in gpus_of.get(j.id, ())]).values()
    # Samples that came after a pass had passed them (``late``): read by the next pass.
    marks += LateSpan.objects.values_list("start", flat=True)
    return min(marks) if marks else None


def _first_from(job: Job) -> dt.datetime:
    """Where a job seen for the first time may have samples: from its start (the GPU was
    the job's since), or a day before it was first seen."""
    if job.started_at:
        return job.started_at - dt.timedelta(minutes=1)
    return job.first_seen - dt.timedelta(days=1)


def _load_gpus(job_ids: list[int]) -> dict[int, list[GpuInfo]]:
    out: dict[int, list[GpuInfo]] = {}
    rows = JobGpu.objects.filter(job_id__in=job_ids).values_list(
        "job_id", "gpu_id", "gpu__uuid", "gpu__index", "gpu__node_id", "gpu__node__name",
        "gpu__model", "gpu__memory_total_mib", "gpu__nvlink_bytes_per_s", "gpu__mig_share",
    )
    for job_id, gpu_id, uuid, index, node_id, node, model, mem, nvl, share in rows:
        out.setdefault(job_id, []).append(GpuInfo(gpu_id, uuid, index, node_id, node, model,
                                                  mem, nvl, share))
    return out


def _fabric(node_ids) -> dict[int, list[tuple[int, float]]]:
    """Each node's fabric NICs: InfiniBand/RoCE where it has any, else its Ethernet ones."""
    fast, other = {}, {}
    rows = Nic.objects.filter(node_id__in=node_ids, link_bytes_per_s__gt=0).values_list(
        "id", "node_id", "kind", "link_bytes_per_s")
    for nic_id, node_id, kind, cap in rows:
        bucket = fast if kind in (NicKind.INFINIBAND, NicKind.ROCE) else other
        bucket.setdefault(node_id, []).append((nic_id, cap))
    return {n: fast.get(n) or other.get(n, []) for n in set(fast) | set(other)}


def _plan(job: Job, gpus: list[GpuInfo], nodes: dict[int, tuple], first: dt.datetime | None,
          now: dt.datetime, t: Thresholds) -> _Plan | None:
    node_ids = sorted({g.node_id for g in gpus})
    interval = max((nodes[n][1] or DEFAULT_INTERVAL_S) for n in node_ids)
    seen = [nodes[n][0] for n in node_ids]
    # A node still reports while its batches keep *arriving* (a node replaying its spool
    # sends old data and is not done); every such node has sent its data up to its seen.
    # A node given up as silent whose batches were in flight meanwhile loses nothing: they
    # commit after this pass and ingest marks them late (``writer._mark_late``).
    live = [nodes[n][0] for n in node_ids
            if (now - nodes[n][2]).total_seconds() <= settings.NODE_SILENT_AFTER_S]
    t1 = min(now - dt.timedelta(seconds=t.settle_s), min(live) if live else max(seen))
    final, end = False, None
    if job.state == JobState.ENDED:
        end = job.ended_at or job.last_seen
        if t1 >= end or not live:
            final = True
        t1 = min(t1, end) if not final else end
    start = job.started_at or job.first_seen
    eff = getattr(job, "efficiency", None) or JobEfficiency(job=job, accum={})
    if eff.through is None and first is None:
        return None  # no sample of this job yet
    # A job seen for the first time starts at its first sample (just before it).
    t0 = eff.through or first - dt.timedelta(microseconds=1)
    # Catching up on a long backlog is spread over passes, so one pass stays bounded; the
    # job is judged again once it has caught up (its findings would otherwise be stale).
    limit = t0 + dt.timedelta(seconds=t.max_samples_per_pass * interval)
    caught_up = t1 <= limit
    if not caught_up:
        t1, final = limit, False
    added = eff.accum.get("gpus", {}) if eff.accum else {}
    prev_energy = {int(k): a.get("energy_last") for k, a in added.items()}
    prev_ts = {int(k): dt.datetime.fromisoformat(a["last_ts"])
               for k, a in added.items() if a.get("last_ts")}
    work = slices.Work(
        job_id=job.id, t0=t0, t1=max(t0, t1),
        keep_from=slices.minute_floor(t1 - dt.timedelta(seconds=t.window_s)),
        cpus_per_node=job.cpus,
        gpus=[(g.gpu_id, g.node_id, g.nvlink_bytes_per_s, prev_energy.get(g.gpu_id),
               prev_ts.get(g.gpu_id)) for g in gpus],
        nodes={n: nodes[n][1] or DEFAULT_INTERVAL_S for n in node_ids},
    )
    return _Plan(job, eff, work, start, interval, final, end, caught_up)


def _accumulate(plans: list[_Plan], fabric, t: Thresholds) -> None:
    """Add each plan's new samples to the slices and to its job's efficiency totals."""
    todo = [p for p in plans if p.work.t1 > p.work.t0]
    steady = [p.work for p in todo if (p.work.t1 - p.work.t0).total_seconds() <= CATCH_UP_S]
    catch_up = [p.work for p in todo if (p.work.t1 - p.work.t0).total_seconds() > CATCH_UP_S]
    by_job = {p.job.id: p for p in todo}
    for group in (steady, catch_up):
        if not group:
            continue
        for (job_id, gpu_id), totals in slices.add_gpu_samples(group, t).items():
            efficiency.add_gpu_totals(by_job[job_id].eff.accum, gpu_id, totals)
        for job_id, totals in slices.add_job_samples(group, fabric, t).items():
            efficiency.add_job_totals(by_job[job_id].eff.accum, totals)


def _run(now: dt.datetime, t: Thresholds, result: PassResult) -> None:
    jobs = _select_jobs(now, t)
    result.jobs = len(jobs)
    late_items = late.affected(late.take_spans(), jobs, now)
    # Finalized jobs that late samples of their lifetime reached: finalized again.
    listed = {j.id for j in jobs}
    for item in late_items:
        if item.job.id not in listed:
            listed.add(item.job.id)
            jobs.append(item.job)
    gpus_of = _load_gpus([j.id for j in jobs])
    node_ids = {g.node_id for gs in gpus_of.values() for g in gs}
    nodes = {n: (seen, interval, heard or seen) for n, seen, interval, heard in
             Node.objects.filter(id__in=node_ids).values_list(
                 "id", "last_seen", "sample_interval_s", "reported_at")}
    _reopen_revived(jobs)
    fabric = _fabric(node_ids)
    fresh = [j for j in jobs if gpus_of.get(j.id) and getattr(j, "efficiency", None) is None]
    firsts = slices.first_samples([(j.id, g.gpu_id, _first_from(j))
                                   for j in fresh for g in gpus_of[j.id]])
    plans = [p for j in jobs if gpus_of.get(j.id)
             for p in [_plan(j, gpus_of[j.id], nodes, firsts.get(j.id), now, t)]
             if p is not None]
    result.behind = sum(1 for p in plans if not p.caught_up)
    result.late = len(late_items)
    _accumulate_late(late_items, gpus_of, nodes, fabric, t)
    _accumulate(plans, fabric, t)
    late_jobs = {i.job.id for i in late_items}

    creates, updates = [], []
    for p in plans:
        if p.work.t1 <= p.work.t0 and not p.final and p.job.id not in late_jobs:
            continue
        p.eff.through = max(p.work.t1, p.eff.through or p.work.t1)
        p.eff.computed_at = now
        nodes_n = len(p.work.nodes)
        efficiency.compute(p.eff, started_at=p.job.started_at, interval_s=p.interval_s,
                           gpus=gpus_of[p.job.id], cpus_per_node=p.job.cpus, nodes=nodes_n)
        if p.eff.window_start is None:
            continue  # no sample of this job yet
        if p.final:
            p.eff.finalized_at = now
        (updates if p.eff._state.adding is False else creates).append(p.eff)
    JobEfficiency.objects.bulk_create(creates)
    bulk.update_rows(updates, [f.name for f in JobEfficiency._meta.fields if not f.primary_key])

    judged_plans = [p for p in plans if p.eff.window_start is not None and p.caught_up
                    and (p.work.t1 > p.work.t0 or p.final or p.job.id in late_jobs)]
    verdicts = _judge(judged_plans, gpus_of, t, result)
    gpu_nodes = {g.gpu_id: g.node_id for gs in gpus_of.values() for g in gs}
    verdicts += _node_errors(now, t)
    verdicts += gpu_health.node_verdicts(now - dt.timedelta(seconds=t.settle_s))
    verdicts += fabric_verdicts.node_verdicts(now, t.window_s, t.settle_s)
    notes = {}
    for item in late_items:
        notes[item.job.id] = late.note(item.t1, item.received_at)
    counts = record.apply(verdicts, gpu_nodes=gpu_nodes, close_after_s=t.close_after_s,
                          late_notes=notes)
    counts.opened += _judge_late(late_items, judged_plans, gpus_of, nodes, gpu_nodes, notes,
                                 t, result)
    finals = {p.job.id: p.end for p in plans if p.final}
    counts.closed += record.close_for_jobs(finals)
    result.opened, result.updated, result.closed = counts.opened, counts.updated, counts.closed
    result.finalized = len(finals)
    slices.prune(now - dt.timedelta(seconds=t.window_s + 7200), list(finals))
    usage_rollup.fold()


def _accumulate_late(items: list[late.Late], gpus_of, nodes, fabric, t: Thresholds) -> None:
    """Add the samples the pass had passed (``late``) to the slices and the jobs' totals,
    in statements of their own (a late span and a job's new data must not meet in one
    counter difference)."""
    work = late.works(items, gpus_of, {n: v[1] for n, v in nodes.items()}, t.window_s,
                      lambda job: job.cpus)
    if not work:
        return
    effs = {i.job.id: i.eff for i in items}
    for (job_id, gpu_id), totals in slices.add_gpu_samples(work, t).items():
        efficiency.add_gpu_totals(effs[job_id].accum, gpu_id, late.without_energy(totals))
    for job_id, totals in slices.add_job_samples(work, fabric, t).items():
        efficiency.add_job_totals(effs[job_id].accum, totals)


def _judge_late(items: list[late.Late], judged: list[_Plan], gpus_of, nodes, gpu_nodes,
                notes, t: Thresholds, result: PassResult) -> int:
    """Judge the window a late span ends, where the pass's own window for the job does not
    reach back to it: findings it raises open (and say so); none is closed or moved."""
    window_start = {p.job.id: p.work.t1 - dt.timedelta(seconds=t.window_s) for p in judged}
    ends: dict[int, late.Late] = {}
    for item in items:
        begins = window_start.get(item.job.id)
        if begins is not None and item.t1 >= begins:
            continue  # the pass's own window holds it
        if item.job.id not in ends or item.t1 > ends[item.job.id].t1:
            ends[item.job.id] = item
    plans = []
    for item in ends.values():
        job = item.job
        nodes_of = sorted({g.node_id for g in gpus_of.get(job.id, ())})
        interval = max((nodes[n][1] or DEFAULT_INTERVAL_S) for n in nodes_of)
        plans.append(_Plan(job, item.eff, slices.Work(
            job_id=job.id, t0=item.t1, t1=item.t1, keep_from=item.t1, cpus_per_node=job.cpus,
            nodes={n: interval for n in nodes_of}), job.started_at or job.first_seen,
            interval, False, None))
    if not plans:
        return 0
    verdicts = _decide(plans, gpus_of, t, result)
    return record.open_late(verdicts, gpu_nodes=gpu_nodes, notes=notes)


def _reopen_revived(jobs: list[Job]) -> None:
    """A job finalized when it fell silent whose data then came (a spool replayed after an
    outage: ingest sets it running again) is judged on, not judged anew: the findings its
    finalization closed are open again, and it will be finalized again at its real end."""
    for job in jobs:
        eff = getattr(job, "efficiency", None)
        if job.state != JobState.RUNNING or eff is None or eff.finalized_at is None:
            continue
        if eff.through is not None:
            Finding.objects.filter(job=job, state=FindingState.CLOSED,
                                   closed_at__gte=eff.through).update(
                state=FindingState.OPEN, closed_at=None)
        eff.finalized_at = None
        JobEfficiency.objects.filter(pk=eff.pk).update(finalized_at=None)


def _judge(plans: list[_Plan], gpus_of, t: Thresholds, result: PassResult
           ) -> list[record.Verdict]:
    verdicts = _decide(plans, gpus_of, t, result)
    effs = {p.job.id: p.eff for p in plans}
    judged = [v for v in verdicts if v.judged]
    for v in judged:
        effs[v.job_id].judged_at = v.end
    bulk.update_rows([effs[v.job_id] for v in judged], ["judged_at"])
    return verdicts


def _decide(plans: list[_Plan], gpus_of, t: Thresholds, result: PassResult
            ) -> list[record.Verdict]:
    """Each plan's window (ending at its ``work.t1``) read and put to the detectors."""
    windows, event_start, judgeable = [], {}, {}
    for p in plans:
        t1 = p.work.t1
        # Not inside the grace period, not older than the window, not before our data.
        span_start = max(p.start + dt.timedelta(seconds=t.grace_s),
                         t1 - dt.timedelta(seconds=t.window_s),
                         efficiency.data_start(p.eff, p.interval_s) or p.eff.window_start)
        w = JobWindow(
            job_id=p.job.id, start=slices.minute_ceil(span_start), end=t1,
            gpus_allocated=len(gpus_of[p.job.id]), nodes=len(p.work.nodes),
            interval_s=p.interval_s, cpus_per_node=p.job.cpus,
            gpu_hours_allocated=p.eff.gpu_hours_allocated, gpu_hours_used=p.eff.gpu_hours_used,
            gpu_hours_wasted=p.eff.gpu_hours_wasted,
            measured_share=(p.eff.measured_pct if p.eff.measured_pct is not None else 100.0)
            / 100.0,
        )
        windows.append(w)
        event_start[p.job.id] = max(p.start, t1 - dt.timedelta(seconds=t.window_s))
        judgeable[p.job.id] = w.span_s >= t.min_span_s
    read_windows(windows, gpus_of, event_start)
    reference: dict[str, float] = {}
    for w in windows:
        for g in w.gpus:
            if g.free_clock_max_mhz and g.free_clock_max_mhz > reference.get(g.model, 0):
                reference[g.model] = g.free_clock_max_mhz
    verdicts = []
    per_gpu_waste = {p.job.id: {u: e.get("wasted_gpu_hours", 0.0)
                                for u, e in p.eff.per_gpu.items()} for p in plans}
    for w in windows:
        w.reference_clock_mhz = reference
        for g in w.gpus:
            g.wasted_gpu_hours = per_gpu_waste[w.job_id].get(g.uuid, 0.0)
        nodes = {g.node_id for g in gpus_of[w.job_id]}
        v = record.Verdict(job_id=w.job_id, node_id=next(iter(nodes)) if len(nodes) == 1
                           else None, kinds={FindingKind.GPU_ERRORS}, end=w.end)
        if judgeable[w.job_id] and w.gpus and w.min_gpu_samples() >= t.min_samples:
            result.judged += 1
            v.judged = True
            v.kinds |= WINDOW_KINDS
            for detector in WINDOW_DETECTORS:
                decision = detector.detect(w, t)
                if decision is not None:
                    v.decisions[decision.kind] = (decision, w.start)
        decision = gpu_errors.detect(w.events, "the job's GPUs", t, event_start[w.job_id])
        if decision is not None:
            v.decisions[decision.kind] = (decision, event_start[w.job_id])
        verdicts.append(v)
    return verdicts


_NODE_EVENTS_SQL = """
SELECT e.ts, e.gpu_id, g.node_id, n.name, g.index, e.kind, e.code, e.message
FROM telemetry_gpuevent e
JOIN inventory_gpu g ON g.id = e.gpu_id
JOIN inventory_node n ON n.id = g.node_id
WHERE e.ts >= %s AND e.ts <= %s AND e.kind IN ('xid', 'gpu_lost')
  AND NOT EXISTS (
      SELECT 1 FROM jobs_jobgpu a JOIN jobs_job j ON j.id = a.job_id
      WHERE a.gpu_id = e.gpu_id
        AND e.ts >= COALESCE(j.started_at, j.first_seen) - interval '1 minute'
        AND (j.ended_at IS NULL OR e.ts <= j.ended_at + interval '1 minute'))
ORDER BY e.ts
"""


def _node_errors(now: dt.datetime, t: Thresholds) -> list[record.Verdict]:
    """GPU errors on GPUs no job held: a finding on the node, for the administrators."""
    end = now - dt.timedelta(seconds=t.settle_s)
    start = end - dt.timedelta(seconds=t.window_s)
    by_node: dict[int, list[GpuEventRow]] = {}
    with connection.cursor() as cur:
        cur.execute(_NODE_EVENTS_SQL, [start, end])
        for ts, gpu_id, node_id, node, index, kind, code, message in cur.fetchall():
            by_node.setdefault(node_id, []).append(
                GpuEventRow(ts, gpu_id, node, index, kind, code, message))
    from clusterui.findings.models import Finding

    open_nodes = set(Finding.objects.open().filter(job__isnull=True,
                                                   kind=FindingKind.GPU_ERRORS)
                     .values_list("node_id", flat=True))
    verdicts = []
    for node_id in set(by_node) | open_nodes:
        v = record.Verdict(job_id=None, node_id=node_id, kinds={FindingKind.GPU_ERRORS},
                           end=end)
        events = by_node.get(node_id, [])
        if events:
            decision = gpu_errors.detect(events, f"unallocated GPUs of {events[0].node}", t,
                                         start)
            if decision is not None:
                v.decisions[decision.kind] = (decision, start)
        verdicts.append(v)
    return verdicts
