"""The SIOCETHTOOL reader against this machine's real kernel: a veth pair, whose driver
reports ``peer_ifindex`` among its statistics (drivers/net/veth.c, ``veth_get_ethtool_stats``),
so a right value under the right name proves the struct layouts of ETHTOOL_GSSET_INFO,
ETHTOOL_GSTRINGS and ETHTOOL_GSTATS (include/uapi/linux/ethtool.h)."""

import errno
import os
import shutil
import subprocess
import uuid

import pytest

from collectors.ethtool_stats import EthtoolError, read_stats


def _ip(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def veth_pair():
    if shutil.which("ip") is None:
        pytest.fail("ip(8) (Debian's iproute2) is needed to create the veth pair this test "
                    "reads; install it")
    a, b = f"cu{uuid.uuid4().hex[:8]}", f"cv{uuid.uuid4().hex[:8]}"
    made = _ip("link", "add", a, "type", "veth", "peer", "name", b)
    if made.returncode != 0:
        pytest.fail(f"cannot create a veth pair (needs root or CAP_NET_ADMIN): "
                    f"{made.stderr.strip()}")
    try:
        yield a, b
    finally:
        _ip("link", "del", a)


def _ifindex(name: str) -> int:
    with open(f"/sys/class/net/{name}/ifindex") as fh:
        return int(fh.read())


def test_veth_statistics_read_through_the_ioctl_name_the_peer(veth_pair):
    a, b = veth_pair
    stats = read_stats(a)
    assert stats["peer_ifindex"] == _ifindex(b)
    assert read_stats(b)["peer_ifindex"] == _ifindex(a)
    # Every name is a clean string and every value a u64: no misaligned slice of the buffer.
    assert all(name and name.isprintable() and " " not in name for name in stats)
    assert all(0 <= v < 1 << 64 for v in stats.values())


def test_no_such_interface_is_an_os_error_not_empty_statistics():
    with pytest.raises(OSError) as exc:
        read_stats("cu-nonexistent")
    assert exc.value.errno == errno.ENODEV


def test_interface_without_driver_statistics_says_so():
    assert os.path.exists("/sys/class/net/lo"), "no loopback interface on this machine"
    with pytest.raises(OSError, match="lo"):
        read_stats("lo")  # the loopback driver has no ETH_SS_STATS set


@pytest.mark.parametrize("name", ["", "x" * 16, "../eth0"])
def test_bad_interface_names_are_refused_before_any_ioctl(name):
    with pytest.raises(EthtoolError, match="not an interface name"):
        read_stats(name)
