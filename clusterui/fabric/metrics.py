"""The fabric fields of a NIC sample row (``collectors/fabric.py``): link state and the
increases of the ports' error and congestion counters over the sample interval.

They arrive in ``nic_samples`` beside the byte rates and are validated like them (one
``Metric`` each: type and accepted range); they are stored apart (``store``), not in the
NIC sample table: link state as one row per port (``PortLink``), error increases only where
an error counter rose (``PortErrors``), since on a healthy fabric nearly all are 0.
"""

from clusterui.telemetry.metrics import Metric

BIG = (1 << 63) - 1
ERROR_FIELDS = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_xmit_discards", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)
# RoCE (mlx5 hw_counters): congestion notifications, and the drops and retransmissions of
# a lossy link. Kept as each port's newest interval only (PortLink.congestion).
CONGESTION_FIELDS = ("np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored",
                     "np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence",
                     "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err")
# RoCE pause frames, from the port netdev's ethtool statistics (collectors/roce_pause.py;
# per-priority ones summed per port). Kept with the congestion counters, newest interval.
PAUSE_FIELDS = ("rx_pause_ctrl_phy", "tx_pause_ctrl_phy", "rx_prio_pause", "tx_prio_pause",
                "rx_prio_pause_duration", "tx_pause_storm_warning_events",
                "tx_pause_storm_error_events")
STORM_FIELDS = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")
ROCE_FIELDS = CONGESTION_FIELDS + PAUSE_FIELDS

FABRIC_METRICS: tuple[Metric, ...] = (
    # IBA PortInfo PortState: 0 no change (NOP), 1 Down, 2 Init, 3 Armed, 4 Active,
    # 5 ActiveDefer; PortPhysicalState: 0 no change .. 7 PhyTest (5 LinkUp).
    Metric("link_state", "smallint", 0, 5, integer=True, label="Port state"),
    Metric("phys_state", "smallint", 0, 7, integer=True, label="Physical state"),
    Metric("link_width", "smallint", 1, 32, integer=True, label="Active width", unit="lanes"),
    Metric("link_gbps", "real", 0, 100_000, label="Link rate", unit="Gb/s"),
    Metric("counters_saturated", "smallint", 0, 64, integer=True,
           label="Error counters at their maximum"),
    *(Metric(name, "bigint", 0, BIG, integer=True, label=name.replace("_", " "),
             unit="µs per interval" if name.endswith("_duration") else "per interval")
      for name in ERROR_FIELDS + ROCE_FIELDS),
)
FABRIC_FIELDS = tuple(m.name for m in FABRIC_METRICS)
LINK_ACTIVE = 4
PHYS_LINK_UP = 5
STATE_NAMES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_NAMES = {0: "<unknown>", 1: "Sleep", 2: "Polling", 3: "Disabled",
              4: "PortConfigurationTraining", 5: "LinkUp", 6: "LinkErrorRecovery",
              7: "Phy Test"}
