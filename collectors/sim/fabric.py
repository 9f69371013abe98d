"""Simulated fabric faults: what the kernel would show for a port whose link degrades.

A ``LinkFault`` on port ``p`` of a ``SimNode`` from time ``start``:

- ``"width"``: the link retrains at 1X instead of 4X (a bad lane: the cable, the
  transceiver); ``rate`` reads ``"100 Gb/sec (1X NDR)"`` instead of ``"400 Gb/sec (4X NDR)"``;
- ``"errors"``: ``counters/symbol_error`` climbs by ``per_s`` a second (a marginal link),
  and ``link_error_recovery`` by one a minute; the 16-bit counter saturates at 65535 as on
  a real HCA.

Every port also gets its PortCounters error files (0 when healthy) and, for RoCE, the mlx5
``hw_counters`` congestion counters. Simulated: the trees carry ``SIMULATED``, and batches
``agent.simulated``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from collectors.fabric import CONGESTION_COUNTERS, ERROR_COUNTERS
from collectors.sim.hardware import IB_RATE_GBPS


@dataclass(frozen=True)
class LinkFault:
    port: int
    start: float
    kind: str  # "width" | "errors"
    per_s: float = 5.0


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def write_static(pdir: str, roce: bool) -> None:
    for name in ERROR_COUNTERS:
        _write(os.path.join(pdir, "counters", name), "0\n")
    if roce:
        for name in CONGESTION_COUNTERS:
            _write(os.path.join(pdir, "hw_counters", name), "0\n")


def rate_text(width: int) -> str:
    gbps = IB_RATE_GBPS // 4 * width
    return f"{gbps} Gb/sec ({width}X NDR)\n"


def write_tick(pdir: str, faults: list[LinkFault], t: float, roce: bool,
               traffic_bytes: float) -> None:
    """Rewrite what changes on this port at ``t``: its rate under a width fault, its error
    counters under an error fault, and (RoCE) congestion counters that follow the traffic."""
    width = 4
    for fault in faults:
        if t < fault.start:
            continue
        if fault.kind == "width":
            width = 1
        elif fault.kind == "errors":
            elapsed = t - fault.start
            symbols = min((1 << ERROR_COUNTERS["symbol_error"]) - 1, int(elapsed * fault.per_s))
            _write(os.path.join(pdir, "counters", "symbol_error"), f"{symbols}\n")
            _write(os.path.join(pdir, "counters", "link_error_recovery"),
                   f"{min(255, int(elapsed // 60))}\n")
    if any(f.kind == "width" for f in faults):
        _write(os.path.join(pdir, "rate"), rate_text(width))
    if roce:
        # One CNP per ~100 MB sent: a lightly congested RoCE fabric (illustrative only).
        cnps = int(traffic_bytes // 100_000_000)
        _write(os.path.join(pdir, "hw_counters", "np_cnp_sent"), f"{cnps}\n")
        _write(os.path.join(pdir, "hw_counters", "rp_cnp_handled"), f"{cnps}\n")
