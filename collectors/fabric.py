"""Fabric health of InfiniBand / RoCE ports from sysfs: link state and error counters.

Per port (``/sys/class/infiniband/<dev>/ports/<p>/``, formats as the kernel writes them in
``drivers/infiniband/core/sysfs.c``; see ``docs/collector.md``, "Fabric health"):

- ``state`` ("4: ACTIVE"), ``phys_state`` ("5: LinkUp"): the leading number is sent;
- ``rate`` ("100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)"): active width (the "4X") and the
  data rate in Gb/s (active width times active speed);
- ``counters/<error counter>``: the increase since the previous sample (a count per sample
  interval, not per second);
- ``hw_counters/<congestion counter>`` (mlx5 RoCE, where the driver exposes them): likewise;
- the pause counters of a RoCE port's netdev (``roce_pause``), read from its ethtool
  statistics (``ethtool_stats.read_stats``, or the ``ethtool`` callable given): likewise,
  per-priority ones summed per port. The netdev is the one ``gid_attrs/ndevs/0`` names,
  else the device's only one in ``/sys/class/infiniband/<dev>/device/net/``.

A file that is absent or unreadable is ``None`` (not reported), never 0. The PortCounters
error counters are 4 to 16 bits wide and *saturate* at all ones (they do not wrap): a
counter at its maximum hides every later error, so its increase is ``None`` (unknown) while
it stays there, and ``counters_saturated`` counts such counters. A counter that goes down
was cleared (``perfquery -R``, a driver reload): that interval's increase is ``None`` and the
new value is the baseline, as for the byte counters.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable

from collectors import ethtool_stats
from collectors.nic import read_int, read_text
from collectors.roce_pause import PAUSE_COUNTERS, pause_stats

log = logging.getLogger(__name__)

# PortCounters error counters and their width in bits (``PORT_PMA_ATTR`` in
# drivers/infiniband/core/sysfs.c). Saturated = 2**width - 1.
ERROR_COUNTERS: dict[str, int] = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_xmit_discards": 16,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
}
# mlx5 RoCE counters in ports/<p>/hw_counters (drivers/infiniband/hw/mlx5/counters.c,
# torvalds/linux 10d4de4189533840f296ce7e48eac05b985d96bc): congestion control (cong_cnts,
# 64-bit), and the port's q counters (basic_q_cnts, out_of_seq_q_cnts, retrans_q_cnts;
# 32-bit in the device, so they wrap: a smaller value drops that interval) that count
# drops and the go-back-N retransmissions a lossy link causes. docs/collector.md says
# what each means and where that is uncertain.
CONGESTION_COUNTERS: tuple[str, ...] = (
    "np_cnp_sent",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "np_ecn_marked_roce_packets",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
)
LINK_FIELDS = ("link_state", "phys_state", "link_width", "link_gbps", "counters_saturated")
# The nic_samples fields this module adds, in the order they are sent.
FIELDS: tuple[str, ...] = (*LINK_FIELDS, *ERROR_COUNTERS, *CONGESTION_COUNTERS, *PAUSE_COUNTERS)
# An interface name -> its ethtool statistics; raises OSError when they cannot be read.
EthtoolReader = Callable[[str], dict[str, int]]

_STATE = re.compile(r"^\s*(\d+)\s*:")
_RATE = re.compile(r"^\s*([0-9]+(?:\.5)?)\s*Gb/sec\s*\((\d+)X")


def parse_state(text: str | None) -> int | None:
    """'4: ACTIVE' -> 4; '5: LinkUp' -> 5; anything else -> None."""
    if text is None:
        return None
    match = _STATE.match(text)
    return int(match.group(1)) if match else None


def parse_rate(text: str | None) -> tuple[int | None, float | None]:
    """'100 Gb/sec (4X EDR)' -> (4, 100.0); '2.5 Gb/sec (1X SDR)' -> (1, 2.5)."""
    if text is None:
        return None, None
    match = _RATE.match(text)
    if not match:
        return None, None
    return int(match.group(2)), float(match.group(1))


class FabricCounters:
    """Keeps each port's previous counter values and turns new readings into increases."""

    def __init__(self, sysfs_root: str, ethtool: EthtoolReader | None = None) -> None:
        self.sysfs_root = sysfs_root
        self.ethtool = ethtool or ethtool_stats.read_stats
        self._last: dict[tuple[str, str], int] = {}
        self._unreadable: set[str] = set()  # netdevs whose failure was logged

    def _delta(self, key: tuple[str, str], value: int | None, width: int | None) -> int | None:
        if value is None:
            return None  # unreadable this tick: the old baseline stays
        previous = self._last.get(key)
        self._last[key] = value
        if previous is None or value < previous:
            return None  # first sight, or cleared: no increase known for this interval
        if width is not None and value == previous == (1 << width) - 1:
            return None  # saturated since the last sample: later errors are invisible
        return value - previous

    def read_port(self, name: str, pdir: str) -> dict:
        """{field: value} for one port directory; every field present, None if unknown."""
        width, gbps = parse_rate(read_text(os.path.join(pdir, "rate")))
        out: dict = {
            "link_state": parse_state(read_text(os.path.join(pdir, "state"))),
            "phys_state": parse_state(read_text(os.path.join(pdir, "phys_state"))),
            "link_width": width,
            "link_gbps": gbps,
        }
        saturated, readable = 0, 0
        for counter, bits in ERROR_COUNTERS.items():
            value = read_int(os.path.join(pdir, "counters", counter))
            if value is not None:
                readable += 1
                saturated += value == (1 << bits) - 1
            out[counter] = self._delta((name, counter), value, bits)
        out["counters_saturated"] = saturated if readable else None
        for counter in CONGESTION_COUNTERS:
            value = read_int(os.path.join(pdir, "hw_counters", counter))
            out[counter] = self._delta((name, counter), value, None)
        out.update(self.read_pause(name, pdir))
        return out

    def read_pause(self, name: str, pdir: str) -> dict:
        """{pause field: increase or None}; all None for a port without a RoCE netdev, or
        whose statistics cannot be read (the baselines stay)."""
        out: dict = dict.fromkeys(PAUSE_COUNTERS)
        netdev = roce_netdev(pdir)
        if netdev is None:
            return out
        try:
            stats = self.ethtool(netdev)
        except OSError as exc:
            if netdev not in self._unreadable:
                self._unreadable.add(netdev)
                log.warning("%s: cannot read the ethtool statistics of %s: %s", name,
                            netdev, exc)
            return out
        self._unreadable.discard(netdev)
        sums: dict[str, int | None] = {}
        for stat, field in pause_stats(stats).items():
            delta = self._delta((name, f"ethtool:{stat}"), stats[stat], None)
            if field not in sums:
                sums[field] = delta
            elif delta is None or sums[field] is None:
                sums[field] = None  # one priority's increase unknown: the sum is too
            else:
                sums[field] += delta
        out.update(sums)
        return out

    def sample(self) -> dict[str, dict]:
        """{"<dev>:<port>": {field: value}} for every InfiniBand / RoCE port."""
        base = os.path.join(self.sysfs_root, "class", "infiniband")
        found = {}
        for dev in _listdir(base):
            ports_dir = os.path.join(base, dev, "ports")
            for port in _listdir(ports_dir):
                name = f"{dev}:{port}"
                found[name] = self.read_port(name, os.path.join(ports_dir, port))
        return found


def roce_netdev(pdir: str) -> str | None:
    """The netdev of an Ethernet (RoCE) RDMA port directory; None for InfiniBand or when
    none is found. ``gid_attrs/ndevs/0`` (the default GID's netdev; reading an unset GID
    entry fails) first, else the PCI device's only netdev."""
    if (read_text(os.path.join(pdir, "link_layer")) or "").strip() != "Ethernet":
        return None
    netdev = (read_text(os.path.join(pdir, "gid_attrs", "ndevs", "0")) or "").strip()
    if netdev:
        return netdev
    dev_dir = os.path.dirname(os.path.dirname(pdir))
    names = _listdir(os.path.join(dev_dir, "device", "net"))
    return names[0] if len(names) == 1 else None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []
