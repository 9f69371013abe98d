"""`SimNVML`: pynvml's calls, constants and exceptions, answered by a simulated node.

Code written against ``pynvml`` runs unchanged against ``SimNVML(node)``: the same names,
the same units (mW, mJ, MiB/bytes, KiB for NVLink), the same return types (the real ctypes
structures, bytes ``busId``) and the real exception classes (``pynvml.NVMLError_*``).
Every constant, structure and exception is pynvml's own, looked up on demand. A call this
class does not simulate raises ``NVMLError_NotSupported``, as a GPU lacking it would;
readings a simulated model lacks (GPM before Hopper, NVLink on a PCIe board) do the same.
``SIMULATED`` is True so the collector can label its batches.
"""

from __future__ import annotations

import ctypes
import threading
import time

import pynvml

from collectors.sim.hardware import DRIVER_VERSION
from collectors.sim.node import SimNode, XidEvent

_ALL_LINKS = 0xFFFFFFFF
PCIE_WINDOW_S = 0.02  # nvmlDeviceGetPcieThroughput's sample window (docs/collector.md)

# Helpers of pynvml that need no library and may be used as they are.
_PASSTHROUGH = {
    "nvmlStructToFriendlyObject",
    "nvmlFriendlyObject",
    "nvmlExceptionClass",
    "nvmlErrorString",
}


class SimDevice:
    """A device handle (opaque to callers, like pynvml's)."""

    __slots__ = ("node", "index")

    def __init__(self, node: SimNode, index: int) -> None:
        self.node = node
        self.index = index

    def __repr__(self) -> str:
        return f"<SimDevice {self.node.name}:{self.index}>"


class _EventSet:
    def __init__(self) -> None:
        self.registered: dict[int, tuple[SimDevice, int]] = {}
        self.queue: list[tuple[SimDevice, XidEvent]] = []
        self.cond = threading.Condition()
        self.waits = 0  # calls to nvmlEventSetWait so far
        self.waiting = False  # a caller is blocked in nvmlEventSetWait now


class _GpmSample:
    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(16)
        self.pointer = ctypes.cast(self.buffer, pynvml.c_nvmlGpmSample_t)
        self.taken: tuple | None = None  # (device index, t, sm, tensor, dram, pcie tx, rx, nvl)


def _address(pointer) -> int | None:
    return ctypes.cast(pointer, ctypes.c_void_p).value


