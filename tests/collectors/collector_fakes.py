"""A tiny NVML test double: pynvml's call names, its real exception classes and ctypes
field-value structs, answering from plain Python values. Nothing here loads libnvidia-ml."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pynvml


class FakeGpu:
    def __init__(self, index, uuid=None, **values):
        self.index = index
        self.uuid = uuid or f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd"
        self.name = "NVIDIA H100 80GB HBM3"
        self.values = {
            "util": (97, 41),
            "mem_total": 81559 * 1048576,
            "mem_used_v2": 61234 * 1048576,
            "mem_used_v1": 61734 * 1048576,
            "power_mw": 652_300,
            "limit_mw": 700_000,
            "temp": 64,
            "sm_clock": 1980,
            "reasons": 0,
            "energy_mj": 1_234_567_800,
            "bus_id": b"00000000:18:00.0",
            "pids": [],
            # field id -> (valueType, value) or an nvmlReturn code (int) for failure
            "fields": {197: (3, 0), 198: (3, 0), 138: (3, 0), 139: (3, 0),
                       91: (1, 18), 90: (1, 25_000)},
            "gpm": None,  # dict metric id -> value when GPM is supported
            "pcie_kbps": (1_500_000, 2_500_000),  # nvmlDeviceGetPcieThroughput (tx, rx)
        }  # fmt: skip
        self.values.update(values)
        self.errors = {}  # nvml function name -> exception instance (raised every call)


class FakeNVML:
    NVMLError = pynvml.NVMLError
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_FunctionNotFound = pynvml.NVMLError_FunctionNotFound
    NVMLError_GpuIsLost = pynvml.NVMLError_GpuIsLost
    NVMLError_Timeout = pynvml.NVMLError_Timeout
    NVMLError_Unknown = pynvml.NVMLError_Unknown
    NVMLError_Uninitialized = pynvml.NVMLError_Uninitialized
    NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError
    nvmlMemory_v2 = pynvml.nvmlMemory_v2
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION

    def __init__(self, gpus):
        self.gpus = gpus
        self.calls = Counter()
        self.init_error = None
        self.xid_queue = []  # (gpu index, code) delivered by nvmlEventSetWait

    def _call(self, name, handle=None):
        self.calls[name] += 1
        if handle is not None and name in handle.errors:
            raise handle.errors[name]

    # lifecycle
    def nvmlInit(self):
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self):
        self.calls["nvmlShutdown"] += 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetUUID(self, h):
        return h.uuid

    def nvmlDeviceGetName(self, h):
        self._call("nvmlDeviceGetName", h)
        return h.name

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        self._call("nvmlDeviceGetMemoryInfo" + ("_v2" if version else ""), h)
        used = h.values["mem_used_v2" if version else "mem_used_v1"]
        return SimpleNamespace(total=h.values["mem_total"], used=used)

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        self._call("nvmlDeviceGetEnforcedPowerLimit", h)
        return h.values["limit_mw"]

    def nvmlDeviceGetPciInfo(self, h):
        self._call("nvmlDeviceGetPciInfo", h)
        return SimpleNamespace(busId=h.values["bus_id"])

    def nvmlDeviceGetMigMode(self, h):
        self._call("nvmlDeviceGetMigMode", h)
        return [0, 0]

    def nvmlDeviceGetUtilizationRates(self, h):
        self._call("nvmlDeviceGetUtilizationRates", h)
        gpu, mem = h.values["util"]
        return SimpleNamespace(gpu=gpu, memory=mem)

    def nvmlDeviceGetPowerUsage(self, h):
        self._call("nvmlDeviceGetPowerUsage", h)
        return h.values["power_mw"]

    def nvmlDeviceGetTemperature(self, h, sensor):
        self._call("nvmlDeviceGetTemperature", h)
        return h.values["temp"]

    def nvmlDeviceGetClockInfo(self, h, clock):
        self._call("nvmlDeviceGetClockInfo", h)
        return h.values["sm_clock"]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        return h.values["reasons"]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return h.values["reasons"]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self._call("nvmlDeviceGetTotalEnergyConsumption", h)
        return h.values["energy_mj"]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._call("nvmlDeviceGetComputeRunningProcesses", h)
        return [SimpleNamespace(pid=p, usedGpuMemory=None) for p in h.values["pids"]]

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h):
        self._call("nvmlDeviceGetComputeRunningProcesses_v2", h)
        return [SimpleNamespace(pid=p, usedGpuMemory=None) for p in h.values["pids"]]

    def nvmlDeviceGetFieldValues(self, h, ids):
        self._call("nvmlDeviceGetFieldValues", h)
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for entry, (fid, scope) in zip(out, ids, strict=True):
            entry.fieldId, entry.scopeId = fid, scope
            got = h.values["fields"].get(fid, pynvml.NVML_ERROR_NOT_SUPPORTED)
            if isinstance(got, int):
                entry.nvmlReturn = got
                continue
            value_type, value = got
            entry.nvmlReturn = 0
            entry.valueType = value_type
            attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal"}[value_type]
            setattr(entry.value, attr, value)
        return out

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        self._call("nvmlDeviceGetPcieThroughput", h)
        return h.values["pcie_kbps"][counter]

    # GPM: samples are plain objects holding the metric values at sampling time.
    def nvmlGpmQueryDeviceSupport(self, h):
        self._call("nvmlGpmQueryDeviceSupport", h)
        return SimpleNamespace(isSupportedDevice=int(h.values["gpm"] is not None))

    def nvmlGpmSampleAlloc(self):
        return SimpleNamespace(values=None)

    def nvmlGpmSampleFree(self, sample):
        self.calls["nvmlGpmSampleFree"] += 1

    def nvmlGpmSampleGet(self, h, sample):
        self._call("nvmlGpmSampleGet", h)
        sample.values = dict(h.values["gpm"])
        return sample

    class c_nvmlGpmMetricsGet_t:
        def __init__(self):
            self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0)
                            for _ in range(8)]  # fmt: skip

    def nvmlGpmMetricsGet(self, req):
        self.calls["nvmlGpmMetricsGet"] += 1
        for m in req.metrics[: req.numMetrics]:
            if m.metricId in req.sample2.values:
                m.value = req.sample2.values[m.metricId]
            else:
                m.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return req

    # Xid events
    def nvmlEventSetCreate(self):
        return object()

    def nvmlDeviceRegisterEvents(self, h, event_type, es):
        self._call("nvmlDeviceRegisterEvents", h)

    def nvmlEventSetWait(self, es, timeout_ms):
        if self.xid_queue:
            index, code = self.xid_queue.pop(0)
            return SimpleNamespace(device=self.gpus[index], eventData=code, eventType=8)
        import time

        time.sleep(min(timeout_ms, 20) / 1000)
        raise pynvml.NVMLError_Timeout()

    def nvmlEventSetFree(self, es):
        self.calls["nvmlEventSetFree"] += 1
