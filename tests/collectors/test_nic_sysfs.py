import os

from collectors.nic import NicSource, parse_eth_speed, parse_ib_rate
from tests.collectors.sysfs_trees import (
    add_ib_port,
    add_netdev,
    set_ib_counters,
    set_netdev_counters,
    write,
)


def test_ib_rate_parsing():
    assert parse_ib_rate("400 Gb/sec (4X NDR)") == 50_000_000_000
    assert parse_ib_rate("100 Gb/sec (4X EDR)") == 12_500_000_000
    assert parse_ib_rate("2.5 Gb/sec (1X SDR)") == 312_500_000
    assert parse_ib_rate("garbage") is None
    assert parse_ib_rate(None) is None


def test_ethernet_speed_parsing():
    assert parse_eth_speed("25000") == 3_125_000_000
    assert parse_eth_speed("-1") is None
    assert parse_eth_speed("0") is None
    assert parse_eth_speed(None) is None


def test_ib_data_counters_are_octets_over_four(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=1000, rcv=2000)
    src = NicSource(sysfs)
    assert src.sample(100.0) == []  # first sight: no rate yet
    set_ib_counters(sysfs, "mlx5_0", 1, xmit=1000 + 250_000, rcv=2000 + 500_000)
    [(nic, rx, tx)] = src.sample(110.0)
    assert nic.name == "mlx5_0:1" and nic.kind == "infiniband"
    assert nic.link_bytes_per_s == 50_000_000_000
    assert rx == 500_000 * 4 / 10
    assert tx == 250_000 * 4 / 10


def test_roce_port_with_lid_zero_is_kept(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_1", 1, xmit=0, rcv=0, link_layer="Ethernet", lid="0x0",
                rate="200 Gb/sec (4X HDR)")  # fmt: skip
    src = NicSource(sysfs)
    src.sample(0.0)
    set_ib_counters(sysfs, "mlx5_1", 1, xmit=100, rcv=100)
    [(nic, rx, tx)] = src.sample(1.0)
    assert (nic.name, nic.kind, nic.link_bytes_per_s) == ("mlx5_1:1", "roce", 25_000_000_000)
    assert rx == tx == 400.0


def test_counter_reset_drops_the_interval(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=10_000, rcv=10_000)
    src = NicSource(sysfs)
    src.sample(0.0)
    set_ib_counters(sysfs, "mlx5_0", 1, xmit=50, rcv=50)  # driver reload
    assert src.sample(10.0) == []
    set_ib_counters(sysfs, "mlx5_0", 1, xmit=150, rcv=250)
    [(_, rx, tx)] = src.sample(20.0)
    assert (rx, tx) == (80.0, 40.0)


def test_no_pma_counter_is_missing(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx4_0", 1, xmit=0, rcv=0)
    cdir = os.path.join(sysfs, "class", "infiniband", "mlx4_0", "ports", "1", "counters")
    write(os.path.join(cdir, "port_xmit_data"), "N/A (no PMA)")
    src = NicSource(sysfs)
    src.sample(0.0)
    write(os.path.join(cdir, "port_rcv_data"), "40")
    [(nic, rx, tx)] = src.sample(1.0)
    assert rx == 160.0 and tx is None
    assert [n.name for n in src.inventory] == ["mlx4_0:1"]


def test_ethernet_physical_only_and_unknown_speed(roots):
    sysfs = roots["sys"]
    add_netdev(sysfs, "eth0", rx=0, tx=0, speed="-1")
    add_netdev(sysfs, "ens1f0", rx=1000, tx=2000, speed="100000")
    add_netdev(sysfs, "lo", rx=0, tx=0, physical=False)
    add_netdev(sysfs, "veth12ab", rx=0, tx=0, physical=False)
    src = NicSource(sysfs)
    src.sample(0.0)
    set_netdev_counters(sysfs, "eth0", rx=500, tx=100)
    set_netdev_counters(sysfs, "ens1f0", rx=3000, tx=2000)
    got = {nic.name: (nic, rx, tx) for nic, rx, tx in src.sample(2.0)}
    assert set(got) == {"eth0", "ens1f0"}
    assert got["eth0"][0].link_bytes_per_s is None
    assert got["eth0"][0].kind == "ethernet"
    assert got["eth0"][1:] == (250.0, 50.0)
    assert got["ens1f0"][0].link_bytes_per_s == 12_500_000_000
    assert got["ens1f0"][1:] == (1000.0, 0.0)


def test_new_nic_needs_two_readings(roots):
    sysfs = roots["sys"]
    add_netdev(sysfs, "eth0", rx=0, tx=0)
    src = NicSource(sysfs)
    src.sample(0.0)
    add_ib_port(sysfs, "mlx5_0", 1, xmit=5, rcv=5)
    set_netdev_counters(sysfs, "eth0", rx=10, tx=10)
    assert [n.name for n, _, _ in src.sample(1.0)] == ["eth0"]
