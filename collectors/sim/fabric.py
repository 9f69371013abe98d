"""Simulated fabric faults: what the kernel would show for a port whose link degrades.

A ``LinkFault`` on port ``p`` of a ``SimNode`` from time ``start``:

- ``"width"``: the link retrains at 1X instead of 4X (a bad lane: the cable, the
  transceiver); ``rate`` reads ``"100 Gb/sec (1X NDR)"`` instead of ``"400 Gb/sec (4X NDR)"``;
- ``"errors"``: ``counters/symbol_error`` climbs by ``per_s`` a second (a marginal link),
  ``port_rcv_errors`` by a tenth of that (the packets those symbols corrupted, dropped by
  the receiver), and ``link_error_recovery`` by one a minute, from ``start`` until ``end``
  (if set); the counters saturate at their width (65535 for the 16-bit ones) as on a real
  HCA. The ratios are illustrative, not measured: a real marginal link's mix depends on its
  FEC and cable. On a RoCE port the dropped packets also count as ``out_of_sequence`` and
  ``packet_seq_err`` in ``hw_counters``.

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
    end: float | None = None  # the fault stops here (the errors no longer rise)


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
            elapsed = (t if fault.end is None else min(t, fault.end)) - fault.start
            rises = {"symbol_error": elapsed * fault.per_s,
                     "port_rcv_errors": elapsed * fault.per_s / 10,
                     "link_error_recovery": elapsed // 60}
            for name, count in rises.items():
                top = (1 << ERROR_COUNTERS[name]) - 1
                _write(os.path.join(pdir, "counters", name), f"{min(top, int(count))}\n")
            if roce:
                # The dropped packets, seen by the RoCE transport: out of sequence at the
                # receiver, NAKed and resent by the sender (illustrative, as above).
                lost = int(rises["port_rcv_errors"])
                for name in ("out_of_sequence", "packet_seq_err"):
                    _write(os.path.join(pdir, "hw_counters", name), f"{lost}\n")
    if any(f.kind == "width" for f in faults):
        _write(os.path.join(pdir, "rate"), rate_text(width))
    if roce:
        # One CNP per ~100 MB sent: a lightly congested RoCE fabric (illustrative only).
        cnps = int(traffic_bytes // 100_000_000)
        _write(os.path.join(pdir, "hw_counters", "np_cnp_sent"), f"{cnps}\n")
        _write(os.path.join(pdir, "hw_counters", "rp_cnp_handled"), f"{cnps}\n")
