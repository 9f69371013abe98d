"""The fabric page: InfiniBand / RoCE ports across the cluster, worst first (down, then
degraded by the share of rate lost, then by errors over the detector window), or by errors;
found by node, kind or health, a page at a time."""

from django import forms
from django.conf import settings
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils import timezone

from clusterui.fabric import health
from clusterui.inventory.models import Node
from clusterui.web import cluster_choice

SORTS = (("degradation", "worst link"), ("errors", "most errors"))
KINDS = (("infiniband", "InfiniBand"), ("roce", "RoCE"))
SHOW = (("unhealthy", "unhealthy only"),)
PAGE_SIZE = 100


class PortFilters(forms.Form):
    q = forms.CharField(required=False, max_length=128)
    kind = forms.ChoiceField(required=False, choices=[("", "any"), *KINDS])
    show = forms.ChoiceField(required=False, choices=[("", "every port"), *SHOW])
    sort = forms.ChoiceField(required=False, choices=SORTS)


def fabric(request):
    """Hardware state, like the node page: for every signed-in user."""
    form = PortFilters(request.GET)
    valid = form.is_valid()
    params = form.cleaned_data if valid else {}
    sort = params.get("sort") or "degradation"
    # The navigation's cluster (clusterui/web/cluster_choice.py), or every cluster.
    cluster = cluster_choice.known(request)
    ports = health.ports(*health.window(timezone.now()), cluster=cluster)
    threshold = health.error_threshold()
    shown = []
    if valid:
        q, kind = params.get("q", "").strip().lower(), params.get("kind")
        shown = [p for p in ports
                 if (not q or q in p.node.lower()) and (not kind or p.kind == kind)
                 and (params.get("show") != "unhealthy" or p.unhealthy(threshold))]
        if sort == "errors":
            shown.sort(key=lambda p: (p.error_total, p.badness()), reverse=True)
        else:
            shown = health.worst_first(shown)
    page = Paginator(shown, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "page": page,
        "ports": page.object_list,
        "total": len(ports),
        "unhealthy": sum(1 for p in ports if p.unhealthy(threshold)),
        "threshold": threshold,
        "sort": sort,
        "sorts": SORTS,
        "kinds": KINDS,
        "shows": SHOW,
        "filtered": any(params.get(k) for k in ("q", "kind", "show")),
        "cluster": cluster,
        "window_h": settings.DETECTOR_WINDOW_S / 3600,
        "silent_s": settings.NODE_SILENT_AFTER_S,
        "show_node": True,
        # As the other pages: generated data says so (the demo's ports are simulated).
        "simulated": Node.objects.filter(id__in={p.node_id for p in ports},
                                         simulated=True).exists(),
    }
    return render(request, "web/fabric.html", context, status=200 if valid else 400)
