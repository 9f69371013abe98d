"""Batches whose NIC rows carry the fabric fields (``collectors/fabric.py``), built on
``tests.factories.node_batch``."""

from collectors.fabric import FIELDS
from tests.factories import node_batch

HEALTHY = {"link_state": 4, "phys_state": 5, "link_width": 4, "link_gbps": 400.0,
           "counters_saturated": 0}


def port(**values) -> dict:
    """One NIC row's fabric values: a healthy 4X NDR port with no errors, changed by
    ``values``; any field not given is null (not reported)."""
    return {**HEALTHY, **values}


def fabric_batch(node: str = "gpu-t001", *, ports, seq: int = 1, start: float | None = None,
                 interval: float = 10.0, **kwargs) -> dict:
    """``ports[k][n]``: the fabric values of NIC ``n`` in sample ``k`` (``port(...)``)."""
    nics = len(ports[0])
    envelope = node_batch(node, seq=seq, samples=len(ports), start=start, interval=interval,
                          nics=nics, **kwargs)
    section = envelope["nic_samples"]
    section["fields"] = [*section["fields"], *FIELDS]
    section["rows"] = [row + [ports[k][n].get(f) for f in FIELDS]
                       for row in section["rows"]
                       for k, n in [(round((row[0] - section["rows"][0][0]) / interval), row[1])]]
    return envelope
