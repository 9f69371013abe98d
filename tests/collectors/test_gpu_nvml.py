import time

import pynvml

from collectors.gpu.inventory import normalise_bus_id
from collectors.gpu.source import GpuSource
from tests.collectors.collector_fakes import FakeGpu, FakeNVML


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def make(gpus=1, **values):
    nvml = FakeNVML([FakeGpu(i, **values) for i in range(gpus)])
    clock = Clock()
    return nvml, clock, GpuSource(nvml, clock)


def test_inventory():
    nvml, clock, src = make()
    [info] = src.inventory
    assert info.uuid.startswith("GPU-")
    assert info.model == "NVIDIA H100 80GB HBM3"
    assert info.memory_total_mib == 81559
    assert info.power_limit_w == 700.0
    assert info.pci_bus_id == "00000000:18:00.0"
    assert info.nvlink_bytes_per_s == 18 * 25_000 * 1_000_000
    assert info.mig_enabled is False
    src.close()


def test_bus_id_normalised():
    assert normalise_bus_id("0000:2a:00.0") == "00000000:2A:00.0"
    assert normalise_bus_id(b"00000000:2A:00.0\x00") == "00000000:2A:00.0"


def test_no_nvlink_means_null_capacity():
    nvml, clock, src = make(fields={197: (3, 0), 198: (3, 0)})
    assert src.inventory[0].nvlink_bytes_per_s is None
    src.close()


def test_values_and_units():
    nvml, clock, src = make()
    [r] = src.sample(clock())
    v = r.values
    assert v["util_pct"] == 97.0 and v["mem_util_pct"] == 41.0
    assert v["mem_used_mib"] == 61234  # memory info v2 ("used" excludes reserved)
    assert v["power_w"] == 652.3
    assert v["energy_j"] == 1_234_567.8
    assert (v["temp_c"], v["sm_clock_mhz"], v["throttle_reasons"]) == (64, 1980, 0)
    assert "pcie_tx_bytes_per_s" not in v  # a rate needs two readings
    src.close()


def test_counter_rates_from_field_values():
    nvml, clock, src = make()
    gpu = nvml.gpus[0]
    src.sample(clock())
    gpu.values["fields"].update({197: (3, 12_000_000_000), 198: (3, 34_000_000_000),
                                 138: (3, 781_250_000), 139: (3, 781_250_000)})  # fmt: skip
    clock.t += 10
    [r] = src.sample(clock())
    assert r.values["pcie_tx_bytes_per_s"] == 1.2e9
    assert r.values["pcie_rx_bytes_per_s"] == 3.4e9
    assert r.values["nvlink_tx_bytes_per_s"] == 781_250_000 * 1024 / 10  # KiB counters
    # a wrapped / reset counter drops that interval instead of reporting a spike
    gpu.values["fields"][197] = (3, 5)
    clock.t += 10
    [r] = src.sample(clock())
    assert "pcie_tx_bytes_per_s" not in r.values
    assert r.values["pcie_rx_bytes_per_s"] == 0.0
    src.close()


def test_not_supported_is_cached_and_null():
    nvml, clock, src = make()
    gpu = nvml.gpus[0]
    gpu.errors["nvmlDeviceGetPowerUsage"] = pynvml.NVMLError_NotSupported()
    gpu.values["fields"][138] = pynvml.NVML_ERROR_NOT_SUPPORTED
    for _ in range(3):
        [r] = src.sample(clock())
        clock.t += 1
    assert "power_w" not in r.values and "nvlink_tx_bytes_per_s" not in r.values
    assert r.values["util_pct"] == 97.0  # every other field keeps flowing
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 1
    src.close()


def test_function_not_found_and_library_mismatch_fall_back():
    nvml, clock, src = make(pids=[4242])
    gpu = nvml.gpus[0]
    gpu.errors["nvmlDeviceGetMemoryInfo_v2"] = pynvml.NVMLError_FunctionNotFound()
    gpu.errors["nvmlDeviceGetCurrentClocksEventReasons"] = pynvml.NVMLError_FunctionNotFound()
    gpu.errors["nvmlDeviceGetComputeRunningProcesses"] = pynvml.NVMLLibraryMismatchError("old")
    gpu.values["reasons"] = 0x4
    for _ in range(2):
        [r] = src.sample(clock())
    assert r.values["mem_used_mib"] == 61734  # v1
    assert r.values["throttle_reasons"] == 0x4  # older name
    assert r.pids == [4242]  # _v2
    assert nvml.calls["nvmlDeviceGetMemoryInfo_v2"] == 1
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == 1
    src.close()


