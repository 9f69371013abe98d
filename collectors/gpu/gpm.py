"""GPU Performance Monitoring (Hopper and newer): SM, tensor and DRAM activity, PCIe traffic.

Each tick fills a fresh GPM sample and computes the metrics over (previous, new). PCIe
traffic comes from here where GPM has it, not from NVML's cumulative PCIe fields 197/198:
on a real H200 (driver 580.159.04) those are 32-bit (``uiVal``) and wrapped about seven
times a second under a 27.5 GB/s copy, so a rate over a 10 s tick is undefined, while
GPM's metrics 20/21 read 30,000 / 28,500 MiB/s over the same windows
(``docs/collector.md``, "PCIe traffic").
"""

from __future__ import annotations

import logging

from collectors.gpu.errors import NVML_SUCCESS, PERMANENT, classify_code

log = logging.getLogger(__name__)

SM_ACTIVE = 2  # NVML_GPM_METRIC_SM_UTIL
TENSOR_ACTIVE = 5  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
DRAM_ACTIVE = 10  # NVML_GPM_METRIC_DRAM_BW_UTIL
PCIE_TX = 20  # NVML_GPM_METRIC_PCIE_TX_PER_SEC: MiB/s from this GPU
PCIE_RX = 21  # NVML_GPM_METRIC_PCIE_RX_PER_SEC: MiB/s to this GPU
MIB = 1048576.0
# (field, metric id, scale to the field's unit)
METRICS = (
    ("sm_active_pct", SM_ACTIVE, 1.0),
    ("tensor_active_pct", TENSOR_ACTIVE, 1.0),
    ("dram_active_pct", DRAM_ACTIVE, 1.0),
)
# The whole GPU's PCIe link: read on GPUs, not on MIG instances (their parent's rows have it).
PCIE_METRICS = (
    ("pcie_tx_bytes_per_s", PCIE_TX, MIB),
    ("pcie_rx_bytes_per_s", PCIE_RX, MIB),
)


class GpmReader:
    """One GPU's GPM state; ``read()`` returns {} until it has two samples."""

    def __init__(self, nvml, probe, handle, gpu_instance_id: int | None = None) -> None:
        """``handle`` is the GPU's; for a MIG instance it is the *parent's* handle and
        ``gpu_instance_id`` its GPU instance: samples then come from
        ``nvmlGpmMigSampleGet(parent, gpu_instance_id, sample)`` (nvml.h)."""
        self.nvml = nvml
        self.probe = probe
        self.handle = handle
        self.gpu_instance_id = gpu_instance_id
        self.metrics = METRICS if gpu_instance_id is not None else METRICS + PCIE_METRICS
        self.enabled = False
        self._prev = None
        self._next = None
        support = probe.call("gpm", "nvmlGpmQueryDeviceSupport", handle)
        if support is None or not getattr(support, "isSupportedDevice", 0):
            probe.mark_unsupported("gpm", "GPM not supported on this GPU")
            return
        prev = probe.call("gpm", "nvmlGpmSampleAlloc")
        nxt = probe.call("gpm", "nvmlGpmSampleAlloc") if prev is not None else None
        if prev is None or nxt is None:
            return
        self._prev, self._next = prev, nxt
        self._have_prev = False
        self.enabled = True

    @classmethod
    def disabled(cls) -> GpmReader:
        reader = cls.__new__(cls)
        reader.enabled = False
        reader.metrics = ()
        reader._prev = reader._next = None
        return reader

    def read(self) -> dict[str, float]:
        if not self.enabled or not self.probe.supported("gpm"):
            return {}
        if self.gpu_instance_id is None:
            got = self.probe.call("gpm", "nvmlGpmSampleGet", self.handle, self._next)
        else:
            got = self.probe.call("gpm", "nvmlGpmMigSampleGet", self.handle,
                                  self.gpu_instance_id, self._next)
        if got is None:
            self._have_prev = False
            return {}
        out: dict[str, float] = {}
        if self._have_prev:
            out = self._metrics(self._prev, self._next)
        self._prev, self._next = self._next, self._prev
        self._have_prev = True
        return out

    def _metrics(self, first, second) -> dict[str, float]:
        make_request = getattr(self.nvml, "c_nvmlGpmMetricsGet_t", None)
        if make_request is None:
            self.probe.mark_unsupported("gpm", "c_nvmlGpmMetricsGet_t missing from the binding")
            return {}
        request = make_request()
        request.version = self.nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self.metrics)
        request.sample1 = first
        request.sample2 = second
        for i, (_, metric_id, _) in enumerate(self.metrics):
            request.metrics[i].metricId = metric_id
        result = self.probe.call("gpm", "nvmlGpmMetricsGet", request)
        if result is None:
            return {}
        out = {}
        for i, (name, metric_id, scale) in enumerate(self.metrics):
            ret = int(result.metrics[i].nvmlReturn)
            if ret == NVML_SUCCESS:
                out[name] = float(result.metrics[i].value) * scale
            elif metric_id in (PCIE_TX, PCIE_RX) and classify_code(ret) == PERMANENT:
                self._no_pcie(ret)
        return out

    @property
    def pcie(self) -> bool:
        """Whether this GPU's PCIe rates come from here: until GPM says a PCIe metric is
        not supported (then the source falls back to NVML's PCIe readings)."""
        return any(m[1] == PCIE_TX for m in self.metrics)

    def _no_pcie(self, ret: int) -> None:
        """GPM has no PCIe metrics on this GPU: stop asking, and let the source read PCIe
        from NVML's fields."""
        if self.pcie:
            self.metrics = tuple(m for m in self.metrics if m[1] not in (PCIE_TX, PCIE_RX))
            log.info("%s: GPM has no PCIe metrics (nvmlReturn %d); PCIe from NVML's fields",
                     self.probe.label, ret)

    def close(self) -> None:
        for sample in (self._prev, self._next):
            if sample is not None:
                try:
                    self.nvml.nvmlGpmSampleFree(sample)
                except Exception:  # noqa: BLE001 - freeing at shutdown must not raise
                    pass
        self._prev = self._next = None
        self.enabled = False
