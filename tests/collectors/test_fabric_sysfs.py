"""Fabric health from sysfs trees in the kernel's formats (drivers/infiniband/core/sysfs.c:
rate_show "%d%s Gb/sec (%dX%s)", state "%d: %s", phys_state "%d: %s", PMA counters "%u")."""

import os

from collectors.fabric import FIELDS, FabricCounters, parse_rate, parse_state
from tests.collectors.sysfs_trees import (
    add_ib_port,
    set_hw_counters,
    set_ib_errors,
    set_link,
)

ZERO_ERRORS = dict(symbol_error=0, link_error_recovery=0, link_downed=0, port_rcv_errors=0,
                   port_rcv_remote_physical_errors=0, port_xmit_discards=0,
                   local_link_integrity_errors=0, excessive_buffer_overrun_errors=0)


def test_parse_link_strings_as_the_kernel_writes_them():
    assert parse_rate("100 Gb/sec (4X EDR)") == (4, 100.0)
    assert parse_rate("400 Gb/sec (4X NDR)") == (4, 400.0)
    assert parse_rate("2.5 Gb/sec (1X SDR)") == (1, 2.5)
    assert parse_rate("25 Gb/sec (1X EDR)") == (1, 25.0)
    assert parse_rate("300 Gb/sec (12X EDR)") == (12, 300.0)
    assert parse_rate("garbage") == (None, None) and parse_rate(None) == (None, None)
    assert parse_state("4: ACTIVE") == 4 and parse_state("1: DOWN") == 1
    assert parse_state("5: LinkUp") == 5 and parse_state("3: Disabled") == 3
    assert parse_state("N/A") is None and parse_state(None) is None


def test_error_counters_are_increases_per_interval(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=0, rcv=0, rate="100 Gb/sec (4X EDR)")
    set_ib_errors(sysfs, "mlx5_0", 1, **ZERO_ERRORS)
    src = FabricCounters(sysfs)
    first = src.sample()["mlx5_0:1"]
    assert set(first) == set(FIELDS)
    assert first["symbol_error"] is None  # first sight: no increase known yet
    assert (first["link_state"], first["phys_state"]) == (4, 5)
    assert (first["link_width"], first["link_gbps"]) == (4, 100.0)
    set_ib_errors(sysfs, "mlx5_0", 1, symbol_error=17, link_downed=1)
    port = src.sample()["mlx5_0:1"]
    assert port["symbol_error"] == 17 and port["link_downed"] == 1
    assert port["port_rcv_errors"] == 0
    assert port["counters_saturated"] == 0


def test_degraded_and_down_link(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=0, rcv=0)
    src = FabricCounters(sysfs)
    set_link(sysfs, "mlx5_0", 1, rate="100 Gb/sec (1X NDR)")
    port = src.sample()["mlx5_0:1"]
    assert (port["link_width"], port["link_gbps"]) == (1, 100.0)
    set_link(sysfs, "mlx5_0", 1, state="1: DOWN", phys_state="2: Polling")
    port = src.sample()["mlx5_0:1"]
    assert (port["link_state"], port["phys_state"]) == (1, 2)


def test_cleared_counter_drops_the_interval(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=0, rcv=0)
    set_ib_errors(sysfs, "mlx5_0", 1, **{**ZERO_ERRORS, "symbol_error": 500})
    src = FabricCounters(sysfs)
    src.sample()
    set_ib_errors(sysfs, "mlx5_0", 1, symbol_error=3)  # perfquery -R, or a driver reload
    assert src.sample()["mlx5_0:1"]["symbol_error"] is None
    set_ib_errors(sysfs, "mlx5_0", 1, symbol_error=10)
    assert src.sample()["mlx5_0:1"]["symbol_error"] == 7


def test_saturated_counter_is_unknown_not_zero(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=0, rcv=0)
    set_ib_errors(sysfs, "mlx5_0", 1, **{**ZERO_ERRORS, "symbol_error": 65530,
                                         "link_downed": 255})
    src = FabricCounters(sysfs)
    src.sample()
    set_ib_errors(sysfs, "mlx5_0", 1, symbol_error=65535)  # 16 bits: stops at all ones
    port = src.sample()["mlx5_0:1"]
    assert port["symbol_error"] == 5  # at least 5 (a lower bound)
    assert port["link_downed"] is None  # 8 bits, stuck at 255 since before
    assert port["counters_saturated"] == 2
    port = src.sample()["mlx5_0:1"]
    assert port["symbol_error"] is None  # still at the top: later errors are invisible


def test_missing_files_are_null(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx4_0", 1, xmit=0, rcv=0)
    pdir = os.path.join(sysfs, "class", "infiniband", "mlx4_0", "ports", "1")
    os.remove(os.path.join(pdir, "phys_state"))
    set_ib_errors(sysfs, "mlx4_0", 1, symbol_error="N/A (no PMA)")
    src = FabricCounters(sysfs)
    src.sample()
    port = src.sample()["mlx4_0:1"]
    assert port["phys_state"] is None
    assert port["symbol_error"] is None and port["link_downed"] is None
    assert port["counters_saturated"] is None  # no error counter readable at all
    assert port["np_cnp_sent"] is None  # no hw_counters directory (not mlx5 RoCE)


def test_roce_congestion_counters(roots):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_1", 1, xmit=0, rcv=0, link_layer="Ethernet", lid="0x0",
                rate="200 Gb/sec (4X HDR)")  # fmt: skip
    set_hw_counters(sysfs, "mlx5_1", 1, np_cnp_sent=10, rp_cnp_handled=20,
                    np_ecn_marked_roce_packets=30, out_of_buffer=0)
    src = FabricCounters(sysfs)
    src.sample()
    set_hw_counters(sysfs, "mlx5_1", 1, np_cnp_sent=110, rp_cnp_handled=25,
                    np_ecn_marked_roce_packets=30, out_of_buffer=4)
    port = src.sample()["mlx5_1:1"]
    assert (port["np_cnp_sent"], port["rp_cnp_handled"]) == (100, 5)
    assert (port["np_ecn_marked_roce_packets"], port["out_of_buffer"]) == (0, 4)
    # The retransmission q counters are absent here (no retransmission_q_counters
    # capability): null, never 0.
    assert port["packet_seq_err"] is None and port["local_ack_timeout_err"] is None


def test_roce_retransmission_counters_rise_and_their_32_bit_wrap_drops_the_interval(roots):
    # File names: drivers/infiniband/hw/mlx5/counters.c (out_of_seq_q_cnts, retrans_q_cnts),
    # torvalds/linux 10d4de4189533840f296ce7e48eac05b985d96bc; q counters are be32 values.
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=0, rcv=0, link_layer="Ethernet", lid="0x0",
                rate="400 Gb/sec (4X NDR)")  # fmt: skip
    names = ("out_of_sequence", "packet_seq_err", "implied_nak_seq_err",
             "local_ack_timeout_err", "rp_cnp_ignored")
    set_hw_counters(sysfs, "mlx5_0", 1, **dict.fromkeys(names, 7))
    src = FabricCounters(sysfs)
    first = src.sample()["mlx5_0:1"]
    assert [first[n] for n in names] == [None] * len(names)  # no increase on a first reading
    set_hw_counters(sysfs, "mlx5_0", 1, out_of_sequence=97, packet_seq_err=4_294_967_290,
                    implied_nak_seq_err=7, local_ack_timeout_err=9, rp_cnp_ignored=8)
    port = src.sample()["mlx5_0:1"]
    assert [port[n] for n in names] == [90, 4_294_967_283, 0, 2, 1]
    set_hw_counters(sysfs, "mlx5_0", 1, out_of_sequence=98, packet_seq_err=5,
                    implied_nak_seq_err=7, local_ack_timeout_err=9, rp_cnp_ignored=8)
    port = src.sample()["mlx5_0:1"]
    assert port["packet_seq_err"] is None  # wrapped past 2**32: that interval is unknown
    assert port["out_of_sequence"] == 1
