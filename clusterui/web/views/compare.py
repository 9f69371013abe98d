"""/jobs/compare/?job=A&job=B: two jobs side by side."""

from django.http import Http404
from django.shortcuts import render
from django.utils import timezone

from clusterui.findings.models import Finding
from clusterui.jobs.models import Job
from clusterui.web import comparison
from clusterui.web.views.overview import SEVERITY_RANK
from clusterui.web.views.support import charts


def job_compare(request):
    raw = request.GET.getlist("job")
    problem = None
    if len(raw) != 2 or not all(v.isdigit() for v in raw):
        problem = "Choose two jobs to compare (tick two jobs in the list)."
    elif raw[0] == raw[1]:
        problem = "Those are the same job twice: choose two different jobs."
    if problem:
        return render(request, "web/job_compare.html", {"problem": problem}, status=400)
    visible = Job.objects.visible_to(request.user).select_related("cluster", "efficiency")
    by_pk = {j.pk: j for j in visible.filter(pk__in=[int(v) for v in raw])}
    jobs = [by_pk.get(int(v)) for v in raw]
    if None in jobs:
        raise Http404("No such job, or not one of yours.")
    now = timezone.now()
    curves, step = comparison.curves(jobs, now)
    findings = [list(Finding.objects.visible_to(request.user).filter(job=j)
                     .annotate(rank=SEVERITY_RANK).order_by("-state", "-rank")) for j in jobs]
    context = {
        "jobs": jobs,
        "pairs": list(zip(jobs, findings, strict=True)),
        "rows": comparison.figure_rows(jobs),
        "charts": charts(activity=comparison.chart(curves)),
        "step": step,
    }
    return render(request, "web/job_compare.html", context)
