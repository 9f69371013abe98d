"""The fabric health the API's NIC answers carry: each port's as the fabric page shows it
(``clusterui.fabric.health``), over the detector window up to now; and a port's error
counters over time (``error_series``), as its node page charts them."""

from django.conf import settings
from django.utils import timezone

from clusterui.api import timeseries
from clusterui.fabric import health, history
from clusterui.fabric.metrics import ERROR_FIELDS, FABRIC_METRICS


def context(nics) -> dict:
    """The serializer context for these NICs: {"fabric": {nic id: PortHealth}, …}."""
    node_ids = {n.node_id for n in nics}
    ports = health.ports(*health.window(timezone.now()), node_ids) if node_ids else []
    wanted = {n.id for n in nics}
    return {"fabric": {p.nic_id: p for p in ports if p.nic_id in wanted},
            "fabric_threshold": health.error_threshold(),
            "fabric_window_s": settings.DETECTOR_WINDOW_S}


def error_series(nic, start, end, step) -> dict:
    """The port's error counters' increases per bucket, on the axis its rate series have
    (``timeseries.read``: the same range defaults, automatic step and bucket limit):
    ``{"from", "to", "step_s", "ts", "reported", "counters": [{"counter", "label",
    "values", "total"}]}``.

    Only rises are stored (``PortErrors``), so a bucket without one is 0 where the port
    sent a sample in it and ``null`` where it sent none (``reported`` false): nothing is
    known there, as the node page's chart shades it."""
    rates = timeseries.read(timeseries.for_nic(nic), ["rx_bytes_per_s", "tx_bytes_per_s"],
                            start, end, step=step)
    ts, step = rates["ts"], rates["step_s"]
    rx, tx = (s["values"] for s in rates["series"])
    reported = history.reported(rx, tx)
    rose = history.error_buckets([nic.id], ts[0], step, len(ts)) if ts else {}
    labels = {m.name: m.label for m in FABRIC_METRICS}
    counters = []
    for name in ERROR_FIELDS:
        values = rose.get((nic.id, name), [0] * len(ts))
        counters.append({
            "counter": name, "label": labels[name], "total": sum(values),
            "values": history.known(values, reported),
        })
    return {"from": rates["from"], "to": rates["to"], "step_s": step, "ts": ts,
            "reported": reported, "counters": counters}
