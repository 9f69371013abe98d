"""The nodes list (/nodes/): state, health, jobs and utilization of every node now, with
filters and sortable columns."""

from django import forms
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils import timezone

from clusterui.web import cluster_choice, nodelist
from clusterui.web.views.support import REFRESH_S, sort_header

PAGE_SIZE = 100
ORDERINGS = [(key, key) for key in nodelist.COLUMNS] + [
    (f"-{key}", f"-{key}") for key in nodelist.COLUMNS]


class NodeFilters(forms.Form):
    q = forms.CharField(required=False, max_length=128)
    cluster = forms.CharField(required=False, max_length=64)
    state = forms.ChoiceField(required=False, choices=[("", "any"), *nodelist.STATES])
    health = forms.ChoiceField(required=False, choices=[("", "any"), *nodelist.HEALTH])
    ordering = forms.ChoiceField(required=False, choices=ORDERINGS)


def node_list(request):
    now = timezone.now()
    data = request.GET.copy()
    if "cluster" not in data:  # the navigation's choice (clusterui/web/cluster_choice.py)
        data["cluster"] = cluster_choice.known(request)
    form = NodeFilters(data)
    valid = form.is_valid()
    params = form.cleaned_data if valid else {}
    ordering = params.get("ordering") or "name"
    rows = nodelist.node_rows(request.user, now)
    clusters = sorted({r.cluster for r in rows})
    shown = nodelist.select(rows, q=params.get("q", ""), cluster=params.get("cluster", ""),
                            state=params.get("state", ""), health=params.get("health", ""),
                            ordering=ordering) if valid else []
    page = Paginator(shown, PAGE_SIZE).get_page(request.GET.get("page"))
    headers = [{"key": key, "label": label,
                **sort_header(key, ordering, ascending_first=key in ("name", "state"))}
               for key, (label, _) in nodelist.COLUMNS.items()]
    context = {
        "form": form,
        "page": page,
        "rows": page.object_list,
        "headers": headers,
        "ordering": ordering,
        "clusters": clusters,
        "states": nodelist.STATES,
        "healths": nodelist.HEALTH,
        "total": len(rows),
        "filtered": any(params.get(k) for k in ("q", "cluster", "state", "health")),
        "refresh_s": REFRESH_S,
        "now": now,
    }
    return render(request, "web/nodes.html", context, status=200 if valid else 400)
