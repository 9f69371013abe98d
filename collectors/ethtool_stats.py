"""A network interface's driver statistics (``ethtool -S``), read with the SIOCETHTOOL ioctl.

Three ``ETHTOOL_*`` commands on an ``AF_INET`` datagram socket, their structs as in
``include/uapi/linux/ethtool.h`` (github.com/torvalds/linux):

- ``ETHTOOL_GSSET_INFO`` (0x37), ``struct ethtool_sset_info {u32 cmd; u32 reserved;
  u64 sset_mask; u32 data[];}``: asked with ``sset_mask = 1 << ETH_SS_STATS`` (1); the bit
  comes back set, and ``data[0]`` holds the number of statistics, where the driver has them;
- ``ETHTOOL_GSTRINGS`` (0x1b), ``struct ethtool_gstrings {u32 cmd; u32 string_set; u32 len;
  u8 data[];}``: ``len`` names of ``ETH_GSTRING_LEN`` (32) bytes, NUL padded;
- ``ETHTOOL_GSTATS`` (0x1d), ``struct ethtool_stats {u32 cmd; u32 n_stats; u64 data[];}``:
  the values, in the order of the names.

``struct ifreq`` (``include/uapi/linux/if.h``) is the 16-byte name then a union whose
``ifr_data`` is the pointer to the command's struct; it is 40 bytes on 64-bit Linux.

The count passed is the one ETHTOOL_GSSET_INFO gave. Older kernels size their answer by
the driver's count at the time of each call whatever was passed (``ethtool_get_stats`` in
``net/ethtool/ioctl.c``), newer ones answer a count of 0 when the two differ; so the buffers
have room to spare, and a count that changed between the calls (a driver reconfigured)
gives no reading this time rather than names paired with the wrong values.

``read_stats`` is the reader the collector uses (``collectors/fabric.py``); tests and the
simulator pass another callable of the same shape.
"""

from __future__ import annotations

import array
import fcntl
import socket
import struct

SIOCETHTOOL = 0x8946  # include/uapi/linux/sockios.h
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSTATS = 0x1D
ETHTOOL_GSSET_INFO = 0x37
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32
IFNAMSIZ = 16
_IFREQ_SIZE = 40
_SPARE = 64  # entries of room beyond the count, should the driver's count grow meanwhile


class EthtoolError(OSError):
    """The interface's statistics could not be read (no such interface, no statistics, a
    count that changed between the calls)."""


def _ioctl(sock: socket.socket, ifname: bytes, buf: array.array) -> None:
    address, _ = buf.buffer_info()
    ifreq = struct.pack(f"{IFNAMSIZ}sP", ifname, address)
    ifreq += b"\0" * (_IFREQ_SIZE - len(ifreq))
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)


def _count(sock: socket.socket, ifname: bytes) -> int:
    buf = array.array("B", struct.pack("=IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0))
    _ioctl(sock, ifname, buf)
    _, _, mask, count = struct.unpack("=IIQI", buf.tobytes())
    if not mask & (1 << ETH_SS_STATS):
        raise EthtoolError(f"{ifname.decode()}: the driver has no statistics (ETH_SS_STATS)")
    return count


def _names(sock: socket.socket, ifname: bytes, count: int) -> list[str]:
    header = struct.pack("=III", ETHTOOL_GSTRINGS, ETH_SS_STATS, count)
    buf = array.array("B", header + b"\0" * ((count + _SPARE) * ETH_GSTRING_LEN))
    _ioctl(sock, ifname, buf)
    data = buf.tobytes()
    (length,) = struct.unpack_from("=I", data, 8)
    if length != count:
        raise EthtoolError(f"{ifname.decode()}: {length} statistics names, expected {count}")
    names = []
    for i in range(count):
        raw = data[12 + i * ETH_GSTRING_LEN: 12 + (i + 1) * ETH_GSTRING_LEN]
        names.append(raw.split(b"\0", 1)[0].decode("ascii", "replace"))
    return names


def _values(sock: socket.socket, ifname: bytes, count: int) -> list[int]:
    buf = array.array("B", struct.pack("=II", ETHTOOL_GSTATS, count)
                      + b"\0" * ((count + _SPARE) * 8))
    _ioctl(sock, ifname, buf)
    data = buf.tobytes()
    (n,) = struct.unpack_from("=I", data, 4)
    if n != count:
        raise EthtoolError(f"{ifname.decode()}: {n} statistics values, expected {count}")
    return list(struct.unpack_from(f"={count}Q", data, 8))


def read_stats(ifname: str) -> dict[str, int]:
    """{name: value} of ``ethtool -S <ifname>``. Raises ``OSError`` (``EthtoolError`` or the
    ioctl's: ENODEV for no such interface, EOPNOTSUPP for a driver without statistics)."""
    name = ifname.encode()
    if not name or len(name) >= IFNAMSIZ or b"/" in name:
        raise EthtoolError(f"not an interface name: {ifname!r}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        count = _count(sock, name)
        names = _names(sock, name, count)
        values = _values(sock, name, count)
    return dict(zip(names, values, strict=True))
