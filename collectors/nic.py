"""Network ports from sysfs: InfiniBand / RoCE ports and physical Ethernet interfaces.

RDMA traffic (NCCL over IB or RoCE) shows only in ``class/infiniband``; ``class/net`` sees
TCP/IP. Ports with LID 0 (RoCE) are kept on purpose.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from collectors.rates import CounterRates

_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")


@dataclass(frozen=True)
class Nic:
    name: str  # "<dev>:<port>" for IB/RoCE, interface name for Ethernet
    kind: str  # infiniband | roce | ethernet
    link_bytes_per_s: int | None

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "link_bytes_per_s": self.link_bytes_per_s}


@dataclass(frozen=True)
class NicReading:
    nic: Nic
    state: str | None
    rx_bytes: int | None
    tx_bytes: int | None


def read_text(path: str) -> str | None:
    """A sysfs attribute's text, or None when it is absent, unreadable or 'N/A'."""
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text or text.upper().startswith("N/A"):
        return None
    return text


def read_int(path: str) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def parse_ib_rate(text: str | None) -> int | None:
    """'400 Gb/sec (4X NDR)' -> 50_000_000_000 bytes/s."""
    if text is None:
        return None
    match = _RATE.match(text)
    if not match:
        return None
    return round(float(match.group(1)) * 125_000_000)


def parse_eth_speed(text: str | None) -> int | None:
    """sysfs 'speed' in Mbit/s -> bytes/s; -1, 0 or unreadable -> unknown."""
    if text is None:
        return None
    try:
        mbit = int(text)
    except ValueError:
        return None
    if mbit <= 0:
        return None
    return mbit * 125_000


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def read_ib_ports(sysfs_root: str) -> list[NicReading]:
    base = os.path.join(sysfs_root, "class", "infiniband")
    readings = []
    for dev in _listdir(base):
        ports_dir = os.path.join(base, dev, "ports")
        for port in _listdir(ports_dir):
            pdir = os.path.join(ports_dir, port)
            layer = read_text(os.path.join(pdir, "link_layer"))
            kind = "roce" if layer and layer.lower() == "ethernet" else "infiniband"
            xmit = read_int(os.path.join(pdir, "counters", "port_xmit_data"))
            rcv = read_int(os.path.join(pdir, "counters", "port_rcv_data"))
            nic = Nic(f"{dev}:{port}", kind, parse_ib_rate(read_text(os.path.join(pdir, "rate"))))
            readings.append(
                NicReading(
                    nic=nic,
                    state=read_text(os.path.join(pdir, "state")),
                    # The data counters count octets divided by 4.
                    rx_bytes=None if rcv is None else rcv * 4,
                    tx_bytes=None if xmit is None else xmit * 4,
                )
            )
    return readings


def read_ethernet(sysfs_root: str) -> list[NicReading]:
    base = os.path.join(sysfs_root, "class", "net")
    readings = []
    for name in _listdir(base):
        idir = os.path.join(base, name)
        # Physical interfaces have a 'device' link; lo, bridges, veth, ifb, bonds do not.
        if name == "lo" or not os.path.exists(os.path.join(idir, "device")):
            continue
        nic = Nic(name, "ethernet", parse_eth_speed(read_text(os.path.join(idir, "speed"))))
        readings.append(
            NicReading(
                nic=nic,
                state=read_text(os.path.join(idir, "operstate")),
                rx_bytes=read_int(os.path.join(idir, "statistics", "rx_bytes")),
                tx_bytes=read_int(os.path.join(idir, "statistics", "tx_bytes")),
            )
        )
    return readings


class NicSource:
    """Reads every port each tick and returns rates for the ones with two good readings."""

    def __init__(self, sysfs_root: str) -> None:
        self.sysfs_root = sysfs_root
        self._rates = CounterRates()
        self.inventory: list[Nic] = []

    def read(self) -> list[NicReading]:
        return read_ib_ports(self.sysfs_root) + read_ethernet(self.sysfs_root)

    def sample(self, ts: float) -> list[tuple[Nic, float | None, float | None]]:
        """[(nic, rx_bytes_per_s, tx_bytes_per_s)] for ports with a rate this tick.

        A direction whose counter is missing ('N/A (no PMA)') is None.

        The inventory (every port seen, even without a rate) is ``self.inventory``.
        """
        readings = self.read()
        self.inventory = [r.nic for r in readings]
        out = []
        for reading in readings:
            rx_key, tx_key = (reading.nic.name, "rx"), (reading.nic.name, "tx")
            rx = self._rates.update(rx_key, ts, reading.rx_bytes)
            tx = self._rates.update(tx_key, ts, reading.tx_bytes)
            if self._rates.was_reset(rx_key) or self._rates.was_reset(tx_key):
                continue  # a counter went backwards: drop this interval entirely
            if rx is None and tx is None:
                continue  # first sight (needs two readings) or both counters missing
            out.append((reading.nic, rx, tx))
        return out
