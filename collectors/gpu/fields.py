"""NVML field values: cumulative PCIe/NVLink counters and NVLink capacity."""

from __future__ import annotations

from collectors.gpu.errors import (
    LOST,
    NVML_SUCCESS,
    PERMANENT,
    REINIT,
    GpuLost,
    NvmlGone,
    classify_code,
)

ALL_LINKS = 0xFFFFFFFF

PCIE_TX_BYTES = 197  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES, cumulative bytes, may wrap
PCIE_RX_BYTES = 198
PCIE = ("pcie_tx", "pcie_rx")
PCIE_UTIL_TX_BYTES = 0  # nvmlPcieUtilCounter_t for nvmlDeviceGetPcieThroughput (KB/s, 20 ms)
PCIE_UTIL_RX_BYTES = 1
NVLINK_TX_KIB = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, cumulative KiB
NVLINK_RX_KIB = 139
NVLINK_SPEED_MBPS_COMMON = 90
NVLINK_LINK_COUNT = 91
NVLINK_GET_SPEED = 164  # per link (scope = link id), MBps

# Counter fields read every tick: (name, field id, scope, bytes per unit).
COUNTERS = (
    ("pcie_tx", PCIE_TX_BYTES, 0, 1),
    ("pcie_rx", PCIE_RX_BYTES, 0, 1),
    ("nvlink_tx", NVLINK_TX_KIB, ALL_LINKS, 1024),
    ("nvlink_rx", NVLINK_RX_KIB, ALL_LINKS, 1024),
)

_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
# Value types narrower than 64 bits: a cumulative counter of that type wraps. NVML's PCIe
# byte counters (197/198) came back as uiVal on a real H200 and wrapped several times a
# second under load, so no rate over a tick can be taken from them.
NARROW_TYPES = frozenset({1, 5, 6})


def field_value(entry) -> float | int | None:
    """The value of one ``c_nvmlFieldValue_t``, read by its ``valueType``."""
    attr = _VALUE_ATTR.get(int(entry.valueType))
    if attr is None:
        return None
    return getattr(entry.value, attr)


def read_fields(probe, handle, wanted: list[tuple[str, int, int]],
                types: dict[str, int] | None = None) -> dict[str, float | int]:
    """Read ``[(name, field id, scope)]`` in one call; unsupported names are cached.

    Returns only the names that answered. Each entry's ``nvmlReturn`` is checked: the call
    as a whole succeeds when any one field does. ``types``, when given, receives each
    answered name's ``valueType``.
    """
    wanted = [w for w in wanted if probe.supported("field:" + w[0])]
    if not wanted or not probe.supported("field_values"):
        return {}
    entries = probe.call(
        "field_values",
        "nvmlDeviceGetFieldValues",
        handle,
        [(fid, scope) for _, fid, scope in wanted],
    )
    if entries is None:
        return {}
    out: dict[str, float | int] = {}
    for (name, _fid, _scope), entry in zip(wanted, entries, strict=False):
        ret = int(entry.nvmlReturn)
        if ret == NVML_SUCCESS:
            value = field_value(entry)
            if value is not None:
                out[name] = value
                if types is not None:
                    types[name] = int(entry.valueType)
            continue
        kind = classify_code(ret)
        if kind == PERMANENT:
            probe.mark_unsupported("field:" + name, f"nvmlReturn {ret}")
        elif kind == LOST:
            raise GpuLost(f"field {name}: nvmlReturn {ret}")
        elif kind == REINIT:
            raise NvmlGone(f"field {name}: nvmlReturn {ret}")
    return out


def nvlink_capacity(probe, handle) -> int | None:
    """Link count x per-link speed, in bytes/s; None on boards without NVLink."""
    got = read_fields(
        probe,
        handle,
        [
            ("nvlink_link_count", NVLINK_LINK_COUNT, 0),
            ("nvlink_speed_common", NVLINK_SPEED_MBPS_COMMON, 0),
            ("nvlink_speed_link0", NVLINK_GET_SPEED, 0),
        ],
    )
    count = got.get("nvlink_link_count")
    speed = got.get("nvlink_speed_common") or got.get("nvlink_speed_link0")
    if not count or not speed:
        return None
    return int(count) * int(speed) * 1_000_000
