"""The GPU source for nodes that run NVIDIA's dcgm-exporter: its ``/metrics`` page, read
once per tick, instead of NVML.

It gives what ``GpuSource`` gives (``inventory``, ``sample(ts)``, ``drain_events()``,
``close()``), so the agent and everything downstream are unchanged, plus ``job_hints``:
the job each GPU's series name in their ``hpc_job`` or Kubernetes pod labels. The field
mapping and its units are in docs/collector.md ("GPUs from dcgm-exporter").
"""

from __future__ import annotations

import logging
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from collectors.gpu.exposition import ExpositionError, Sample, parse
from collectors.gpu.inventory import GpuInfo, normalise_bus_id
from collectors.gpu.source import GpuReading
from collectors.gpu.xid import xid_message

log = logging.getLogger(__name__)

DEFAULT_URL = "http://127.0.0.1:9400/metrics"
TIMEOUT_S = 3.0
MAX_PAGE_BYTES = 32 << 20

# DCGM field -> (ClusterUI metric, factor). DCGM's units: docs/collector.md.
FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_pct", 1.0),  # %
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),  # %
    "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1.0),  # MiB
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),  # W
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),  # C
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),  # MHz
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", 100.0),  # ratio 0..1
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_pct", 100.0),  # ratio 0..1
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_pct", 100.0),  # ratio 0..1
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_per_s", 1.0),  # B/s (a rate, not a count)
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_per_s", 1.0),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_tx_bytes_per_s", 1.0),  # B/s
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_rx_bytes_per_s", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", 1.0),  # NVML's bitmask
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", 1.0),  # its older name
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 0.001),  # mJ since driver load
}
INTEGER_METRICS = ("mem_used_mib", "throttle_reasons")
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"  # the last XID seen (a gauge), 0 for none
INVENTORY_FIELDS = ("DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                    "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
                    "DCGM_FI_DEV_POWER_MGMT_LIMIT")  # fmt: skip

# DCGM's "no value" sentinels (dcgm_structs.h DCGM_FT_*_BLANK .. _NOT_PERMISSIONED), which
# exporters before 4.x printed as values (its README shows 9223372036854775794).
_INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)
_INT32_BLANKS = frozenset(float(0x7FFFFFF0 + i) for i in range(4))
_FP64_BLANKS = frozenset(140737488355328.0 + i for i in range(4))
_DEVICE_MINOR = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True)
class JobHint:
    """The job an exporter label names for a GPU."""

    scheduler: str  # slurm | kubernetes
    id: str
    meta: dict = field(default_factory=dict, compare=False)


def is_blank(value: float) -> bool:
    return value >= _INT64_BLANK or value in _INT32_BLANKS or value in _FP64_BLANKS


def uuid_of(labels: dict[str, str]) -> str | None:
    return labels.get("UUID") or labels.get("uuid") or None  # "uuid" with --use-old-namespace


def hpc_job_id(value: str) -> str | None:
    """An ``hpc_job`` label is one line of the mapping file: a job id, or ClusterUI's
    prolog format ``<jobid> <uid>`` and its ``key=value`` lines, which name no job."""
    token = value.strip().split(None, 1)[0] if value.strip() else ""
    if not token or "=" in token or token.startswith("#"):
        return None
    return token


def job_hint(labels: dict[str, str]) -> JobHint | None:
    if "hpc_job" in labels:
        job_id = hpc_job_id(labels["hpc_job"])
        return JobHint("slurm", job_id) if job_id else None
    pod = labels.get("pod") or labels.get("pod_name") or ""
    namespace = labels.get("namespace") or labels.get("pod_namespace") or ""
    uid = labels.get("pod_uid") or ""
    if not (uid or (pod and namespace)):
        return None
    # The pod UID is the id the cgroup path gives (collectors/attribution/cgroup.py); the
    # exporter sends it with --kubernetes-enable-pod-uid, else the name must do.
    return JobHint("kubernetes", uid or f"{namespace}/{pod}", {"name": pod} if pod else {})


