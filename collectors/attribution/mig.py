"""Which Slurm GPU index names each MIG instance.

Slurm schedules MIG instances as GPUs of their own (gres.html, "MIG Management"; it needs
``AutoDetect=nvml``). Its NVML plugin builds the node's GPU list by walking NVML's GPUs in
index order and putting, in place of each MIG-enabled GPU, that GPU's MIG devices in slot
order (``nvmlDeviceGetMigDeviceHandleByIndex`` 0, 1, ...), and a GPU without MIG as itself
(SchedMD/slurm ``src/plugins/gpu/nvml/gpu_nvml.c``, ``_get_system_gpu_list_nvml``). A
Slurm GPU index (``SLURM_JOB_GPUS``, the prolog's file names) is a position in that list,
so on a node with MIG instances each one is given that position here. A MIG-enabled GPU
itself is no Slurm GPU: it is attributed to no job (its instances are).

Where Slurm's own order differs from this walk (it is read from the plugin's source, not
seen on a MIG node), a mapping file named by the MIG device's UUID still ties it, and a
process on the instance (NVML lists processes per MIG handle) outranks any file.
"""

from __future__ import annotations

from collectors.gpu.inventory import GpuInfo


def gres_positions(inventory: list[GpuInfo]) -> dict[str, int] | None:
    """{uuid: Slurm GPU index} for the node's Slurm GPUs (MIG instances and GPUs without
    MIG), or None when the node has no MIG instance (the NVML index is used as before).

    ``inventory`` is the GPU source's, each MIG-enabled GPU followed by its instances in
    slot order (``collectors/gpu/source.py``)."""
    if not any(info.parent_uuid for info in inventory):
        return None
    physical = sorted((i for i in inventory if i.parent_uuid is None), key=lambda i: i.index)
    instances: dict[str, list[GpuInfo]] = {}
    for info in inventory:
        if info.parent_uuid:
            instances.setdefault(info.parent_uuid, []).append(info)
    order: list[str] = []
    for gpu in physical:
        if gpu.mig_enabled:
            order.extend(i.uuid for i in instances.get(gpu.uuid, ()))
        else:
            order.append(gpu.uuid)
    return {uuid: position for position, uuid in enumerate(order)}
