"""RoCE pause counters: mlx5 ethtool statistic names mapped to the fabric fields, and read
for the netdev of a RoCE port in a sysfs tree.

The names are those of the kernel's
Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst
(github.com/torvalds/linux, commit 16f448d47a86825a421fc1211336454c42c5254f: "Physical Port
Counters" and "Priority Port Counters", `p` the priority 0-7); the values are the test's
own inputs.
"""

import errno
import os

from collectors.fabric import FIELDS, FabricCounters, roce_netdev
from collectors.roce_pause import PAUSE_COUNTERS, field_of, pause_stats
from tests.collectors.sysfs_trees import add_ib_port, write

# The pause-related names of counters.rst, and others beside them that must be left out.
MLX5_NAMES = {
    "rx_pause_ctrl_phy": "rx_pause_ctrl_phy",
    "tx_pause_ctrl_phy": "tx_pause_ctrl_phy",
    "rx_prio0_pause": "rx_prio_pause",
    "rx_prio3_pause": "rx_prio_pause",
    "tx_prio3_pause": "tx_prio_pause",
    "rx_prio3_pause_duration": "rx_prio_pause_duration",
    "tx_pause_storm_warning_events": "tx_pause_storm_warning_events",
    "tx_pause_storm_error_events": "tx_pause_storm_error_events",
    "tx_prio3_pause_duration": None,  # the pause we sent, in µs: not collected
    "rx_prio3_pause_transition": None,
    "rx_global_pause": None,
    "rx_global_pause_duration": None,
    "rx_prio3_packets": None,
    "rx_prio3_bytes": None,
    "rx_prio3_buf_discard": None,
    "rx_mac_control_phy": None,
    "rx_discards_phy": None,
}


def test_mlx5_names_map_to_the_pause_fields():
    for name, field in MLX5_NAMES.items():
        assert field_of(name) == field, name
    assert field_of("rx_prio8_pause") is None  # priorities are 0-7
    assert set(pause_stats(dict.fromkeys(MLX5_NAMES, 0)).values()) == set(PAUSE_COUNTERS)
    assert set(PAUSE_COUNTERS) <= set(FIELDS)  # sent with the other fabric fields


def _roce_port(sysfs, dev="mlx5_0", netdev="ens1f0np0"):
    add_ib_port(sysfs, dev, 1, xmit=0, rcv=0, link_layer="Ethernet", lid="0x0",
                rate="400 Gb/sec (4X NDR)")  # fmt: skip
    if netdev:
        pdir = os.path.join(sysfs, "class", "infiniband", dev, "ports", "1")
        write(os.path.join(pdir, "gid_attrs", "ndevs", "0"), netdev)


class Stats:
    """A replaceable ethtool reader: the statistics each netdev reports now."""

    def __init__(self):
        self.now: dict[str, dict[str, int]] = {}
        self.asked: list[str] = []

    def __call__(self, ifname):
        self.asked.append(ifname)
        if ifname not in self.now:
            raise OSError(errno.ENODEV, "No such device")
        return self.now[ifname]


def test_pause_increases_per_port_with_priorities_summed(roots):
    sysfs = roots["sys"]
    _roce_port(sysfs)
    stats = Stats()
    stats.now["ens1f0np0"] = {"rx_prio0_pause": 1, "rx_prio3_pause": 100,
                              "rx_prio3_pause_duration": 5000, "tx_prio3_pause": 7,
                              "rx_pause_ctrl_phy": 0, "tx_pause_storm_warning_events": 0,
                              "tx_pause_storm_error_events": 0, "rx_packets_phy": 10}
    src = FabricCounters(sysfs, stats)
    first = src.sample()["mlx5_0:1"]
    assert stats.asked == ["ens1f0np0"]
    assert all(first[f] is None for f in PAUSE_COUNTERS)  # first reading: no increase
    stats.now["ens1f0np0"] = {"rx_prio0_pause": 3, "rx_prio3_pause": 150,
                              "rx_prio3_pause_duration": 9000, "tx_prio3_pause": 7,
                              "rx_pause_ctrl_phy": 0, "tx_pause_storm_warning_events": 0,
                              "tx_pause_storm_error_events": 2, "rx_packets_phy": 99}
    port = src.sample()["mlx5_0:1"]
    assert port["rx_prio_pause"] == 52  # 2 on priority 0 + 50 on priority 3
    assert port["rx_prio_pause_duration"] == 4000
    assert (port["tx_prio_pause"], port["rx_pause_ctrl_phy"]) == (0, 0)
    assert port["tx_pause_storm_error_events"] == 2
    # A driver that does not report it (this one has no tx_pause_ctrl_phy): unknown, not 0.
    assert port["tx_pause_ctrl_phy"] is None


def test_a_counter_reset_drops_that_interval_of_its_sum(roots):
    sysfs = roots["sys"]
    _roce_port(sysfs)
    stats = Stats()
    stats.now["ens1f0np0"] = {"rx_prio0_pause": 10, "rx_prio3_pause": 100}
    src = FabricCounters(sysfs, stats)
    src.sample()
    stats.now["ens1f0np0"] = {"rx_prio0_pause": 12, "rx_prio3_pause": 4}  # driver reload
    assert src.sample()["mlx5_0:1"]["rx_prio_pause"] is None
    stats.now["ens1f0np0"] = {"rx_prio0_pause": 13, "rx_prio3_pause": 6}
    assert src.sample()["mlx5_0:1"]["rx_prio_pause"] == 3


def test_unreadable_statistics_lose_only_the_pause_fields(roots):
    sysfs = roots["sys"]
    _roce_port(sysfs, netdev="gone0")
    src = FabricCounters(sysfs, Stats())
    src.sample()
    port = src.sample()["mlx5_0:1"]
    assert all(port[f] is None for f in PAUSE_COUNTERS)
    assert port["link_gbps"] == 400.0  # the rest of the port is still read


def test_the_netdev_of_an_rdma_port(roots):
    sysfs = roots["sys"]
    _roce_port(sysfs, "mlx5_0", "ens1f0np0")
    _roce_port(sysfs, "mlx5_1", None)  # no GID table entry: the PCI device's netdev
    os.makedirs(os.path.join(sysfs, "class", "infiniband", "mlx5_1", "device", "net", "ens2np0"))
    add_ib_port(sysfs, "mlx5_2", 1, xmit=0, rcv=0)  # InfiniBand: no pause frames
    ports = os.path.join(sysfs, "class", "infiniband", "{}", "ports", "1")
    assert roce_netdev(ports.format("mlx5_0")) == "ens1f0np0"
    assert roce_netdev(ports.format("mlx5_1")) == "ens2np0"
    assert roce_netdev(ports.format("mlx5_2")) is None
    stats = Stats()
    FabricCounters(sysfs, stats).sample()
    assert sorted(stats.asked) == ["ens1f0np0", "ens2np0"]  # the InfiniBand port not asked
