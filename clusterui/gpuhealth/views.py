"""The drain list page (staff only)."""

from django.core.exceptions import PermissionDenied
from django.shortcuts import render

from clusterui.gpuhealth.drain import drain_lines
from clusterui.inventory.models import Node
from clusterui.web import cluster_choice


def drain_list(request):
    if not request.user.is_staff:
        raise PermissionDenied("The drain list is for administrators.")
    # The navigation's cluster (clusterui/web/cluster_choice.py), or every cluster. The
    # commands come one block per cluster: each is pasted on its own cluster's controller
    # (two clusters may both have a node of that name).
    cluster = cluster_choice.known(request)
    lines = drain_lines(cluster)
    scripts: dict[str, list[str]] = {}
    for line in lines:
        if line.command:  # none for a name that is not printable (drain.py)
            scripts.setdefault(line.cluster, []).append(line.command)
    return render(request, "gpuhealth/drain.html", {
        "lines": lines,
        "cluster": cluster,
        "scripts": [(name, "\n".join(commands)) for name, commands in scripts.items()],
        # As the other pages: generated data says so (the demo's faults are simulated).
        "simulated": Node.objects.filter(id__in={line.node_id for line in lines},
                                         simulated=True).exists(),
    })