class SimNVML:
    SIMULATED = True

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self._refs = 0
        self._handles = [SimDevice(node, i) for i in range(node.gpu_count)]
        self._event_sets: list[_EventSet] = []
        self._samples: dict[int, _GpmSample] = {}
        self._lock = threading.Lock()
        node.add_listener(self._on_event)

    # pynvml's constants, structures and exception classes; unsimulated calls.
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            value = getattr(pynvml, name)
        except AttributeError:
            raise AttributeError(f"pynvml has no attribute {name!r}") from None
        if name in _PASSTHROUGH or not name.startswith("nvml") or not callable(value):
            return value
        if isinstance(value, type):
            return value

        def not_supported(*args, **kwargs):
            raise pynvml.NVMLError_NotSupported()

        not_supported.__name__ = name
        return not_supported

    # -- lifecycle --------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._refs += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self._refs += 1

    def nvmlShutdown(self) -> None:
        self._check()
        self._refs -= 1

    def _check(self) -> None:
        if self._refs <= 0:
            raise pynvml.NVMLError_Uninitialized()

    def _dev(self, handle) -> SimDevice:
        self._check()
        if not isinstance(handle, SimDevice) or handle.node is not self.node:
            raise pynvml.NVMLError_InvalidArgument()
        if self.node.now is None:
            raise pynvml.NVMLError_NotReady()
        return handle

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check()
        return DRIVER_VERSION

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._check()
        return "12." + DRIVER_VERSION

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check()
        return 12080

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return self.node.gpu_count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimDevice:
        self._check()
        if not 0 <= int(index) < self.node.gpu_count:
            raise pynvml.NVMLError_InvalidArgument()
        return self._handles[int(index)]

    def nvmlDeviceGetHandleByUUID(self, uuid) -> SimDevice:
        self._check()
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for i in range(self.node.gpu_count):
            if self.node.uuid(i) == uuid:
                return self._handles[i]
        raise pynvml.NVMLError_NotFound()

    def nvmlDeviceGetHandleByPciBusId(self, bus_id) -> SimDevice:
        self._check()
        bus_id = (bus_id.decode() if isinstance(bus_id, bytes) else bus_id).upper()
        for i in range(self.node.gpu_count):
            if self.node.pci_bus_id(i).upper().endswith(bus_id[-7:]):
                return self._handles[i]
        raise pynvml.NVMLError_NotFound()

    # -- identity ---------------------------------------------------------------------

    def nvmlDeviceGetIndex(self, handle) -> int:
        return self._dev(handle).index

    def nvmlDeviceGetMinorNumber(self, handle) -> int:
        return self._dev(handle).index

    def nvmlDeviceGetUUID(self, handle) -> str:
        return self.node.uuid(self._dev(handle).index)

    def nvmlDeviceGetName(self, handle) -> str:
        self._dev(handle)
        return self.node.model.name

    def nvmlDeviceGetSerial(self, handle) -> str:
        return self.node.serial(self._dev(handle).index)

    def nvmlDeviceGetCudaComputeCapability(self, handle) -> tuple[int, int]:
        self._dev(handle)
        return self.node.model.cuda_capability

    def nvmlDeviceGetPciInfo(self, handle):
        dev = self._dev(handle)
        bus_id = self.node.pci_bus_id(dev.index)
        info = pynvml.nvmlPciInfo_t()
        info.busIdLegacy = bus_id.encode()
        info.busId = bus_id.encode()
        info.domain = 0
        info.bus = int(bus_id.split(":")[1], 16)
        info.device = 0
        info.pciDeviceId = self.node.model.pcie_device_id
        info.pciSubSystemId = 0x16C110DE
        return info

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    def nvmlDeviceGetMigMode(self, handle) -> list[int]:
        self._dev(handle)
        return [pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_DISABLE]

    def nvmlDeviceGetPersistenceMode(self, handle) -> int:
        self._dev(handle)
        return pynvml.NVML_FEATURE_ENABLED

    # -- gauges -----------------------------------------------------------------------

    def _gauges(self, handle):
        dev = self._dev(handle)
        return self.node.gauges[dev.index]

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        g = self._gauges(handle)
        m = self.node.model
        mib = 1024 * 1024
        total = m.memory_total_mib * mib
        reserved = m.memory_reserved_mib * mib
        used = int(g.mem_used_mib) * mib
        if not version:
            mem = pynvml.c_nvmlMemory_t()
            mem.total, mem.used = total, used + reserved
            mem.free = total - mem.used
            return mem
        mem = pynvml.c_nvmlMemory_v2_t()
        mem.version = version
        mem.total, mem.reserved, mem.used = total, reserved, used
        mem.free = total - reserved - used
        return mem

    def nvmlDeviceGetUtilizationRates(self, handle):
        g = self._gauges(handle)
        util = pynvml.c_nvmlUtilization_t()
        util.gpu = int(g.util_pct)
        util.memory = int(g.mem_util_pct)
        return util

    def nvmlDeviceGetPowerUsage(self, handle) -> int:
        return int(round(self._gauges(handle).power_w * 1000))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle) -> int:
        self._dev(handle)
        return int(self.node.model.power_limit_w * 1000)

    nvmlDeviceGetPowerManagementLimit = nvmlDeviceGetEnforcedPowerLimit
    nvmlDeviceGetPowerManagementDefaultLimit = nvmlDeviceGetEnforcedPowerLimit

    def nvmlDeviceGetTotalEnergyConsumption(self, handle) -> int:
        dev = self._dev(handle)
        return int(self.node.counters[dev.index].energy_j * 1000)

    def nvmlDeviceGetTemperature(self, handle, sensor=pynvml.NVML_TEMPERATURE_GPU) -> int:
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            self._dev(handle)
            raise pynvml.NVMLError_NotSupported()
        return int(self._gauges(handle).temp_c)

    def nvmlDeviceGetTemperatureV(self, handle, sensor, version=None) -> int:
        return self.nvmlDeviceGetTemperature(handle, sensor)

    def nvmlDeviceGetClockInfo(self, handle, clock_type) -> int:
        g = self._gauges(handle)
        m = self.node.model
        if clock_type in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_GRAPHICS):
            return int(g.sm_clock_mhz)
        if clock_type == pynvml.NVML_CLOCK_MEM:
            return m.mem_clock_mhz
        if clock_type == pynvml.NVML_CLOCK_VIDEO:
            return int(g.sm_clock_mhz * 0.88)
        raise pynvml.NVMLError_InvalidArgument()

    def nvmlDeviceGetMaxClockInfo(self, handle, clock_type) -> int:
        self._dev(handle)
        m = self.node.model
        if clock_type in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_GRAPHICS):
            return m.max_sm_clock_mhz
        if clock_type == pynvml.NVML_CLOCK_MEM:
            return m.mem_clock_mhz
        if clock_type == pynvml.NVML_CLOCK_VIDEO:
            return int(m.max_sm_clock_mhz * 0.88)
        raise pynvml.NVMLError_InvalidArgument()

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle) -> int:
        return int(self._gauges(handle).throttle)

    nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons

    def nvmlDeviceGetPcieThroughput(self, handle, counter) -> int:
        """KB/s over the last 20 ms, as NVML's own: the same traffic the counters and GPM
        integrate, at that instant."""
        dev = self._dev(handle)
        tx = counter == pynvml.NVML_PCIE_UTIL_TX_BYTES
        return int(self.node.pcie_rate(dev.index, tx, PCIE_WINDOW_S) / 1000)

    # -- counters through field values -----------------------------------------------

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        dev = self._dev(handle)
        c = self.node.counters[dev.index]
        m = self.node.model
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        now_us = int(self.node.now * 1e6)
        nvlink = m.nvlink_links > 0
        for i, fid in enumerate(field_ids):
            try:
                field_id, scope = fid
            except TypeError:
                field_id, scope = fid, 0
            v = values[i]
            v.fieldId, v.scopeId, v.timestamp, v.latencyUsec = field_id, scope, now_us, 0
            v.nvmlReturn = pynvml.NVML_SUCCESS
            kind, value = None, None
            # 32 bits wide and wrapping, as a real H200 gave them (collectors/gpu/gpm.py).
            if field_id == pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES:
                kind, value = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, int(c.pcie_tx) % 2**32
            elif field_id == pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES:
                kind, value = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, int(c.pcie_rx) % 2**32
            elif not nvlink:
                pass
            elif field_id in (
                pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
            ):
                total = (
                    c.nvlink_tx
                    if field_id == pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
                    else c.nvlink_rx
                )
                if scope == _ALL_LINKS:
                    value = int(total) // 1024
                elif 0 <= scope < m.nvlink_links:
                    value = int(total / m.nvlink_links) // 1024
                if value is not None:
                    kind = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            elif field_id == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
                kind, value = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, m.nvlink_links
            elif field_id in (
                pynvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON,
                pynvml.NVML_FI_DEV_NVLINK_GET_SPEED,
            ):
                kind, value = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, m.nvlink_link_mbps
            if kind is None:
                v.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            v.valueType = kind
            if kind == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT:
                v.value.uiVal = value
            else:
                v.value.ullVal = value & 0xFFFFFFFFFFFFFFFF
        return values

    # -- processes --------------------------------------------------------------------

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        dev = self._dev(handle)
        out = []
        for pid, used in self.node.processes(dev.index):
            out.append(
                pynvml.nvmlFriendlyObject(
                    {
                        "pid": pid,
                        "usedGpuMemory": used,
                        "gpuInstanceId": 0xFFFFFFFF,
                        "computeInstanceId": 0xFFFFFFFF,
                    }
                )
            )
        return out

    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses
    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle):
        """No MPS server on a plain simulated GPU: NVML's empty list (``sharing.py`` has
        MPS clients)."""
        self._dev(handle)
        return []

    nvmlDeviceGetMPSComputeRunningProcesses_v3 = nvmlDeviceGetMPSComputeRunningProcesses

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        self._dev(handle)
        return []

    # -- health -----------------------------------------------------------------------

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type) -> int:
        dev = self._dev(handle)
        c = self.node.counters[dev.index]
        if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            volatile, lifetime = c.ecc_uncorrected, c.ecc_uncorrected_lifetime
        elif error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED:
            volatile, lifetime = c.ecc_corrected, c.ecc_corrected_lifetime
        else:
            raise pynvml.NVMLError_InvalidArgument()
        if counter_type == pynvml.NVML_VOLATILE_ECC:
            return volatile
        if counter_type == pynvml.NVML_AGGREGATE_ECC:
            return lifetime + volatile
        raise pynvml.NVMLError_InvalidArgument()

    def nvmlDeviceGetEccMode(self, handle) -> list[int]:
        self._dev(handle)
        return [pynvml.NVML_FEATURE_ENABLED, pynvml.NVML_FEATURE_ENABLED]

    def nvmlDeviceGetRemappedRows(self, handle) -> tuple[int, int, int, int]:
        """(corrRows, uncRows, isPending, failureOccurred), as pynvml returns them."""
        dev = self._dev(handle)
        c = self.node.counters[dev.index]
        return (c.remapped_correctable, c.remapped_uncorrectable, int(c.remap_pending),
                int(c.remap_failure))

    # Ampere and later remap rows instead of retiring pages: both simulated models say
    # NotSupported here, as nvidia-smi's "Retired Pages: N/A" on an A100 or H100.
    def nvmlDeviceGetRetiredPages(self, handle, cause) -> list[int]:
        self._dev(handle)
        raise pynvml.NVMLError_NotSupported()

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle) -> int:
        self._dev(handle)
        raise pynvml.NVMLError_NotSupported()

    def nvmlDeviceGetNvLinkState(self, handle, link) -> int:
        dev = self._dev(handle)
        links = self.node.model.nvlink_links
        if not links:
            raise pynvml.NVMLError_NotSupported()
        if not 0 <= int(link) < links:
            raise pynvml.NVMLError_InvalidArgument()
        return pynvml.NVML_FEATURE_ENABLED if dev else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkErrorCounter(self, handle, link, counter) -> int:
        """A link's share of the GPU's errors of `counter` (NVML_NVLINK_ERROR_DL_*)."""
        dev = self._dev(handle)
        links = self.node.model.nvlink_links
        if not links:
            raise pynvml.NVMLError_NotSupported()
        if not 0 <= int(link) < links or not 0 <= int(counter) <= 3:
            raise pynvml.NVMLError_InvalidArgument()
        total = self.node.counters[dev.index].nvlink_errors[int(counter)]
        return total // links + (1 if int(link) < total % links else 0)

    def nvmlDeviceGetPcieReplayCounter(self, handle) -> int:
        return self.node.counters[self._dev(handle).index].pcie_replays

    # -- events -----------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> _EventSet:
        self._check()
        es = _EventSet()
        with self._lock:
            self._event_sets.append(es)
        return es

    def nvmlDeviceGetSupportedEventTypes(self, handle) -> int:
        self._dev(handle)
        return pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError

    def nvmlDeviceRegisterEvents(self, handle, event_types: int, event_set: _EventSet) -> None:
        self._check()
        dev = handle
        if not isinstance(dev, SimDevice) or not isinstance(event_set, _EventSet):
            raise pynvml.NVMLError_InvalidArgument()
        with event_set.cond:
            event_set.registered[dev.index] = (dev, int(event_types))

    def nvmlEventSetWait(self, event_set: _EventSet, timeout_ms: int):
        """The next pending event; blocks up to `timeout_ms` (wall clock) for one to come."""
        self._check()
        deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
        with event_set.cond:
            event_set.waits += 1
            event_set.waiting = True
            try:
                while not event_set.queue:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise pynvml.NVMLError_Timeout()
                    event_set.cond.wait(left)
                dev, event = event_set.queue.pop(0)
            finally:
                event_set.waiting = False
        return pynvml.nvmlFriendlyObject(
            {
                "device": dev,
                "eventType": pynvml.nvmlEventTypeXidCriticalError,
                "eventData": event.code,
                "gpuInstanceId": 0xFFFFFFFF,
                "computeInstanceId": 0xFFFFFFFF,
                "timestamp": event.ts,
            }
        )

    nvmlEventSetWait_v2 = nvmlEventSetWait

    def nvmlEventSetFree(self, event_set: _EventSet) -> None:
        with self._lock:
            if event_set in self._event_sets:
                self._event_sets.remove(event_set)

    def settle_events(self, timeout: float = 2.0) -> bool:
        """Wait until every queued event was taken and its waiter came back for more.

        Makes runs reproducible: an event the model passed is in the next sample, not
        whenever a thread gets to it. False if a waiter did not come back in time.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            sets = list(self._event_sets)
        for es in sets:
            with es.cond:
                while es.queue or (es.waits and not es.waiting):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    es.cond.wait(min(left, 0.005))
        return True

    def _on_event(self, event: XidEvent) -> None:
        with self._lock:
            sets = list(self._event_sets)
        for es in sets:
            with es.cond:
                reg = es.registered.get(event.gpu)
                if reg and reg[1] & pynvml.nvmlEventTypeXidCriticalError:
                    es.queue.append((reg[0], event))
                    es.cond.notify_all()

    # -- GPM --------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, handle):
        self._dev(handle)
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = 1 if self.node.model.gpm else 0
        return support

    def _require_gpm(self, handle) -> SimDevice:
        dev = self._dev(handle)
        if not self.node.model.gpm:
            raise pynvml.NVMLError_NotSupported()
        return dev

    def nvmlGpmSampleAlloc(self):
        self._check()
        sample = _GpmSample()
        self._samples[_address(sample.pointer)] = sample
        return sample.pointer

    def nvmlGpmSampleFree(self, pointer) -> None:
        self._samples.pop(_address(pointer), None)

    def nvmlGpmSampleGet(self, handle, pointer):
        dev = self._require_gpm(handle)
        sample = self._samples.get(_address(pointer))
        if sample is None:
            raise pynvml.NVMLError_InvalidArgument()
        c = self.node.counters[dev.index]
        sample.taken = (
            dev.index, self.node.now, c.sm, c.tensor, c.dram,
            c.pcie_tx, c.pcie_rx, c.nvlink_tx, c.nvlink_rx,
        )  # fmt: skip
        return pointer

    def nvmlGpmMetricsGet(self, request):
        self._check()
        s1 = self._samples.get(_address(request.sample1))
        s2 = self._samples.get(_address(request.sample2))
        if s1 is None or s2 is None or s1.taken is None or s2.taken is None:
            raise pynvml.NVMLError_InvalidArgument()
        a, b = s1.taken, s2.taken
        if a[0] != b[0]:
            raise pynvml.NVMLError_InvalidArgument()
        dt = b[1] - a[1]
        mib = 1024.0 * 1024.0
        for i in range(min(int(request.numMetrics), len(request.metrics))):
            metric = request.metrics[i]
            if dt <= 0:
                metric.nvmlReturn = pynvml.NVML_ERROR_INVALID_ARGUMENT
                continue
            mid = metric.metricId
            value = {
                pynvml.NVML_GPM_METRIC_SM_UTIL: (b[2] - a[2]) / dt,
                pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: (b[3] - a[3]) / dt,
                pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: (b[4] - a[4]) / dt,
                pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: (b[5] - a[5]) / dt / mib,
                pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC: (b[6] - a[6]) / dt / mib,
                pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: (b[7] - a[7]) / dt / mib,
                pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: (b[8] - a[8]) / dt / mib,
            }.get(mid)
            if value is None:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            metric.nvmlReturn = pynvml.NVML_SUCCESS
            metric.value = max(0.0, min(value, 100.0)) if mid <= 13 else max(0.0, value)
        return request
