"""The findings list, and acknowledging a finding."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from clusterui.findings.choices import FindingKind, FindingState, Severity
from clusterui.findings.filtersets import FindingFilterSet
from clusterui.findings.models import Finding
from clusterui.web import cluster_choice, csvexport
from clusterui.web.views.overview import SEVERITY_RANK
from clusterui.web.views.support import csv_filters_refused

PAGE_SIZE = 50
SORTS = (("", "Most severe first"), ("-last_seen", "Recently seen"),
         ("-first_seen", "Newest"), ("-wasted", "Most GPU-hours wasted"))


def finding_list(request):
    """Findings the user may see; open ones unless another state is asked for;
    ``?format=csv``: every row under the same filters, as CSV."""
    params = cluster_choice.with_choice(request)
    if "state" not in params:
        params["state"] = FindingState.OPEN
    findings = (Finding.objects.visible_to(request.user)
                .select_related("job__cluster", "job__efficiency", "node__cluster",
                                "acknowledged_by")
                # Only the efficiency's window, for the "≈" (its per-GPU figures and
                # accumulators run to many kilobytes a job).
                .defer("job__efficiency__per_gpu", "job__efficiency__accum")
                .annotate(rank=SEVERITY_RANK))
    filters = FindingFilterSet(params, queryset=findings)
    valid = filters.is_valid()
    qs = filters.qs if valid else findings.none()
    if valid and not params.get("ordering"):
        qs = qs.order_by("-rank", "-last_seen", "-id")
    elif valid:  # ties (equal waste, ...) in one fixed order, so pages and CSV agree
        qs = qs.order_by(*qs.query.order_by, "-id")
    if request.GET.get("format") == "csv":
        if not valid:
            return csv_filters_refused(filters)
        return csvexport.too_many(qs) or csvexport.response(
            "findings", csvexport.FINDING_COLUMNS, csvexport.finding_rows(request, qs))
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "filters": filters,
        "params": params,
        "page": page,
        "findings": list(page.object_list),
        "kinds": FindingKind.choices,
        "severities": Severity.choices,
        "states": FindingState.choices,
        "sorts": SORTS,
    }
    return render(request, "web/findings.html", context, status=200 if valid else 400)


@require_POST
def acknowledge(request, pk):
    """Mark a finding as seen by someone who may see it; acknowledging twice keeps the
    first acknowledgement."""
    finding = get_object_or_404(Finding.objects.visible_to(request.user), pk=pk)
    done = Finding.objects.filter(pk=finding.pk, acknowledged_at__isnull=True).update(
        acknowledged_at=timezone.now(), acknowledged_by=request.user)
    if done:
        messages.success(request, f"Acknowledged: {finding.title}")
    nxt = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        nxt = reverse("job-detail", args=[finding.job_id]) if finding.job_id else reverse(
            "findings")
    return redirect(nxt)
