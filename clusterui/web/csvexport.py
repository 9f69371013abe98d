"""CSV downloads of the jobs, findings and users lists (``?format=csv`` on the page): the
rows the page lists under the same filters and in the same order, every page of them, with
the figures unrounded.

Written with Python's ``csv`` module and streamed in chunks of rows. A cell that a
spreadsheet would run as a formula (a job name such as ``=HYPERLINK(...)`` chosen by
whoever submitted the job) gets a leading apostrophe (OWASP, "CSV Injection").
"""

import csv
import datetime as dt

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Prefetch, prefetch_related_objects
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone

CHUNK = 1000
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

# measured_pct: the share of the job's run its samples cover (JobEfficiency.measured_pct);
# below 100 the GPU-hours take the time before its first sample to be like the time since.
# A finding has it where its waste is the job's whole-run figure (waste_is_whole_run).
JOB_COLUMNS = ["cluster", "scheduler", "job_id", "name", "user", "account", "partition",
               "namespace", "pod", "owner_kind", "owner_name", "state", "started_at",
               "ended_at", "gpus", "gpu_hours", "efficiency_pct", "wasted_gpu_hours",
               "measured_pct", "open_findings", "url"]
FINDING_COLUMNS = ["id", "severity", "kind", "state", "title", "cluster", "job_id", "user",
                   "account", "node", "first_seen", "last_seen", "closed_at",
                   "wasted_gpu_hours", "measured_pct", "acknowledged_at", "acknowledged_by",
                   "explanation", "suggestion", "url"]

# The users page's rows; the first column is "user", "account" or "namespace", as the page
# groups them.
USAGE_COLUMNS = ["jobs", "gpu_hours", "used_gpu_hours", "wasted_gpu_hours", "efficiency_pct",
                 "measured_pct", "from", "to"]


class _Echo:
    def write(self, value):
        return value


def cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def too_many(count_query) -> HttpResponse | None:
    """A 400 when more rows match than ``EXPORT_MAX_ROWS`` (counted no further)."""
    limit = settings.EXPORT_MAX_ROWS
    if count_query.order_by().values("pk")[:limit + 1].count() > limit:
        return HttpResponse(f"More than {limit:,} rows match these filters: narrow them (a "
                            "time range, a user, an account), or page through the JSON API "
                            "(docs/api.md).\n", status=400, content_type="text/plain")
    return None


def response(name: str, header: list[str], rows) -> StreamingHttpResponse:
    writer = csv.writer(_Echo())
    lines = (writer.writerow([cell(v) for v in row]) for row in _with_header(header, rows))
    stamp = timezone.now().astimezone(dt.UTC).strftime("%Y%m%dT%H%MZ")
    out = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    out["Content-Disposition"] = f'attachment; filename="clusterui-{name}-{stamp}.csv"'
    return out


def _with_header(header, rows):
    yield header
    yield from rows


def chunks(ordered):
    """Every row of ``ordered`` (a queryset or ``listing.FiguresFirst``), a chunk at a time,
    in its order."""
    start = 0
    while True:
        rows = list(ordered[start:start + CHUNK])
        if not rows:
            return
        yield rows
        start += len(rows)


def job_rows(request, ordered, open_findings):
    for rows in chunks(ordered):
        prefetch_related_objects(rows, Prefetch("findings", queryset=open_findings,
                                                to_attr="open_findings"))
        for job in rows:
            ratio = job.efficiency_ratio
            yield [job.cluster.name, job.scheduler, job.external_id, job.name, job.user,
                   job.account, job.partition, job.namespace, job.pod, job.owner_kind,
                   job.owner_name, job.state, job.started_at, job.ended_at,
                   job.gpu_count, job.allocated_gpu_hours,
                   None if ratio is None else 100.0 * ratio, job.wasted_gpu_hours,
                   _measured_pct(job), " ".join(f.kind for f in job.open_findings),
                   request.build_absolute_uri(reverse("job-detail", args=[job.pk]))]


def finding_rows(request, ordered):
    for rows in chunks(ordered):
        for f in rows:
            job = f.job
            cluster = job.cluster.name if job else f.node.cluster.name if f.node else None
            yield [f.pk, f.severity, f.kind, f.state, f.title, cluster,
                   job.external_id if job else None, job.user if job else None,
                   job.account if job else None, f.node.name if f.node else None,
                   f.first_seen, f.last_seen, f.closed_at, f.wasted_gpu_hours,
                   _measured_pct(job) if job and f.waste_is_whole_run else None,
                   f.acknowledged_at,
                   f.acknowledged_by.get_username() if f.acknowledged_by else None,
                   f.explanation, f.suggestion,
                   _finding_url(request, f)]


def _measured_pct(job) -> float | None:
    try:
        return job.efficiency.measured_pct
    except ObjectDoesNotExist:  # no figures yet
        return None


def _finding_url(request, f) -> str | None:
    if f.job_id:
        return request.build_absolute_uri(reverse("job-detail", args=[f.job_id])
                                          + f"#finding-{f.pk}")
    if f.node_id:
        return request.build_absolute_uri(reverse("node-detail", args=[f.node_id]))
    return None


def usage_rows(rows, start, end):
    """The users page's rows (``jobs.usage.usage_summary``, already all of them), with the
    period they cover."""
    for r in rows:
        yield [r["name"], r["jobs"], r["gpu_hours"], r["used_gpu_hours"],
               r["wasted_gpu_hours"], r["efficiency_pct"], r["measured_pct"], start, end]
