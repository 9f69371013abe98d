"""The cluster the pages are scoped to, where a deployment has more than one.

``?cluster=NAME`` on any page chooses a cluster and ``?cluster=`` (the selector's "All
clusters") every one; the choice is kept in the session, so the overview, nodes, jobs,
findings, users, trends, fabric and ingest health pages and the drain list stay on it until
another is chosen. A name no cluster has is not kept: the jobs and findings pages say it is unknown
(their filtersets' ``ClusterFilter``), the others show every cluster. The JSON API is
stateless: it takes ``?cluster=`` per request and keeps nothing.

The cluster list is one query per page (``names``, kept on the request).
"""

from clusterui.inventory.models import Cluster

SESSION_KEY = "cluster"


def names(request) -> list[str]:
    if not hasattr(request, "_clusterui_clusters"):
        request._clusterui_clusters = list(Cluster.objects.values_list("name", flat=True))
    return request._clusterui_clusters


def chosen(request) -> str:
    """The chosen cluster's name, "" for all clusters."""
    if "cluster" in request.GET:
        value = request.GET["cluster"].strip()
        if value and value not in names(request):
            return value  # unknown: the filtersets say so; not kept
        if request.session.get(SESSION_KEY, "") != value:
            request.session[SESSION_KEY] = value
        return value
    value = request.session.get(SESSION_KEY, "")
    return value if value in names(request) else ""


def known(request) -> str:
    """``chosen``, or "" where it names no cluster (the pages without a filterset)."""
    value = chosen(request)
    return value if value in names(request) else ""


def with_choice(request):
    """The request's query with the chosen cluster added where it names none, for a
    filterset (jobs, findings)."""
    params = request.GET.copy()
    if "cluster" not in params and (value := chosen(request)):
        params["cluster"] = value
    return params


def context(request):
    """The navigation's selector: the clusters where there is more than one."""
    if not request.user.is_authenticated:
        return {}
    all_names = names(request)
    if len(all_names) < 2:
        return {"cluster_names": [], "chosen_cluster": ""}
    return {"cluster_names": all_names, "chosen_cluster": chosen(request)}
