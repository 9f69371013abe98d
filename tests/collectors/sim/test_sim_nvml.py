"""SimNVML answers pynvml's calls with pynvml's units, types and exceptions."""

from __future__ import annotations

import pynvml
import pytest

from collectors.sim.node import SimJob, SimNode
from collectors.sim.nvml import SimNVML
from collectors.sim.scenarios import Scenario

T0 = 1_763_800_000.0


def _node(tmp_path, model="NVIDIA H100 80GB HBM3", scenario=Scenario.HEALTHY):
    node = SimNode(str(tmp_path / "n"), "gpu-x001", model=model, seed=3)
    job = SimJob("77", scenario, "bob", 61002, "vision", "gpu", "vit-l16", T0 - 100, None,
                 ("gpu-x001",), 8, 96, 11)  # fmt: skip
    node.place(job, range(8))
    node.advance(T0)
    nvml = SimNVML(node)
    nvml.nvmlInit()
    return node, nvml


def test_identity_and_units(tmp_path):
    node, nv = _node(tmp_path)
    assert nv.SIMULATED is True
    assert nv.nvmlDeviceGetCount() == 8
    h = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetName(h) == "NVIDIA H100 80GB HBM3"
    assert nv.nvmlDeviceGetUUID(h).startswith("GPU-")
    assert isinstance(nv.nvmlSystemGetDriverVersion(), str)
    info = nv.nvmlDeviceGetPciInfo(h)
    assert isinstance(info, pynvml.nvmlPciInfo_t)  # the real structure, read the real way:
    # the C field is char[] ("%08X:%02X:%02X.0"); pynvml 13's structures decode it to str.
    bus = info.busId
    assert (bus.decode() if isinstance(bus, bytes) else bus) == "00000000:18:00.0"
    mem = nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert isinstance(mem, pynvml.c_nvmlMemory_v2_t)
    assert mem.total == 81559 * 1024 * 1024
    assert mem.used + mem.free + mem.reserved == mem.total
    v1 = nv.nvmlDeviceGetMemoryInfo(h)
    assert v1.used == mem.used + mem.reserved  # v1 counts reserved memory as used
    util = nv.nvmlDeviceGetUtilizationRates(h)
    assert 85 <= util.gpu <= 100 and isinstance(util.gpu, int)
    power_mw = nv.nvmlDeviceGetPowerUsage(h)
    assert 100_000 < power_mw <= 700_000  # mW
    assert nv.nvmlDeviceGetEnforcedPowerLimit(h) == 700_000
    assert 20 < nv.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) < 95
    assert nv.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 1980
    assert nv.nvmlDeviceGetCurrentClocksEventReasons(h) == 0
    assert nv.nvmlDeviceGetCurrentClocksThrottleReasons(h) == 0
    assert nv.nvmlDeviceGetMigMode(h) == [0, 0]
    assert nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 1


def test_energy_is_cumulative_millijoules(tmp_path):
    node, nv = _node(tmp_path)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    e0 = nv.nvmlDeviceGetTotalEnergyConsumption(h)
    node.advance(T0 + 10)
    e1 = nv.nvmlDeviceGetTotalEnergyConsumption(h)
    watts = (e1 - e0) / 1000 / 10
    assert 300 < watts < 700


def test_field_values_counters(tmp_path):
    node, nv = _node(tmp_path, scenario=Scenario.COMM_BOUND_NVLINK)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    ids = [(138, 0xFFFFFFFF), (139, 0xFFFFFFFF), (197, 0), (198, 0), (91, 0), (164, 0), 1234]
    before = nv.nvmlDeviceGetFieldValues(h, ids)
    assert [int(v.fieldId) for v in before] == [138, 139, 197, 198, 91, 164, 1234]
    assert before[0].scopeId == 0xFFFFFFFF
    assert before[0].valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    assert before[4].value.uiVal == 18 and before[5].value.uiVal == 25000
    assert before[6].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    # PCIe byte counters are 32-bit, as a real H200's were (collectors/gpu/gpm.py)
    assert before[2].valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    tx0 = before[0].value.ullVal
    node.advance(T0 + 30)
    after = nv.nvmlDeviceGetFieldValues(h, ids)
    kib_per_s = (after[0].value.ullVal - tx0) / 30
    capacity = 18 * 25000e6
    assert 0.4 * capacity < kib_per_s * 1024 < capacity  # KiB counters
    assert after[2].valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    assert 0 <= after[2].value.uiVal < 2**32


