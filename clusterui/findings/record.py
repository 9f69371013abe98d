"""Turning decisions into findings: open, update while the condition lasts, close when it ends.

At most one open finding per job and kind (per node and kind for node findings): the
partial unique constraints enforce it, and the pass, which holds an advisory lock, keeps to
it by loading the open findings of all the jobs it judged in one query. A finding's
severity only rises while it is open (the worst seen), so an escalation is emailed once
and a finding never quietly downgrades. A finding closes once its condition has been gone
for ``close_after_s`` of data (``DETECTOR_CLOSE_AFTER_S``): a job hovering at a threshold
keeps one finding instead of a new one, and a new email, every few minutes.
"""

import datetime as dt
from dataclasses import dataclass, field

from django.db.models import F, Q, Value
from django.db.models.functions import Greatest

from clusterui.findings import bulk
from clusterui.findings.choices import FindingState, Severity
from clusterui.findings.detectors.base import Decision
from clusterui.findings.models import Finding

UPDATE_FIELDS = ["severity", "window_start", "window_end", "last_seen", "evidence",
                 "wasted_gpu_hours", "title", "explanation", "suggestion", "gpu", "node"]
CLOSE_FIELDS = ["state", "closed_at"]


@dataclass
class Verdict:
    """What a pass concluded about one job (or one node, ``job_id`` None) for some kinds."""

    job_id: int | None
    node_id: int | None
    kinds: set[str]  # the kinds that were judged: those not decided are closed if open
    decisions: dict[str, tuple[Decision, dt.datetime]] = field(default_factory=dict)
    end: dt.datetime | None = None  # data time the verdict was reached at
    judged: bool = False  # the window detectors ran (not GPU errors alone)


@dataclass
class Counts:
    opened: int = 0
    updated: int = 0
    closed: int = 0


def _key(job_id, node_id, kind):
    return ("job", job_id, kind) if job_id is not None else ("node", node_id, kind)


def apply(verdicts: list[Verdict], *, gpu_nodes: dict[int, int], close_after_s: float = 0.0,
          late_notes: dict[int, str] | None = None) -> Counts:
    """Open, update and close findings for ``verdicts``; ``gpu_nodes`` maps gpu -> node.

    ``late_notes``: jobs whose window took in samples that came late (``late``), with what
    a finding raised for them says about it. For such a job a finding closed within the
    window (its job was finalized before the data came) is reopened, not raised twice.
    """
    late_notes = late_notes or {}
    counts = Counts()
    job_ids = [v.job_id for v in verdicts if v.job_id is not None]
    node_ids = [v.node_id for v in verdicts if v.job_id is None]
    open_now = {}
    if job_ids:
        for f in Finding.objects.filter(state=FindingState.OPEN, job_id__in=job_ids):
            open_now[_key(f.job_id, None, f.kind)] = f
    if node_ids:
        for f in Finding.objects.filter(state=FindingState.OPEN, job__isnull=True,
                                        node_id__in=node_ids):
            open_now[_key(None, f.node_id, f.kind)] = f
    creates, updates, closes, reopened = [], [], [], []
    for v in verdicts:
        for kind in v.kinds:
            found = open_now.get(_key(v.job_id, v.node_id, kind))
            decided = v.decisions.get(kind)
            if decided is None:
                if found is not None and (v.end - found.last_seen).total_seconds() >= (
                        close_after_s):
                    found.state, found.closed_at = FindingState.CLOSED, v.end
                    closes.append(found)
                continue
            d, window_start = decided
            node_id = d.node_id or (gpu_nodes.get(d.gpu_id, v.node_id) if d.gpu_id
                                    else v.node_id)
            note = late_notes.get(v.job_id) if v.job_id is not None else None
            if found is None and note is not None:
                found = _closed_within(v.job_id, kind, window_start)
                if found is not None:
                    found.state, found.closed_at = FindingState.OPEN, None
                    reopened.append(found)
            if found is None:
                creates.append(Finding(
                    kind=kind, severity=d.severity, state=FindingState.OPEN, job_id=v.job_id,
                    node_id=node_id, gpu_id=d.gpu_id, window_start=window_start,
                    window_end=v.end, first_seen=v.end, last_seen=v.end,
                    evidence={**d.evidence, "late_data": True} if note else d.evidence,
                    wasted_gpu_hours=d.wasted_gpu_hours, title=d.title[:200],
                    explanation=d.explanation + (note or ""), suggestion=d.suggestion,
                ))
                continue
            if Severity(d.severity).rank > Severity(found.severity).rank:
                found.severity = d.severity
            # Never back in time: a final pass judges up to the job's end, which the
            # scheduler may report before data already judged (opened <= updated <= closed).
            found.window_start, found.window_end = window_start, v.end
            found.last_seen = max(v.end, found.last_seen)
            found.evidence, found.wasted_gpu_hours = d.evidence, d.wasted_gpu_hours
            found.title, found.explanation = d.title[:200], d.explanation
            if found in reopened:
                found.explanation += note
            found.suggestion, found.gpu_id = d.suggestion, d.gpu_id
            found.node_id = node_id
            updates.append(found)
    Finding.objects.bulk_create(creates)
    bulk.update_rows(reopened, CLOSE_FIELDS)
    bulk.update_rows(updates, UPDATE_FIELDS)
    bulk.update_rows(closes, CLOSE_FIELDS)
    counts.opened, counts.updated, counts.closed = len(creates), len(updates), len(closes)
    return counts


def _closed_within(job_id: int, kind: str, since: dt.datetime) -> Finding | None:
    """The job's latest finding of ``kind`` closed at or after ``since``, if any."""
    return (Finding.objects.filter(job_id=job_id, kind=kind, state=FindingState.CLOSED,
                                   closed_at__gte=since)
            .order_by("-closed_at").first())


def open_late(verdicts: list[Verdict], *, gpu_nodes: dict[int, int], notes: dict[int, str]
              ) -> int:
    """Findings for windows judged on late data, before the window the pass judges now:
    each decided kind that no finding of the job covers opens (saying it came from late
    data, its times those of the late window); nothing is closed, moved or raised twice."""
    creates = []
    for v in verdicts:
        for kind, (d, window_start) in v.decisions.items():
            covered = Finding.objects.filter(job_id=v.job_id, kind=kind).filter(
                Q(state=FindingState.OPEN) | Q(closed_at__gte=window_start)).exists()
            if covered:
                continue
            node_id = d.node_id or (gpu_nodes.get(d.gpu_id, v.node_id) if d.gpu_id
                                    else v.node_id)
            creates.append(Finding(
                kind=kind, severity=d.severity, state=FindingState.OPEN, job_id=v.job_id,
                node_id=node_id, gpu_id=d.gpu_id, window_start=window_start,
                window_end=v.end, first_seen=v.end, last_seen=v.end,
                evidence={**d.evidence, "late_data": True},
                wasted_gpu_hours=d.wasted_gpu_hours, title=d.title[:200],
                explanation=d.explanation + notes.get(v.job_id, ""), suggestion=d.suggestion,
            ))
    Finding.objects.bulk_create(creates)
    return len(creates)


def close_for_jobs(ended: dict[int, dt.datetime]) -> int:
    """Close every open finding of jobs that ended (at their end): the condition is over."""
    closed = 0
    for job_id, end in ended.items():
        # At the job's end, or when the finding was last updated if that was later (the
        # end the scheduler reported can precede the last data judged): never before it.
        closed += Finding.objects.filter(job_id=job_id, state=FindingState.OPEN).update(
            state=FindingState.CLOSED, closed_at=Greatest(Value(end), F("last_seen"))
        )
    return closed
