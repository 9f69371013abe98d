"""Shared GPUs in the simulator: MIG instances and MPS clients, behind NVML's own calls.

``SimMigNVML(node, profile="1g.10gb")`` shows a ``SimNode``'s GPUs as the MIG instances of
fewer physical GPUs: with 7 instances a GPU (1g.10gb), node GPUs 0-6 are the instances of
physical GPU 0, 7-13 of GPU 1, and so on. Everything the node models per GPU (jobs, their
processes and cgroups, memory, SM activity) is then an instance's, so the collector and the
attribution run unchanged against it. ``SimMpsNVML(node)`` (and ``SimMigNVML(..., mps=True)``)
puts every job process behind an MPS server: the compute process list holds the server and
every client, the MPS list the clients alone, as a real H100 listed them (driver 580.159.04,
2026-11-26, three clients of two jobs: ``docs/collector.md``, "Job attribution"). Under MIG
the same is assumed per instance (not seen: MIG could not be enabled there).

What NVML does on a MIG-enabled GPU, as simulated (sources in ``docs/collector.md``, "MIG
instances"): ``nvmlDeviceGetUtilizationRates`` is NOT_SUPPORTED on the GPU and on its
instances; an instance answers its UUID (``MIG-...``), GPU / compute instance ids, memory,
attributes (slice count, memory size), its processes and, through the parent,
``nvmlGpmMigSampleGet``; the parent's process list is the sum of its instances'. Everything
else asked of an instance handle is NOT_SUPPORTED.

Simplifications, all simulated figures: the parent's power, temperature and clocks are
those the node models for its first instance; the parent has no whole-GPU GPM sample under
MIG; an instance's memory is the model's memory times the profile's memory fraction (NVIDIA
MIG user guide, "Supported MIG Profiles", H100: 1g.10gb 1/8, 2g.20gb 2/8), not NVIDIA's
exact size; GPU instance ids are the slot + 1 and compute instance ids 0, not the placement
ids a real driver gives.
"""

from __future__ import annotations

import pynvml

from collectors.sim.node import SimNode
from collectors.sim.nvml import SimDevice, SimNVML, _address

# profile -> (instances per GPU, GPU-instance slices, memory eighths): NVIDIA MIG user
# guide, "Supported MIG Profiles", the H100 80GB table (instances available, fraction of
# memory); the slice count is the profile's "Ng".
PROFILES = {"1g.10gb": (7, 1, 1), "2g.20gb": (3, 2, 2)}
MAX_MIG_DEVICES = 7  # H100: up to 7 MIG devices ("Supported GPUs", max number of instances)
MPS_SERVER_PID = 999  # nvidia-cuda-mps-server: a daemon, in no job's cgroup


class SimMigHandle:
    """A MIG device handle (opaque to callers)."""

    __slots__ = ("parent", "slot", "backing")

    def __init__(self, parent: SimDevice, slot: int, backing: int) -> None:
        self.parent = parent
        self.slot = slot
        self.backing = backing  # the node GPU that models this instance

    def __repr__(self) -> str:
        return f"<SimMigHandle {self.parent.node.name}:{self.parent.index}/{self.slot}>"


def _process(pid: int, used: int, gi: int = 0xFFFFFFFF, ci: int = 0xFFFFFFFF):
    return pynvml.nvmlFriendlyObject(
        {"pid": pid, "usedGpuMemory": used, "gpuInstanceId": gi, "computeInstanceId": ci})


class SimMpsNVML(SimNVML):
    """Every job process is an MPS client; the compute list shows the MPS server first,
    then the clients (as the real driver did)."""

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        clients = super().nvmlDeviceGetComputeRunningProcesses(handle)
        return [_process(MPS_SERVER_PID, 0), *clients] if clients else []

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle):
        return SimNVML.nvmlDeviceGetComputeRunningProcesses(self, handle)

    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses
    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses
    nvmlDeviceGetMPSComputeRunningProcesses_v3 = nvmlDeviceGetMPSComputeRunningProcesses


