"""The jobs list and the job page."""

import datetime as dt

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import (
    Count,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Subquery,
    prefetch_related_objects,
)
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from clusterui.findings.choices import FindingKind
from clusterui.findings.models import Finding
from clusterui.findings.thresholds import Thresholds
from clusterui.jobs.filtersets import JobFilterSet, with_efficiency
from clusterui.jobs.listing import JobPaginator, ordered_for_pages
from clusterui.jobs.models import Job, JobGpu
from clusterui.telemetry.models import GpuEvent
from clusterui.web import cluster_choice, csvexport, jobpage
from clusterui.web.views.overview import SEVERITY_RANK
from clusterui.web.views.support import (
    REFRESH_S,
    charts,
    csv_filters_refused,
    range_context,
    sort_header,
)

PAGE_SIZE = 50
SORTS = (("-started", "Newest first"), ("started", "Oldest first"),
         ("-wasted", "Most GPU-hours wasted"), ("wasted", "Fewest GPU-hours wasted"),
         ("efficiency", "Least efficient"), ("-efficiency", "Most efficient"),
         ("-gpu_hours", "Most GPU-hours"), ("gpu_hours", "Fewest GPU-hours"),
         ("user", "User A-Z"), ("-user", "User Z-A"))
# The table's columns: (header, ordering key or None, class).
COLUMNS = (("Job", None, ""), ("User", "user", ""), ("Account / namespace", None, ""),
           ("State", None, ""),
           ("Started", "started", ""), ("GPUs", None, "num"), ("GPU-h", "gpu_hours", "num"),
           ("Efficiency", "efficiency", ""), ("Wasted GPU-h", "wasted", "num"),
           ("Open findings", None, ""))


def headers(sort: str) -> list[dict]:
    """Each column's header; a sortable one links to its ordering (figures largest first,
    names A-Z, the newest first), and to the reverse once it is the current one."""
    out = []
    for label, key, css in COLUMNS:
        entry = {"key": key, "label": label, "css": css, "ordering": None, "sort": None}
        if key:
            entry.update(sort_header(key, sort, ascending_first=key == "user"))
        out.append(entry)
    return out
# Where on the job page the evidence of each finding kind can be seen.
EVIDENCE_CHART = {
    FindingKind.LOW_UTILIZATION: ("chart-util", "the GPU utilization chart"),
    FindingKind.IDLE_GPU: ("chart-util", "the GPU utilization chart, one line per GPU"),
    FindingKind.COMM_BOUND: ("chart-activity", "the network and GPU activity chart"),
    FindingKind.INPUT_BOUND: ("chart-cpu", "the host CPU chart, against the allocation"),
    FindingKind.BUSY_NOT_BUSY: ("chart-activity", "utilization against SM activity"),
    FindingKind.THROTTLING: ("chart-power", "the power and temperature charts"),
    FindingKind.GPU_ERRORS: ("events", "the GPU events"),
    FindingKind.STRAGGLER: ("chart-nodes_busy", "the nodes over time strips"),
}


def _gpu_count():
    return Subquery(
        JobGpu.objects.filter(job=OuterRef("pk")).order_by().values("job")
        .annotate(n=Count("id")).values("n"), output_field=IntegerField())


def _listed(request):
    """The jobs the page lists under its filters, in its order: (filters, valid, ordered
    rows, ordering, open findings to show per job)."""
    # The efficiency row's per-GPU figures and accumulators are not shown here.
    jobs = (with_efficiency(Job.objects.visible_to(request.user))
            .defer("efficiency__per_gpu", "efficiency__accum")
            .annotate(gpu_count=_gpu_count()))
    filters = JobFilterSet(cluster_choice.with_choice(request), queryset=jobs)
    valid = filters.is_valid()
    qs = filters.qs if valid else jobs.none()
    ordering = filters.form.cleaned_data.get("ordering") if valid else None
    if not ordering:
        # Newest first; a job whose start the scheduler did not report goes last.
        qs = qs.order_by(F("started_at").desc(nulls_last=True), "-id")
    open_findings = Finding.objects.visible_to(request.user).open().annotate(
        rank=SEVERITY_RANK).order_by("-rank", "kind")
    return filters, valid, qs, ordering, open_findings


