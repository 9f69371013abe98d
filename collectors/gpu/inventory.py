"""What a GPU is: read once at discovery (and again after a re-init)."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.gpu.fields import nvlink_capacity


@dataclass(frozen=True)
class GpuInfo:
    uuid: str
    index: int
    model: str | None
    memory_total_mib: int | None
    power_limit_w: float | None
    pci_bus_id: str | None
    nvlink_bytes_per_s: int | None
    mig_enabled: bool | None
    # X of /dev/nvidiaX: ties the GPU to Slurm's index of it (not sent; see slurm_gpus)
    minor: int | None = None
    # A MIG instance (collectors/gpu/mig.py): its parent GPU, profile, GPU and compute
    # instance ids, and its GPU-instance slices out of the parent's (max MIG devices).
    parent_uuid: str | None = None
    mig_profile: str | None = None
    mig_gi_id: int | None = None
    mig_ci_id: int | None = None
    mig_slices: int | None = None
    mig_slices_total: int | None = None

    def as_dict(self) -> dict:
        if self.parent_uuid is not None:
            return {
                "uuid": self.uuid,
                "index": self.index,
                "model": self.model,
                "memory_total_mib": self.memory_total_mib,
                "pci_bus_id": self.pci_bus_id,
                "parent_uuid": self.parent_uuid,
                "mig_profile": self.mig_profile,
                "mig_gi_id": self.mig_gi_id,
                "mig_ci_id": self.mig_ci_id,
                "mig_slices": self.mig_slices,
                "mig_slices_total": self.mig_slices_total,
            }
        return {
            "uuid": self.uuid,
            "index": self.index,
            "model": self.model,
            "memory_total_mib": self.memory_total_mib,
            "power_limit_w": self.power_limit_w,
            "pci_bus_id": self.pci_bus_id,
            "nvlink_bytes_per_s": self.nvlink_bytes_per_s,
            "mig_enabled": self.mig_enabled,
        }


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    return str(value).strip("\x00").strip()


def normalise_bus_id(bus_id) -> str | None:
    """NVML's '00000000:18:00.0' and sysfs's '0000:18:00.0' -> '00000000:18:00.0'."""
    text = _text(bus_id)
    if not text:
        return None
    parts = text.split(":")
    if len(parts) != 3:
        return text.upper()
    domain, bus, devfn = parts
    try:
        return f"{int(domain, 16):08X}:{int(bus, 16):02X}:{devfn.upper()}"
    except ValueError:
        return text.upper()


def read_info(probe, handle, index: int, uuid: str) -> GpuInfo:
    memory = probe.call("memory_total", "nvmlDeviceGetMemoryInfo", handle)
    limit_mw = probe.call("power_limit", "nvmlDeviceGetEnforcedPowerLimit", handle)
    pci = probe.call("pci", "nvmlDeviceGetPciInfo", handle)
    mig = probe.call("mig_mode", "nvmlDeviceGetMigMode", handle)
    return GpuInfo(
        uuid=uuid,
        index=index,
        model=_text(probe.call("name", "nvmlDeviceGetName", handle)),
        memory_total_mib=None if memory is None else int(memory.total) // 1048576,
        power_limit_w=None if limit_mw is None else limit_mw / 1000.0,
        pci_bus_id=None if pci is None else normalise_bus_id(pci.busId),
        nvlink_bytes_per_s=nvlink_capacity(probe, handle),
        mig_enabled=None if mig is None else bool(mig[0]),
        minor=probe.call("minor", "nvmlDeviceGetMinorNumber", handle),
    )