class SimMigNVML(SimNVML):
    def __init__(self, node: SimNode, profile: str = "1g.10gb", mps: bool = False) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown MIG profile {profile!r}; known: {', '.join(PROFILES)}")
        super().__init__(node)
        self.profile = profile
        self.mps = mps
        self.per_gpu, self.slices, eighths = PROFILES[profile]
        self.instance_mib = node.model.memory_total_mib * eighths // 8
        count = -(-node.gpu_count // self.per_gpu)
        # A parent's handle stands on its first instance's node GPU (power, clocks...).
        self._parents = [SimDevice(node, p * self.per_gpu) for p in range(count)]
        self._migs = [
            [SimMigHandle(parent, s, p * self.per_gpu + s) for s in range(self.per_gpu)
             if p * self.per_gpu + s < node.gpu_count]
            for p, parent in enumerate(self._parents)
        ]

    # -- handles ----------------------------------------------------------------------

    def _dev(self, handle) -> SimDevice:
        if isinstance(handle, SimMigHandle):
            self._check()
            raise pynvml.NVMLError_NotSupported()
        return super()._dev(handle)

    def _mig(self, handle) -> SimMigHandle:
        self._check()
        if not isinstance(handle, SimMigHandle) or handle.parent.node is not self.node:
            raise pynvml.NVMLError_InvalidArgument()
        return handle

    def _parent_index(self, handle) -> int:
        return self._parents.index(self._dev(handle))

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self._parents)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimDevice:
        self._check()
        if not 0 <= int(index) < len(self._parents):
            raise pynvml.NVMLError_InvalidArgument()
        return self._parents[int(index)]

    def nvmlDeviceGetIndex(self, handle) -> int:
        return self._parent_index(handle)

    nvmlDeviceGetMinorNumber = nvmlDeviceGetIndex

    def nvmlDeviceGetUUID(self, handle) -> str:
        if isinstance(handle, SimMigHandle):
            return "MIG-" + self.node.uuid(self._mig(handle).backing)[4:]
        return self.node.uuid(10_000 + self._parent_index(handle))

    def nvmlDeviceGetName(self, handle) -> str:
        if isinstance(handle, SimMigHandle):
            self._mig(handle)
            return f"{self.node.model.name} MIG {self.profile}"
        return super().nvmlDeviceGetName(handle)

    def nvmlDeviceGetPciInfo(self, handle):
        info = super().nvmlDeviceGetPciInfo(handle)
        bus_id = self.node.pci_bus_id(self._parent_index(handle))
        info.busId = info.busIdLegacy = bus_id.encode()
        info.bus = int(bus_id.split(":")[1], 16)
        return info

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    # -- MIG --------------------------------------------------------------------------

    def nvmlDeviceGetMigMode(self, handle) -> list[int]:
        self._dev(handle)
        return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]

    def nvmlDeviceIsMigDeviceHandle(self, handle) -> int:
        self._check()
        return 1 if isinstance(handle, SimMigHandle) else 0

    def nvmlDeviceGetMaxMigDeviceCount(self, handle) -> int:
        self._dev(handle)
        return MAX_MIG_DEVICES

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index: int) -> SimMigHandle:
        migs = self._migs[self._parent_index(handle)]
        if not 0 <= int(index) < MAX_MIG_DEVICES:
            raise pynvml.NVMLError_InvalidArgument()
        if int(index) >= len(migs):
            raise pynvml.NVMLError_NotFound()
        return migs[int(index)]

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle) -> SimDevice:
        return self._mig(handle).parent

    def nvmlDeviceGetGpuInstanceId(self, handle) -> int:
        return self._mig(handle).slot + 1

    def nvmlDeviceGetComputeInstanceId(self, handle) -> int:
        self._mig(handle)
        return 0

    def nvmlDeviceGetAttributes(self, handle):
        self._mig(handle)
        attrs = pynvml.c_nvmlDeviceAttributes()
        attrs.gpuInstanceSliceCount = self.slices
        attrs.computeInstanceSliceCount = self.slices
        attrs.memorySizeMB = self.instance_mib
        return attrs

    nvmlDeviceGetAttributes_v2 = nvmlDeviceGetAttributes

    # -- readings ---------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, handle):
        if not isinstance(handle, SimMigHandle):
            self._dev(handle)
        raise pynvml.NVMLError_NotSupported()

    def _instance_used_mib(self, mig: SimMigHandle) -> int:
        used = int(self.node.gauges[mig.backing].mem_used_mib) if self.node.gauges else 0
        return min(used, self.instance_mib)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        if not isinstance(handle, SimMigHandle):
            index = self._parent_index(handle)
            mem = super().nvmlDeviceGetMemoryInfo(handle, version)
            used = sum(self._instance_used_mib(m) for m in self._migs[index]) * 1048576
            reserved = int(getattr(mem, "reserved", 0))
            mem.used = used if version else used + self.node.model.memory_reserved_mib * 1048576
            mem.free = mem.total - mem.used - (reserved if version else 0)
            return mem
        mig = self._mig(handle)
        if self.node.now is None:
            raise pynvml.NVMLError_NotReady()
        mib = 1048576
        total, used = self.instance_mib * mib, self._instance_used_mib(mig) * mib
        if not version:
            mem = pynvml.c_nvmlMemory_t()
            mem.total, mem.used, mem.free = total, used, total - used
            return mem
        mem = pynvml.c_nvmlMemory_v2_t()
        mem.version = version
        mem.total, mem.reserved, mem.used, mem.free = total, 0, used, total - used
        return mem

    def _clients(self, mig: SimMigHandle):
        gi = mig.slot + 1
        return [_process(pid, used, gi, 0) for pid, used in self.node.processes(mig.backing)]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        if isinstance(handle, SimMigHandle):
            clients = self._clients(self._mig(handle))
            if self.mps and clients:
                return [_process(MPS_SERVER_PID, 0, handle.slot + 1, 0), *clients]
            return clients
        # The GPU's own list: every instance's processes (NVML's aggregate in MIG mode).
        out = []
        for mig in self._migs[self._parent_index(handle)]:
            out.extend(self.nvmlDeviceGetComputeRunningProcesses(mig))
        return out

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle):
        if not self.mps:
            if not isinstance(handle, SimMigHandle):
                self._dev(handle)
            return []
        if isinstance(handle, SimMigHandle):
            return self._clients(self._mig(handle))
        out = []
        for mig in self._migs[self._parent_index(handle)]:
            out.extend(self._clients(mig))
        return out

    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses
    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses
    nvmlDeviceGetMPSComputeRunningProcesses_v3 = nvmlDeviceGetMPSComputeRunningProcesses

    # -- GPM: per GPU instance, through the parent ----------------------------------

    def nvmlGpmSampleGet(self, handle, pointer):
        self._require_gpm(handle)
        raise pynvml.NVMLError_NotSupported()  # no whole-GPU sample simulated under MIG

    def nvmlGpmMigSampleGet(self, handle, gpu_instance_id: int, pointer):
        index = self._parent_index(handle)
        self._require_gpm(handle)
        migs = [m for m in self._migs[index] if m.slot + 1 == int(gpu_instance_id)]
        sample = self._samples.get(_address(pointer))
        if not migs or sample is None:
            raise pynvml.NVMLError_InvalidArgument()
        k = migs[0].backing
        c = self.node.counters[k]
        sample.taken = (k, self.node.now, c.sm, c.tensor, c.dram,
                        c.pcie_tx, c.pcie_rx, c.nvlink_tx, c.nvlink_rx)  # fmt: skip
        return pointer

