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
``hw_counters`` congestion counters, and a netdev (``gid_attrs/ndevs/0``) whose ethtool
statistics ``SimEthtool`` serves in place of the kernel's: PFC on priority 3 (the usual
RoCE priority; illustrative), pause frames received in proportion to the traffic sent, and
no pause storm. Simulated: the trees carry ``SIMULATED``, and batches
``agent.simulated``.
"""

from __future__ import annotations

import errno
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


def netdev_name(port_index: int) -> str:
    """The simulated netdev of RoCE device ``mlx5_<port_index>`` (a name of the form the
    kernel's predictable naming gives an mlx5 port)."""
    return f"ens{port_index + 1}f0np0"


def write_static(pdir: str, roce: bool, netdev: str | None = None) -> None:
    for name in ERROR_COUNTERS:
        _write(os.path.join(pdir, "counters", name), "0\n")
    if roce:
        for name in CONGESTION_COUNTERS:
            _write(os.path.join(pdir, "hw_counters", name), "0\n")
        if netdev:
            _write(os.path.join(pdir, "gid_attrs", "ndevs", "0"), f"{netdev}\n")


class SimEthtool:
    """A simulated node's ``ethtool -S`` (``collectors.fabric.EthtoolReader``): for each RoCE
    port's netdev, mlx5 statistic names (``roce_pause``) with illustrative values that
    follow the port's traffic, and a few others the collector must ignore."""

    def __init__(self, node) -> None:
        self.node = node

    def __call__(self, ifname: str) -> dict[str, int]:
        ports = self.node.ports if self.node.roce else []
        for p, port in enumerate(ports):
            if netdev_name(p) == ifname:
                return self._stats(port)
        raise OSError(errno.ENODEV, f"no such simulated device: {ifname}")

    @staticmethod
    def _stats(port) -> dict[str, int]:
        paused = int(port.tx // 1_000_000_000)  # one pause received per GB sent
        sent = int(port.rx // 2_000_000_000)  # one sent per 2 GB received
        return {
            "rx_packets_phy": int(port.rx // 4096),
            "tx_packets_phy": int(port.tx // 4096),
            "rx_pause_ctrl_phy": 0,  # global pause off: PFC only
            "tx_pause_ctrl_phy": 0,
            "rx_prio0_pause": 0,
            "rx_prio3_pause": paused,
            "rx_prio3_pause_duration": paused * 20,  # µs
            "rx_prio3_pause_transition": paused,
            "tx_prio3_pause": sent,
            "tx_prio3_pause_duration": sent * 20,
            "tx_pause_storm_warning_events": 0,
            "tx_pause_storm_error_events": 0,
        }


def link_share(faults: list[LinkFault], port: int, t: float) -> float:
    """The share of its full (4X) rate port ``port`` runs at, at ``t``: a quarter from a
    width fault's start on. The traffic it carries is scaled by it, so a degraded link never
    shows more than its rate (a job behind it moves its data four times slower)."""
    return 0.25 if any(f.port == port and f.kind == "width" and t >= f.start
                       for f in faults) else 1.0


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
