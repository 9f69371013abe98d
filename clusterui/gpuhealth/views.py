"""The drain list page (staff only)."""

from django.core.exceptions import PermissionDenied
from django.shortcuts import render

from clusterui.gpuhealth.drain import drain_lines
from clusterui.inventory.models import Node


def drain_list(request):
    if not request.user.is_staff:
        raise PermissionDenied("The drain list is for administrators.")
    lines = drain_lines()
    return render(request, "gpuhealth/drain.html", {
        "lines": lines,
        "script": "\n".join(line.command for line in lines),
        # As the other pages: generated data says so (the demo's faults are simulated).
        "simulated": Node.objects.filter(id__in={line.node_id for line in lines},
                                         simulated=True).exists(),
    })
