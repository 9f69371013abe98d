"""GPU Performance Monitoring (Hopper and newer): SM, tensor and DRAM activity.

Each tick fills a fresh GPM sample and computes the metrics over (previous, new).
"""

from __future__ import annotations

from collectors.gpu.errors import NVML_SUCCESS

SM_ACTIVE = 2  # NVML_GPM_METRIC_SM_UTIL
TENSOR_ACTIVE = 5  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
DRAM_ACTIVE = 10  # NVML_GPM_METRIC_DRAM_BW_UTIL
METRICS = (
    ("sm_active_pct", SM_ACTIVE),
    ("tensor_active_pct", TENSOR_ACTIVE),
    ("dram_active_pct", DRAM_ACTIVE),
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
        request.numMetrics = len(METRICS)
        request.sample1 = first
        request.sample2 = second
        for i, (_, metric_id) in enumerate(METRICS):
            request.metrics[i].metricId = metric_id
        result = self.probe.call("gpm", "nvmlGpmMetricsGet", request)
        if result is None:
            return {}
        out = {}
        for i, (name, _) in enumerate(METRICS):
            metric = result.metrics[i]
            if int(metric.nvmlReturn) == NVML_SUCCESS:
                out[name] = float(metric.value)
        return out

    def close(self) -> None:
        for sample in (self._prev, self._next):
            if sample is not None:
                try:
                    self.nvml.nvmlGpmSampleFree(sample)
                except Exception:  # noqa: BLE001 - freeing at shutdown must not raise
                    pass
        self._prev = self._next = None
        self.enabled = False
