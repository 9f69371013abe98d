"""The simulated hardware: GPU models and their limits, as NVML reports them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_total_mib: int
    memory_reserved_mib: int
    power_limit_w: float
    idle_power_w: float
    max_sm_clock_mhz: int
    idle_sm_clock_mhz: int
    mem_clock_mhz: int
    nvlink_links: int  # 0: a PCIe board without NVLink (the NVLink fields are NotSupported)
    nvlink_link_mbps: int  # per link and direction, MB/s (field 164)
    gpm: bool  # GPU Performance Monitoring (Hopper and later)
    pcie_device_id: int
    idle_temp_c: float
    busy_temp_c: float
    cuda_capability: tuple[int, int]

    @property
    def nvlink_bytes_per_s(self) -> float:
        return self.nvlink_links * self.nvlink_link_mbps * 1e6

    @property
    def pcie_bytes_per_s(self) -> float:
        return 64e9 if self.gpm else 32e9


H100_SXM = GpuModel(
    name="NVIDIA H100 80GB HBM3",
    memory_total_mib=81559,
    memory_reserved_mib=527,
    power_limit_w=700.0,
    idle_power_w=72.0,
    max_sm_clock_mhz=1980,
    idle_sm_clock_mhz=345,
    mem_clock_mhz=2619,
    nvlink_links=18,
    nvlink_link_mbps=25000,
    gpm=True,
    pcie_device_id=0x233010DE,
    idle_temp_c=31.0,
    busy_temp_c=66.0,
    cuda_capability=(9, 0),
)

A100_PCIE = GpuModel(
    name="NVIDIA A100-PCIE-40GB",
    memory_total_mib=40960,
    memory_reserved_mib=437,
    power_limit_w=250.0,
    idle_power_w=36.0,
    max_sm_clock_mhz=1410,
    idle_sm_clock_mhz=210,
    mem_clock_mhz=1215,
    nvlink_links=0,
    nvlink_link_mbps=0,
    gpm=False,
    pcie_device_id=0x20F110DE,
    idle_temp_c=33.0,
    busy_temp_c=70.0,
    cuda_capability=(8, 0),
)

MODELS: dict[str, GpuModel] = {m.name: m for m in (H100_SXM, A100_PCIE)}

# One NDR InfiniBand port: 400 Gb/s = 50e9 bytes/s.
IB_RATE_GBPS = 400
IB_BYTES_PER_S = IB_RATE_GBPS * 125_000_000
# The management Ethernet interface.
ETH_SPEED_MBPS = 25000
ETH_BYTES_PER_S = ETH_SPEED_MBPS * 125_000

DRIVER_VERSION = "570.124.06"