def test_transient_error_is_null_for_one_tick_only():
    nvml, clock, src = make()
    gpu = nvml.gpus[0]
    gpu.errors["nvmlDeviceGetTemperature"] = pynvml.NVMLError_Timeout()
    [r] = src.sample(clock())
    assert "temp_c" not in r.values
    del gpu.errors["nvmlDeviceGetTemperature"]
    [r] = src.sample(clock())
    assert r.values["temp_c"] == 64
    src.close()


def test_gpu_lost_is_an_event_and_nulls():
    nvml, clock, src = make(gpus=2)
    nvml.gpus[1].errors["nvmlDeviceGetUtilizationRates"] = pynvml.NVMLError_GpuIsLost()
    for _ in range(3):
        r0, r1 = src.sample(clock())
    assert r0.values["util_pct"] == 97.0
    assert r1.values == {}
    events = src.drain_events()
    assert [(e["gpu"], e["kind"]) for e in events] == [(nvml.gpus[1].uuid, "gpu_lost")]
    src.close()


def test_driver_gone_reinitialises_with_backoff():
    nvml, clock, src = make()
    nvml.gpus[0].errors["nvmlDeviceGetUtilizationRates"] = pynvml.NVMLError_Uninitialized()
    assert src.sample(clock()) == []
    nvml.init_error = pynvml.NVMLError_DriverNotLoaded()
    assert src.sample(clock()) == []  # not yet: backing off
    assert nvml.calls["nvmlInit"] == 1
    clock.t += 1.0
    assert src.sample(clock()) == []  # retried, still failing; next wait is longer
    assert nvml.calls["nvmlInit"] == 2
    clock.t += 1.0
    src.sample(clock())
    assert nvml.calls["nvmlInit"] == 2
    nvml.init_error = None
    del nvml.gpus[0].errors["nvmlDeviceGetUtilizationRates"]
    clock.t += 1.5
    [r] = src.sample(clock())
    assert nvml.calls["nvmlInit"] == 3 and r.values["util_pct"] == 97.0
    src.close()


def test_gpm_over_previous_and_new_sample():
    nvml, clock, src = make(gpm={2: 78.5, 5: 40.2, 10: 55.0})
    [r] = src.sample(clock())
    assert "sm_active_pct" not in r.values
    clock.t += 10
    [r] = src.sample(clock())
    assert r.values["sm_active_pct"] == 78.5
    assert r.values["tensor_active_pct"] == 40.2
    assert r.values["dram_active_pct"] == 55.0
    src.close()


# PCIe byte counters as a real H200 gave them (driver 580.159.04, 2026-11-26, read every
# 0.54 s during a 27.5 GB/s host<->device copy): field 197 (TX) came back as valueType 1, a
# 32-bit uiVal, and wrapped within every reading, while GPM's PCIe metrics 20/21 read
# 30,252.0 / 28,189.3 MiB/s and nvmlDeviceGetPcieThroughput 7,520,666 / 3,445,979 KB/s.
H200_PCIE_TX_READINGS = (4_088_078_732, 450_714_868, 1_029_536_720)
H200_GPM_PCIE = {20: 30_252.0, 21: 28_189.3}


def test_pcie_comes_from_gpm_where_gpm_has_it():
    nvml, clock, src = make(gpm={2: 71.2, 5: 69.0, 10: 14.7, **H200_GPM_PCIE},
                            fields={197: (1, H200_PCIE_TX_READINGS[0]), 198: (1, 0)})
    gpu = nvml.gpus[0]
    src.sample(clock())
    for raw in H200_PCIE_TX_READINGS[1:]:
        gpu.values["fields"][197] = (1, raw)
        clock.t += 0.54
        [r] = src.sample(clock())
        assert r.values["pcie_tx_bytes_per_s"] == 30_252.0 * 1048576  # GPM's MiB/s, in B/s
        assert r.values["pcie_rx_bytes_per_s"] == 28_189.3 * 1048576
    assert nvml.calls["nvmlDeviceGetPcieThroughput"] == 0
    src.close()