def test_pcie_board_lacks_nvlink_and_gpm(tmp_path):
    node, nv = _node(tmp_path, model="NVIDIA A100-PCIE-40GB")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    vals = nv.nvmlDeviceGetFieldValues(h, [(138, 0xFFFFFFFF), (91, 0), (197, 0)])
    assert vals[0].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert vals[1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert vals[2].nvmlReturn == pynvml.NVML_SUCCESS
    assert nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 0
    sample = nv.nvmlGpmSampleAlloc()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlGpmSampleGet(h, sample)


def test_real_exception_classes(tmp_path):
    node, nv = _node(tmp_path)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetHandleByIndex(99)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetVgpuMetadata(h)  # not simulated: NotSupported, as on a real GPU
    assert nv.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM
    assert nv.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert nv.c_nvmlGpmMetricsGet_t is pynvml.c_nvmlGpmMetricsGet_t
    fresh = SimNVML(node)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fresh.nvmlDeviceGetCount()


def gpm_metrics(node, nv, h, start: float, end: float, metric_ids):
    """GPM's metrics of GPU ``h`` over [start, end] of the node's time, as a collector
    asks for them: two samples, one request."""
    s1, s2 = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    node.advance(start)
    nv.nvmlGpmSampleGet(h, s1)
    node.advance(end)
    nv.nvmlGpmSampleGet(h, s2)
    req = nv.c_nvmlGpmMetricsGet_t()
    req.version = nv.NVML_GPM_METRICS_GET_VERSION
    req.numMetrics = len(metric_ids)
    req.sample1, req.sample2 = s1, s2
    for i, mid in enumerate(metric_ids):
        req.metrics[i].metricId = mid
    nv.nvmlGpmMetricsGet(req)
    nv.nvmlGpmSampleFree(s1)
    nv.nvmlGpmSampleFree(s2)
    return req.metrics[:len(metric_ids)]


def test_gpm_metrics_over_two_samples(tmp_path):
    node, nv = _node(tmp_path, scenario=Scenario.BUSY_NOT_BUSY)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    metrics = gpm_metrics(node, nv, h, T0, T0 + 10, (2, 5, 10))
    assert all(m.nvmlReturn == pynvml.NVML_SUCCESS for m in metrics)
    assert 3 < metrics[0].value < 15  # SM activity of a stream of tiny kernels
    assert nv.nvmlDeviceGetUtilizationRates(h).gpu > 90


def test_pcie_throughput_is_the_traffic_gpm_and_the_counters_integrate(tmp_path):
    """The 20 ms PCIe reading (KB/s) of a data-loading job agrees with GPM's average over
    the same 20 ms: one traffic model behind NVML's three PCIe readings."""
    node, nv = _node(tmp_path, scenario=Scenario.INPUT_BOUND)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    metrics = gpm_metrics(node, nv, h, T0 + 59.98, T0 + 60, (20, 21))
    for i, counter in enumerate((pynvml.NVML_PCIE_UTIL_TX_BYTES, pynvml.NVML_PCIE_UTIL_RX_BYTES)):
        gpm = metrics[i].value * 1048576
        kb = nv.nvmlDeviceGetPcieThroughput(h, counter)
        assert gpm > 1e6 and kb * 1000 == pytest.approx(gpm, rel=1e-3, abs=1000)


def test_processes_exist_in_generated_procfs(tmp_path):
    node, nv = _node(tmp_path)
    procs = nv.nvmlDeviceGetComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(3))
    assert len(procs) == 1
    assert (tmp_path / "n" / "proc" / str(procs[0].pid) / "cgroup").exists()
    assert procs[0].usedGpuMemory > 1 << 30


def test_xid_events(tmp_path):
    node, nv = _node(tmp_path, scenario=Scenario.XID)
    es = nv.nvmlEventSetCreate()
    for i in range(8):
        nv.nvmlDeviceRegisterEvents(nv.nvmlDeviceGetHandleByIndex(i),
                                    pynvml.nvmlEventTypeXidCriticalError, es)  # fmt: skip
    with pytest.raises(pynvml.NVMLError_Timeout):
        nv.nvmlEventSetWait(es, 0)
    node.advance(T0 + 600)
    codes = []
    while True:
        try:
            data = nv.nvmlEventSetWait(es, 0)
        except pynvml.NVMLError_Timeout:
            break
        codes.append(data.eventData)
        assert data.device in [nv.nvmlDeviceGetHandleByIndex(i) for i in range(8)]
    assert codes and all(c in (92, 48, 94, 63, 31) for c in codes)
    assert len(codes) == len(node.events)
    nv.nvmlEventSetFree(es)