class DcgmExporterSource:
    def __init__(self, url: str, clock, timeout: float = TIMEOUT_S) -> None:
        self.url = url
        self.clock = clock
        self.timeout = timeout
        self._info: dict[str, GpuInfo] = {}
        self._events: list[dict] = []
        self._last_xid: dict[str, float] = {}
        self._missing: set[str] = set()
        self._problem: str | None = None
        self.job_hints: dict[str, JobHint] = {}

    @property
    def inventory(self) -> list[GpuInfo]:
        return sorted(self._info.values(), key=lambda i: (i.index, i.uuid))

    def drain_events(self) -> list[dict]:
        events, self._events = self._events, []
        return events

    def close(self) -> None:
        pass

    # -- one scrape -----------------------------------------------------------------
    def sample(self, ts: float) -> list[GpuReading]:
        self.job_hints = {}
        try:
            page = parse(self._fetch())
        except ExpositionError as exc:
            return self._fail(f"malformed page ({exc}); no GPU samples until it is whole")
        except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, bad URL
            return self._fail(f"not answering ({_reason(exc)}); no GPU samples until it does")
        by_gpu = self._group(page.samples)
        if not by_gpu:
            return self._fail("the page has no GPU series (UUID labels); is this the "
                              "dcgm-exporter's /metrics?")  # fmt: skip
        if self._problem is not None:
            log.warning("dcgm-exporter at %s answers again", self.url)
            self._problem = None
        readings = []
        for uuid, series in by_gpu.items():
            self._info[uuid] = self._describe(uuid, series)
            readings.append(GpuReading(uuid, _values(series)))
            self._watch_xid(uuid, series)
            hint = _first_hint(series)
            if hint is not None:
                self.job_hints[uuid] = hint
        self._note_missing(set(by_gpu))
        readings.extend(GpuReading(uuid) for uuid in sorted(self._missing))
        return readings

    def _fetch(self) -> str:
        request = urllib.request.Request(self.url, headers={"Accept": "text/plain"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
            body = response.read(MAX_PAGE_BYTES + 1)
        if len(body) > MAX_PAGE_BYTES:
            raise ExpositionError(f"page larger than {MAX_PAGE_BYTES} bytes")
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExpositionError(f"not UTF-8 ({exc.reason})") from None

    def _fail(self, what: str) -> list[GpuReading]:
        if what != self._problem:
            log.warning("dcgm-exporter at %s: %s", self.url, what)
            self._problem = what
        return []

    @staticmethod
    def _group(samples: list[Sample]) -> dict[str, list[Sample]]:
        """GPU UUID -> its series, in page order. MIG instances' series (GPU_I_ID) are
        kept for the inventory only; link, switch and CPU series have no UUID label."""
        out: dict[str, list[Sample]] = {}
        for sample in samples:
            uuid = uuid_of(sample.labels)
            if uuid and "gpu" in sample.labels:
                out.setdefault(uuid, []).append(sample)
        return out

    def _describe(self, uuid: str, series: list[Sample]) -> GpuInfo:
        labels = next((s.labels for s in series if "GPU_I_ID" not in s.labels), series[0].labels)
        got = {s.name: s.value for s in reversed(series)
               if s.name in INVENTORY_FIELDS and "GPU_I_ID" not in s.labels
               and not is_blank(s.value)}  # fmt: skip
        total = got.get("DCGM_FI_DEV_FB_TOTAL")
        parts = [got.get(f"DCGM_FI_DEV_FB_{p}") for p in ("USED", "FREE", "RESERVED")]
        if total is None and None not in parts:
            total = sum(parts)
        limit = got.get("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", got.get("DCGM_FI_DEV_POWER_MGMT_LIMIT"))
        minor = _DEVICE_MINOR.match(labels.get("device", ""))
        mig = any("GPU_I_ID" in s.labels for s in series)
        return GpuInfo(
            uuid=uuid,
            index=_int(labels.get("gpu")),
            model=labels.get("modelName") or labels.get("model_name") or None,
            memory_total_mib=None if total is None else int(total),
            power_limit_w=limit,
            pci_bus_id=normalise_bus_id(labels.get("pci_bus_id")),
            nvlink_bytes_per_s=None,
            mig_enabled=True if mig else None,
            minor=int(minor.group(1)) if minor else None,
        )

    def _watch_xid(self, uuid: str, series: list[Sample]) -> None:
        value = next((s.value for s in series if s.name == XID_FIELD
                      and "GPU_I_ID" not in s.labels and not is_blank(s.value)), None)  # fmt: skip
        if value is None:
            return
        previous = self._last_xid.get(uuid)
        self._last_xid[uuid] = value
        # The gauge holds the last XID: a change to a non-zero code is a new one. The first
        # reading may be from long ago, so it is only the baseline.
        if previous is not None and value != previous and value > 0 and value.is_integer():
            code = int(value)
            self._events.append({"ts": self.clock(), "gpu": uuid, "kind": "xid", "code": code,
                                 "message": xid_message(code)})  # fmt: skip

    def _note_missing(self, seen: set[str]) -> None:
        missing = set(self._info) - seen
        for uuid in sorted(missing - self._missing):
            log.warning("dcgm-exporter at %s: GPU %s (index %s) is missing from the page; its "
                        "samples are null until it is back", self.url, uuid,
                        self._info[uuid].index)  # fmt: skip
        for uuid in sorted(self._missing - missing):
            log.warning("dcgm-exporter at %s: GPU %s is on the page again", self.url, uuid)
        self._missing = missing


def _values(series: list[Sample]) -> dict:
    values: dict = {}
    for sample in series:
        target = FIELDS.get(sample.name)
        if target is None or "GPU_I_ID" in sample.labels or is_blank(sample.value):
            continue
        metric, factor = target
        if metric in values or sample.value != sample.value:  # NaN: no measurement
            continue
        value = sample.value * factor
        values[metric] = int(value) if metric in INTEGER_METRICS else value
    return values


def _first_hint(series: list[Sample]) -> JobHint | None:
    """The first job the GPU's own (non-MIG) series name; a GPU shared by several
    ``hpc_job`` lines goes to the first, as the mapping file lists them."""
    for sample in series:
        if "GPU_I_ID" in sample.labels:
            continue
        hint = job_hint(sample.labels)
        if hint is not None:
            return hint
    return None


def _int(text: str | None) -> int:
    try:
        return int(text or "")
    except ValueError:
        return 0


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__
