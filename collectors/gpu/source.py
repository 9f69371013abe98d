"""The GPU source: every reading NVML can give for each GPU, once per tick.

The NVML binding is passed in (the ``pynvml`` module or a simulator's ``SimNVML``); this
module never touches a global NVML of its own.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from collectors.attribution.mps import mps_client_pids
from collectors.gpu import fields, mig
from collectors.gpu.errors import GpuLost, NvmlGone, Probe
from collectors.gpu.gpm import GpmReader
from collectors.gpu.health import HealthReader
from collectors.gpu.inventory import GpuInfo, read_info
from collectors.gpu.xid import XidWatcher, xid_message
from collectors.rates import CounterRates

log = logging.getLogger(__name__)

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0
# How often a MIG-enabled GPU's instances are listed again: an administrator may create or
# destroy instances without a driver reload, and NVML's MIG handles then change.
MIG_REFRESH_S = 60.0

METRICS = (
    "util_pct", "mem_util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz",
    "sm_active_pct", "tensor_active_pct", "dram_active_pct", "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s",
    "throttle_reasons", "energy_j",
)  # fmt: skip


@dataclass
class GpuReading:
    uuid: str
    values: dict = field(default_factory=dict)  # metric -> value; missing means null
    pids: list[int] = field(default_factory=list)
    health: dict | None = None  # health counters when read this tick (``health.FIELDS``)


@dataclass
class _Gpu:
    info: GpuInfo
    handle: object
    probe: Probe
    gpm: GpmReader
    lost: bool = False
    health: HealthReader | None = None
    mig_slot: int | None = None  # a MIG instance: its slot under the parent
    parent: _Gpu | None = None  # a MIG instance: its parent GPU


class GpuSource:
    def __init__(self, nvml, clock) -> None:
        self.nvml = nvml
        self.clock = clock
        self._gpus: list[_Gpu] = []
        self._rates = CounterRates()
        self._events: list[dict] = []
        self._events_lock = threading.Lock()
        self._xid: XidWatcher | None = None
        self._up = False
        self._backoff = BACKOFF_FIRST_S
        self._retry_at = 0.0
        self._initialised = False
        self._mig_at = 0.0
        self._mig_parents: set[str] = set()  # GPUs whose MIG instances are listed
        self._start()

    # -- lifecycle ------------------------------------------------------------------
    def _start(self) -> None:
        try:
            self.nvml.nvmlInit()
            self._initialised = True
            self._discover()
        except Exception as exc:  # noqa: BLE001 - any failure here means "retry later"
            self._down(exc)
            return
        self._up = True
        self._backoff = BACKOFF_FIRST_S

    def _down(self, exc: BaseException) -> None:
        self._stop_watchers()
        if self._initialised:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
            self._initialised = False
        self._up = False
        self._retry_at = self.clock() + self._backoff
        log.warning("NVML unavailable (%s); retrying in %.0f s", exc, self._backoff)
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)

    def _discover(self) -> None:
        nvml = self.nvml
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            if isinstance(uuid, bytes):
                uuid = uuid.decode()
            probe = Probe(nvml, f"GPU {index} ({uuid})")
            try:
                info = read_info(probe, handle, index, uuid)
                gpm = GpmReader(nvml, probe, handle)
            except GpuLost:
                info = GpuInfo(uuid, index, None, None, None, None, None, None)
                gpm = GpmReader.disabled()
                gpus.append(_Gpu(info, handle, probe, gpm, lost=True))
                self._event(uuid, "gpu_lost", message="GPU is lost")
                continue
            gpus.append(_Gpu(info, handle, probe, gpm, health=HealthReader(nvml, probe, handle)))
        self._gpus = []  # fresh handles after a (re-)init: no MIG state is kept
        self._gpus = self._with_mig(gpus)
        self._rates = CounterRates()
        self._xid = XidWatcher(nvml, {g.info.uuid: g.handle for g in gpus}, self._on_xid)

    def _with_mig(self, gpus: list[_Gpu]) -> list[_Gpu]:
        """The physical GPUs, each MIG-enabled one followed by its MIG instances (kept
        from the last listing when the same instance is found again)."""
        known = {g.info.uuid: g for g in self._gpus if g.parent is not None}
        out = []
        for gpu in gpus:
            out.append(gpu)
            if gpu.parent is not None or not gpu.info.mig_enabled or gpu.lost:
                continue
            for dev in mig.discover(self.nvml, gpu.info, gpu.handle, gpu.probe):
                kept = known.pop(dev.info.uuid, None)
                if kept is not None and kept.info == dev.info and kept.parent is gpu:
                    kept.handle = dev.handle  # NVML may hand out a new handle: the UUID is it
                    out.append(kept)
                    continue
                if kept is not None and kept.gpm.enabled:
                    kept.gpm.close()
                probe = Probe(self.nvml, f"GPU {gpu.info.index} MIG {dev.slot} ({dev.info.uuid})")
                gpm = GpmReader(self.nvml, probe, gpu.handle, dev.info.mig_gi_id) \
                    if gpu.gpm.enabled and dev.info.mig_gi_id is not None else GpmReader.disabled()
                out.append(_Gpu(dev.info, dev.handle, probe, gpm, mig_slot=dev.slot, parent=gpu))
        for gone in known.values():
            if gone.gpm.enabled:
                gone.gpm.close()
        self._mig_at = self.clock() + MIG_REFRESH_S
        self._mig_parents = {g.parent.info.uuid for g in out if g.parent is not None}
        return out

    def _stop_watchers(self) -> None:
        if self._xid is not None:
            self._xid.close()
            self._xid = None
        for gpu in self._gpus:
            if gpu.gpm.enabled:
                gpu.gpm.close()

    def close(self) -> None:
        self._stop_watchers()
        if self._initialised:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
            self._initialised = False

    # -- inventory and events -----------------------------------------------------------
    @property
    def inventory(self) -> list[GpuInfo]:
        return [g.info for g in self._gpus]

    def _event(self, uuid: str | None, kind: str, **extra) -> None:
        event = {"ts": self.clock(), "gpu": uuid, "kind": kind, **extra}
        with self._events_lock:
            self._events.append(event)

    def _on_xid(self, uuid: str | None, code: int) -> None:
        self._event(uuid, "xid", code=code, message=xid_message(code))

    def drain_events(self) -> list[dict]:
        """Events (``gpu`` is the GPU's UUID here; the agent turns it into an index)."""
        with self._events_lock:
            events, self._events = self._events, []
        return events

    # -- sampling -------------------------------------------------------------------
    def sample(self, ts: float) -> list[GpuReading]:
        if not self._up:
            if self.clock() < self._retry_at:
                return []
            self._start()
            if not self._up:
                return []
        readings = []
        try:
            if self.clock() >= self._mig_at and any(g.info.mig_enabled for g in self._gpus):
                self._gpus = self._with_mig([g for g in self._gpus if g.parent is None])
            for gpu in self._gpus:
                readings.append(self._sample_gpu(gpu, ts))
        except NvmlGone as exc:
            self._down(exc)
            return []
        return readings

    def _sample_gpu(self, gpu: _Gpu, ts: float) -> GpuReading:
        reading = GpuReading(gpu.info.uuid)
        try:
            if gpu.parent is not None:
                reading.values = self._read_mig_values(gpu)
            else:
                reading.values = self._read_values(gpu, ts)
            # A MIG-enabled GPU's own process list is the sum of its instances' (NVML):
            # its processes are attributed through the instances, never twice (where no
            # instance could be listed, the GPU's own list is all there is).
            reading.pids = [] if gpu.info.uuid in self._mig_parents else self._read_pids(gpu)
            if gpu.health is not None:
                reading.health = gpu.health.read(ts)
        except GpuLost as exc:
            if not gpu.lost:
                gpu.lost = True
                self._event(gpu.info.uuid, "gpu_lost", message=str(exc) or "GPU is lost")
            reading.values = {}
            return reading
        if gpu.lost:
            gpu.lost = False
            log.warning("GPU %s answers again", gpu.info.uuid)
        return reading

    def _read_values(self, gpu: _Gpu, ts: float) -> dict:
        p, h, nvml = gpu.probe, gpu.handle, self.nvml
        values = self._use(gpu)
        power = p.call("power", "nvmlDeviceGetPowerUsage", h)
        values["power_w"] = None if power is None else power / 1000.0
        sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", NVML_TEMPERATURE_GPU)
        values["temp_c"] = p.call("temperature", "nvmlDeviceGetTemperature", h, sensor)
        clock_sm = getattr(nvml, "NVML_CLOCK_SM", NVML_CLOCK_SM)
        values["sm_clock_mhz"] = p.call("sm_clock", "nvmlDeviceGetClockInfo", h, clock_sm)
        values["throttle_reasons"] = self._throttle(p, h)
        energy = p.call("energy", "nvmlDeviceGetTotalEnergyConsumption", h)
        values["energy_j"] = None if energy is None else energy / 1000.0
        values.update(gpu.gpm.read() if gpu.gpm.enabled else {})
        self._read_links(gpu, ts, values)
        return {k: v for k, v in values.items() if v is not None}

    def _read_links(self, gpu: _Gpu, ts: float, values: dict) -> None:
        """PCIe and NVLink byte rates. PCIe comes from GPM where it has it (filled in
        ``values`` already); else from the cumulative fields when they are 64-bit; else,
        as those wrap within a tick, from NVML's 20 ms throughput reading (a snapshot, not
        the tick's average: ``docs/collector.md``, "PCIe traffic")."""
        p, h = gpu.probe, gpu.handle
        # GPM given up on this GPU for good (NOT_SUPPORTED after all): the fields instead.
        pcie_from_gpm = gpu.gpm.enabled and gpu.gpm.pcie and p.supported("gpm")
        wanted = [c for c in fields.COUNTERS if not (pcie_from_gpm and c[0] in fields.PCIE)]
        types: dict[str, int] = {}
        counters = fields.read_fields(p, h, [(n, f, s) for n, f, s, _ in wanted], types)
        for name, _fid, _scope, unit in wanted:
            raw = counters.get(name)
            if types.get(name) in fields.NARROW_TYPES:
                # A counter narrower than 64 bits wraps within a tick at link speeds.
                if name in fields.PCIE:
                    values[name + "_bytes_per_s"] = self._pcie_throughput(p, h, name)
                else:  # NVLink: no other reading of the tick's traffic; null, said once
                    p.mark_unsupported("field:" + name, "a 32-bit counter, which wraps")
                continue
            rate = self._rates.update(
                (gpu.info.uuid, name), ts, None if raw is None else raw * unit
            )
            values[name + "_bytes_per_s"] = rate

    def _pcie_throughput(self, p: Probe, h, name: str) -> float | None:
        counter = fields.PCIE_UTIL_TX_BYTES if name == "pcie_tx" else fields.PCIE_UTIL_RX_BYTES
        kb_per_s = p.call("pcie_throughput", "nvmlDeviceGetPcieThroughput", h, counter)
        return None if kb_per_s is None else float(kb_per_s) * 1000.0

    def _read_mig_values(self, gpu: _Gpu) -> dict:
        """A MIG instance's own readings: memory always, utilization where NVML gives it
        (it says NOT_SUPPORTED on MIG, and null is sent), GPM activity of its GPU instance
        where the parent has GPM. Power, clocks, temperature and link counters are the
        parent's, sent on the parent's rows."""
        values = self._use(gpu)
        values.update(gpu.gpm.read() if gpu.gpm.enabled else {})
        return {k: v for k, v in values.items() if v is not None}

    def _use(self, gpu: _Gpu) -> dict:
        """Utilization (None where NVML has none, as on a MIG instance) and memory used: what
        a GPU and a MIG instance both report."""
        p, h = gpu.probe, gpu.handle
        values: dict = {}
        util = p.call("utilization", "nvmlDeviceGetUtilizationRates", h)
        if util is not None:
            values["util_pct"] = float(util.gpu)
            values["mem_util_pct"] = float(util.memory)
        values["mem_used_mib"] = self._mem_used_mib(p, h)
        return values

    def _mem_used_mib(self, p: Probe, h) -> int | None:
        # v2 'used' is allocated memory only; v1 also counts reserved memory. Fall back to
        # v1 only when v2 can never answer, so one GPU's series never mixes the two.
        version = getattr(self.nvml, "nvmlMemory_v2", None)
        if version is not None and p.supported("memory_v2"):
            memory = p.call("memory_v2", "nvmlDeviceGetMemoryInfo", h, version=version)
            if memory is not None or p.supported("memory_v2"):
                return None if memory is None else int(memory.used) // 1048576
        memory = p.call("memory", "nvmlDeviceGetMemoryInfo", h)
        return None if memory is None else int(memory.used) // 1048576

    def _throttle(self, p: Probe, h) -> int | None:
        if p.supported("clocks_event_reasons"):
            reasons = p.call("clocks_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons", h)
            if reasons is not None or p.supported("clocks_event_reasons"):
                return reasons
        return p.call("throttle_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons", h)

    def _read_pids(self, gpu: _Gpu) -> list[int]:
        p = gpu.probe
        procs = None
        if p.supported("processes"):
            procs = p.call("processes", "nvmlDeviceGetComputeRunningProcesses", gpu.handle)
        if procs is None and not p.supported("processes"):
            procs = p.call("processes_v2", "nvmlDeviceGetComputeRunningProcesses_v2", gpu.handle)
        pids = {int(proc.pid) for proc in procs or ()}
        # MPS: the compute list holds the MPS server; its clients (the job's processes,
        # in the job's cgroup) are listed here (collectors/attribution/mps.py).
        pids |= mps_client_pids(p, gpu.handle)
        return sorted(pids)