def test_gpm_without_pcie_metrics_falls_back_to_the_64_bit_counters():
    nvml, clock, src = make(gpm={2: 50.0, 5: 10.0, 10: 20.0})  # no metric 20/21
    gpu = nvml.gpus[0]
    src.sample(clock())
    clock.t += 10
    src.sample(clock())  # GPM's first metrics: PCIe not supported, so fields from now
    gpu.values["fields"].update({197: (3, 12_000_000_000), 198: (3, 34_000_000_000)})
    clock.t += 10
    [r] = src.sample(clock())
    assert r.values["pcie_tx_bytes_per_s"] == 1.2e9
    assert r.values["sm_active_pct"] == 50.0
    src.close()


def test_gpm_given_up_hands_pcie_back_to_nvmls_readings():
    nvml, clock, src = make(gpm={2: 50.0, 20: 1000.0, 21: 2000.0},
                            fields={197: (1, 5), 198: (1, 7)}, pcie_kbps=(11, 22))
    gpu = nvml.gpus[0]
    src.sample(clock())
    gpu.errors["nvmlGpmSampleGet"] = pynvml.NVMLError_NotSupported()  # e.g. after a reset
    clock.t += 10
    [r] = src.sample(clock())
    assert (r.values["pcie_tx_bytes_per_s"], r.values["pcie_rx_bytes_per_s"]) == (11e3, 22e3)
    src.close()


def test_32_bit_pcie_counters_are_never_turned_into_rates():
    """Without GPM, a wrapping 32-bit counter gives no rate: the tick takes NVML's 20 ms
    throughput reading (KB/s) instead of a difference that wrapped an unknown number of
    times (the readings above would give -6.7 GB/s, then 1.07 GB/s, for 27.5 GB/s)."""
    nvml, clock, src = make(fields={197: (1, H200_PCIE_TX_READINGS[0]), 198: (1, 7)},
                            pcie_kbps=(7_520_666, 3_445_979))
    gpu = nvml.gpus[0]
    [r] = src.sample(clock())
    assert r.values["pcie_tx_bytes_per_s"] == 7_520_666_000.0
    assert r.values["pcie_rx_bytes_per_s"] == 3_445_979_000.0
    for raw in H200_PCIE_TX_READINGS[1:]:
        gpu.values["fields"][197] = (1, raw)
        clock.t += 0.54
        [r] = src.sample(clock())
        assert r.values["pcie_tx_bytes_per_s"] == 7_520_666_000.0
    src.close()


def test_a_32_bit_nvlink_counter_gives_null_rather_than_a_wrapped_rate():
    nvml, clock, src = make(fields={197: (3, 0), 198: (3, 0), 138: (1, 4_000_000_000),
                                    139: (3, 0), 91: (1, 18), 90: (1, 25_000)})
    gpu = nvml.gpus[0]
    src.sample(clock())
    gpu.values["fields"].update({138: (1, 5), 139: (3, 781_250_000)})
    clock.t += 10
    [r] = src.sample(clock())
    assert "nvlink_tx_bytes_per_s" not in r.values  # wrapped: no rate at all
    assert r.values["nvlink_rx_bytes_per_s"] == 781_250_000 * 1024 / 10
    src.close()


def test_gpm_unsupported_is_null():
    nvml, clock, src = make()
    src.sample(clock())
    [r] = src.sample(clock())
    assert "sm_active_pct" not in r.values
    assert nvml.calls["nvmlGpmSampleGet"] == 0
    src.close()


def test_xid_events_from_the_event_thread():
    nvml, clock, src = make(gpus=2)
    nvml.xid_queue.append((1, 79))
    deadline = time.monotonic() + 5
    events = []
    while not events and time.monotonic() < deadline:
        events = src.drain_events()
        time.sleep(0.02)
    src.close()
    assert events == [{"ts": clock.t, "gpu": nvml.gpus[1].uuid, "kind": "xid", "code": 79,
                       "message": "GPU has fallen off the bus"}]  # fmt: skip
    assert nvml.calls["nvmlEventSetFree"] == 1