def job_list(request):
    """Jobs the user may see: search, filters, sorting by efficiency or waste, pages;
    ``?format=csv``: every row under the same filters, as CSV."""
    filters, valid, qs, ordering, open_findings = _listed(request)
    if request.GET.get("format") == "csv":
        if not valid:
            return csv_filters_refused(filters)
        return csvexport.too_many(qs) or csvexport.response(
            "jobs", csvexport.JOB_COLUMNS,
            csvexport.job_rows(request, ordered_for_pages(qs, ordering), open_findings))
    paginator = JobPaginator(ordered_for_pages(qs, ordering), PAGE_SIZE)
    page = paginator.get_page(request.GET.get("page"))
    rows = list(page.object_list)
    prefetch_related_objects(rows, Prefetch("findings", queryset=open_findings,
                                            to_attr="open_findings"))
    sort = ordering[0] if ordering else "-started"
    context = {
        "filters": filters,
        "page": page,
        "jobs": rows,
        "sorts": SORTS,
        "sort": sort,
        "headers": headers(sort),
        "kinds": FindingKind.choices,
        "filtered": any(v for k, v in request.GET.items()
                        if k not in ("page", "ordering", "format")),
    }
    return render(request, "web/jobs.html", context, status=200 if valid else 400)


def not_judged(job, efficiency, start, running, now) -> str | None:
    """Why a job has no verdict from the window detectors yet, and when it will have one;
    None once they have judged it (then "nothing found" is true)."""
    if efficiency is not None and efficiency.judged_at is not None:
        return None
    t = Thresholds.from_settings()
    grace, span = t.grace_s / 60, t.min_span_s / 60
    ready = start + dt.timedelta(seconds=t.grace_s + t.min_span_s)
    rule = (f"the detectors leave a job's first {grace:g} minutes alone (loading, warming "
            f"up) and then need {span:g} minutes of its data")
    if running:
        if now < ready:
            return (f"Not judged yet: {rule}. They will judge this job from about "
                    f"{ready.astimezone(dt.UTC):%H:%M} UTC.")
        return (f"Not judged yet: each GPU needs {t.min_samples} samples after the first "
                f"{grace:g} minutes. The detectors judge the job at their first pass that has "
                "them (every minute).")
    end = job.ended_at or job.last_seen
    if end < ready:
        ran = max(0.0, (end - start).total_seconds() / 60)
        return (f"Not judged: the job ran {ran:.0f} minutes, too short to judge: {rule}.")
    return (f"Not judged: the detectors never had {t.min_samples} samples of each of its GPUs "
            f"after its first {grace:g} minutes.")


def nvml_mean(efficiency) -> float | None:
    """The job's mean NVML utilization over its GPUs, shown next to SM activity: a job can
    keep NVML at 99 % while its kernels use 6 % of the GPU."""
    if efficiency is None:
        return None
    means = [g["nvml_mean"] for g in (efficiency.per_gpu or {}).values()
             if g.get("nvml_mean") is not None]
    return sum(means) / len(means) if means else None


def job_detail(request, pk):
    """Everything about one job: who ran what where, how well it used its GPUs, what the
    detectors found and the charts that show why."""
    job = get_object_or_404(
        Job.objects.visible_to(request.user).select_related("cluster", "efficiency"), pk=pk)
    try:
        efficiency = job.efficiency
    except ObjectDoesNotExist:
        efficiency = None
    now = timezone.now()
    view = jobpage.build(job, request.GET, now)
    findings = list(
        Finding.objects.visible_to(request.user).filter(job=job)
        .select_related("acknowledged_by", "gpu", "node").annotate(rank=SEVERITY_RANK)
        .order_by("-state", "-rank", "-last_seen")  # "open" sorts after "closed": open first
    )
    for finding in findings:
        finding.chart = EVIDENCE_CHART.get(finding.kind)
    gpu_ids = [a.gpu_id for a in view.allocations]
    events = list(
        GpuEvent.objects.filter(gpu_id__in=gpu_ids, ts__gte=view.range.start,
                                ts__lt=view.range.end)
        .select_related("gpu__node")[:50]
    ) if gpu_ids else []
    start, end, running = jobpage.job_bounds(job, now)
    context = {
        "job": job,
        "efficiency": efficiency,
        "nvml_mean": nvml_mean(efficiency),
        "view": view,
        "findings": findings,
        "open_count": sum(f.state == "open" for f in findings),
        "events": events,
        "started": start,
        "ended": None if running else end,
        "elapsed": end - start,
        "running": running,
        "not_judged": not_judged(job, efficiency, start, running, now),
        "charts": charts(**view.figures),
        "refresh_s": REFRESH_S if view.range.live else None,
        "now": now,
        **range_context(request, view.range, view.range_error,
                        whole="Whole job"),
    }
    if view.whole:
        context["range_custom"] = False
    return render(request, "web/job_detail.html", context,
                  status=400 if view.range_error else 200)
