"""The pause (flow control) counters of a RoCE port's netdev, from its ethtool statistics.

Names as the mlx5 driver gives them (``ethtool -S``), meanings from the kernel's
``Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst``
(github.com/torvalds/linux, commit 16f448d47a86825a421fc1211336454c42c5254f):

- ``rx_pause_ctrl_phy`` / ``tx_pause_ctrl_phy``: link layer pause packets received (the
  network cannot absorb what the adapter sends) / sent (the NIC cannot absorb what the
  network sends) on the physical port;
- ``rx_prio<p>_pause`` / ``tx_prio<p>_pause``: pause packets received / sent on priority
  ``p`` (PFC; present only for the priorities with PFC enabled), summed here per port as
  ``rx_prio_pause`` / ``tx_prio_pause``;
- ``rx_prio<p>_pause_duration``: microseconds the port was paused (sent nothing) on
  priority ``p``, summed as ``rx_prio_pause_duration``;
- ``tx_pause_storm_warning_events``: times the device sent pauses for a long period;
  ``tx_pause_storm_error_events``: times it did so until the timeout and stopped sending
  pause frames (a pause storm: drops may have occurred meanwhile).

A driver that has none of these names (not mlx5, or the counter group absent on the
device) gives none of the fields: unknown, not 0.
"""

from __future__ import annotations

import re

# The fields sent, in order; each is the increase over the sample interval.
PAUSE_COUNTERS: tuple[str, ...] = (
    "rx_pause_ctrl_phy",
    "tx_pause_ctrl_phy",
    "rx_prio_pause",
    "tx_prio_pause",
    "rx_prio_pause_duration",
    "tx_pause_storm_warning_events",
    "tx_pause_storm_error_events",
)
STORM_COUNTERS = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")

_EXACT = {"rx_pause_ctrl_phy", "tx_pause_ctrl_phy", *STORM_COUNTERS}
# Priorities 0-7 (counters.rst: "counted per L2 priority (0-7)").
_PER_PRIO = re.compile(r"^(rx|tx)_prio[0-7]_pause(_duration)?$")


def field_of(stat: str) -> str | None:
    """The field an ethtool statistic adds to, or None if it is not a pause counter:
    'rx_prio3_pause' -> 'rx_prio_pause'; 'tx_prio3_pause_duration' -> None (not collected);
    'rx_prio3_pause_transition' -> None."""
    if stat in _EXACT:
        return stat
    match = _PER_PRIO.match(stat)
    if not match:
        return None
    field = f"{match.group(1)}_prio_pause{match.group(2) or ''}"
    return field if field in PAUSE_COUNTERS else None


def pause_stats(stats: dict[str, int]) -> dict[str, str]:
    """{ethtool statistic: the field it adds to} for the pause counters among ``stats``."""
    return {name: field for name in stats if (field := field_of(name)) is not None}
