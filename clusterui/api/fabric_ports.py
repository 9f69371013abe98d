"""The fabric health the API's NIC answers carry: each port's as the fabric page shows it
(``clusterui.fabric.health``), over the detector window up to now."""

from django.conf import settings
from django.utils import timezone

from clusterui.fabric import health


def context(nics) -> dict:
    """The serializer context for these NICs: {"fabric": {nic id: PortHealth}, …}."""
    node_ids = {n.node_id for n in nics}
    ports = health.ports(*health.window(timezone.now()), node_ids) if node_ids else []
    wanted = {n.id for n in nics}
    return {"fabric": {p.nic_id: p for p in ports if p.nic_id in wanted},
            "fabric_threshold": health.error_threshold(),
            "fabric_window_s": settings.DETECTOR_WINDOW_S}
