"""MIG instances: each one a device of its own, sampled under its parent GPU.

On a GPU whose MIG mode is on, NVML gives one handle per MIG device (a compute instance
of a GPU instance): ``nvmlDeviceGetMaxMigDeviceCount(parent)`` slots, each read with
``nvmlDeviceGetMigDeviceHandleByIndex(parent, i)`` (``NOT_FOUND`` for an empty slot). A MIG
handle answers ``nvmlDeviceGetUUID`` ("MIG-..."), ``nvmlDeviceGetGpuInstanceId`` /
``ComputeInstanceId``, ``nvmlDeviceGetMemoryInfo`` (the instance's own memory),
``nvmlDeviceGetAttributes`` (``gpuInstanceSliceCount``, ``memorySizeMB``) and the process
lists (per instance: NVML's ``nvmlDeviceGetComputeRunningProcesses`` docs, "Per-instance
information can be queried by using specific MIG device handles"). Utilization is not
reported on MIG (``nvmlDeviceGetUtilizationRates`` says NOT_SUPPORTED): it is sent as null.
Power, temperature, clocks and the PCIe/NVLink counters belong to the parent GPU.

This is the order Slurm's own NVML plugin enumerates them in (SchedMD/slurm
``src/plugins/gpu/nvml/gpu_nvml.c``, ``_get_system_gpu_list_nvml``: slots 0.. until the first
that does not answer), so the slot number is also Slurm's order of a parent's MIG GRES.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors.gpu.errors import Probe
from collectors.gpu.inventory import GpuInfo, _text

# 'NVIDIA H100 80GB HBM3 MIG 1g.10gb' -> '1g.10gb' (nvidia-smi -L prints "MIG 1g.10gb Device 0")
_PROFILE = re.compile(r"\bMIG\s+(\S+)\s*$")


@dataclass(frozen=True)
class MigDevice:
    info: GpuInfo
    handle: object
    slot: int  # i of nvmlDeviceGetMigDeviceHandleByIndex(parent, i)


def profile_of(name: str | None, slices: int | None, memory_mb: int | None) -> str | None:
    """The instance's profile: from its NVML name ('... MIG 1g.10gb'), else built the way
    Slurm names it (gpu_nvml.c, ``_handle_mig``: ``%ug.%lugb`` of gpuInstanceSliceCount and
    memorySizeMB / 1024 rounded)."""
    match = _PROFILE.search(name or "")
    if match:
        return match.group(1)
    if slices and memory_mb:
        return f"{slices}g.{round(memory_mb / 1024)}gb"
    return None


def discover(nvml, parent: GpuInfo, parent_handle, parent_probe: Probe) -> list[MigDevice]:
    """The MIG devices of one MIG-enabled GPU (none when NVML cannot list them)."""
    slots = parent_probe.call("mig_count", "nvmlDeviceGetMaxMigDeviceCount", parent_handle)
    if not slots:
        return []
    out = []
    for slot in range(int(slots)):
        handle = parent_probe.call(
            f"mig_slot:{slot}", "nvmlDeviceGetMigDeviceHandleByIndex", parent_handle, slot)
        if handle is None:
            continue  # NOT_FOUND: an empty slot (transient: a later discovery asks again)
        uuid = _text(parent_probe.call(f"mig_uuid:{slot}", "nvmlDeviceGetUUID", handle))
        if not uuid:
            continue
        probe = Probe(nvml, f"GPU {parent.index} MIG {slot} ({uuid})")
        out.append(MigDevice(read_mig_info(probe, handle, parent, uuid, slots), handle, slot))
    return out


def read_mig_info(probe: Probe, handle, parent: GpuInfo, uuid: str, slots: int) -> GpuInfo:
    memory = probe.call("memory_total", "nvmlDeviceGetMemoryInfo", handle)
    attrs = probe.call("attributes", "nvmlDeviceGetAttributes", handle)
    slices = int(attrs.gpuInstanceSliceCount) if attrs is not None else None
    memory_mb = int(attrs.memorySizeMB) if attrs is not None else None
    return GpuInfo(
        uuid=uuid,
        index=parent.index,
        model=parent.model,
        memory_total_mib=None if memory is None else int(memory.total) // 1048576,
        power_limit_w=None,
        pci_bus_id=parent.pci_bus_id,
        nvlink_bytes_per_s=None,
        mig_enabled=None,
        minor=parent.minor,
        parent_uuid=parent.uuid,
        mig_profile=profile_of(_text(probe.call("name", "nvmlDeviceGetName", handle)), slices,
                               memory_mb),
        mig_gi_id=probe.call("gi_id", "nvmlDeviceGetGpuInstanceId", handle),
        mig_ci_id=probe.call("ci_id", "nvmlDeviceGetComputeInstanceId", handle),
        mig_slices=slices,
        mig_slices_total=int(slots),
    )
