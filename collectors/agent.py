"""The agent: samples GPUs, NICs and jobs each tick and builds contract-1 batches."""

from __future__ import annotations

import logging
import math
import time
import uuid as uuidlib

from collectors import __version__
from collectors.attribution import Job, JobAttributor
from collectors.attribution.metadata import Scontrol
from collectors.attribution.mig import gres_positions
from collectors.attribution.namespaces import BusyWithoutProcesses
from collectors.attribution.podmap import PodMap
from collectors.attribution.slurm_gpus import SlurmGpuIndex
from collectors.config import Config
from collectors.fabric import FIELDS as FABRIC_FIELDS
from collectors.fabric import FabricCounters
from collectors.gpu import health
from collectors.gpu.dcgm_exporter import DcgmExporterSource
from collectors.gpu.source import METRICS, GpuSource
from collectors.nic import NicSource

log = logging.getLogger(__name__)

SCHEMA = 1
GPU_FIELDS = ["ts", "gpu", "job", *METRICS]
NIC_FIELDS = ["ts", "nic", "rx_bytes_per_s", "tx_bytes_per_s", *FABRIC_FIELDS]
JOB_FIELDS = ["ts", "job", "cpu_cores_used", "host_mem_used_bytes"]
HEALTH_FIELDS = ["ts", "gpu", *health.FIELDS]


def finite(value):
    """A reading as sent: NaN or infinity (a driver's or a counter's glitch) is no
    measurement, so it goes as null (the server would refuse the row)."""
    if type(value) is float and not math.isfinite(value):
        return None
    return value


class Agent:
    """One node's collector state.

    ``sample()`` reads everything at ``clock()`` and buffers rows; ``build_batch()`` drains
    them into one envelope and increments ``seq``.
    """

    def __init__(self, config: Config, nvml=None, clock=time.time, *, nvml_reason=None,
                 ethtool=None):
        self.config = config
        self.clock = clock
        self.nvml = nvml
        self.boot_id = uuidlib.uuid4().hex
        self.seq = 0
        self.spool_dropped = 0
        self.simulated = bool(getattr(nvml, "SIMULATED", False))
        self.nics = NicSource(config.sysfs_root)
        # ``ethtool``: reads a netdev's ethtool statistics (RoCE pause counters); None for
        # the kernel's (SIOCETHTOOL), the simulator's own otherwise.
        self.fabric = FabricCounters(config.sysfs_root, ethtool)
        # A simulated node's jobs exist in the simulator only: the host's own Slurm, where
        # there is one, must not be asked about them (it would answer for its real job of
        # the same number, or time out).
        scheduler = ({"scontrol": Scontrol(executable=""),
                      "slurm_gpus": SlurmGpuIndex(executable="")}
                     if self.simulated else {})
        self.jobs = JobAttributor(config.procfs_root, config.cgroup_root, config.job_map_dir,
                                  **scheduler)
        self.pods = None
        if config.kubelet_socket:
            self.pods = PodMap(config.kubelet_socket, config.kubelet_pods_url,
                               config.kubelet_token_file, config.kubelet_ca_file,
                               config.kubelet_user_label)
        if config.gpu_source == "dcgm-exporter":
            log.info("GPU readings from dcgm-exporter at %s", config.dcgm_url)
            self.gpus = DcgmExporterSource(config.dcgm_url, clock)
        elif nvml is None:
            reason = nvml_reason or f"nvml = {config.nvml}"
            log.warning("NVML not available (%s): sending NIC samples only", reason)
            self.gpus = None
        else:
            self.gpus = GpuSource(nvml, clock)
        # NVML lists no process of another PID namespace: say so when a GPU works unseen.
        self._unseen = BusyWithoutProcesses() if isinstance(self.gpus, GpuSource) else None
        self._reset_buffers()
        self._gpu_info: dict[str, dict] = {}
        self._nic_info: dict[str, dict] = {}

    def _reset_buffers(self) -> None:
        self._gpu_rows: list[tuple[str, list]] = []  # (gpu uuid, row without gpu index)
        self._nic_rows: list[tuple[str, list]] = []
        self._health_rows: list[tuple[str, list]] = []  # (gpu uuid, row without gpu index)
        self._job_rows: list[list] = []
        self._events: list[dict] = []
        self._window_jobs: dict[tuple[str, str], tuple[Job, set[str]]] = {}

    def sample(self) -> None:
        ts = self.clock()
        readings = self.gpus.sample(ts) if self.gpus is not None else []
        if self._unseen is not None:
            self._unseen.check(readings)
        self._refresh_gpu_info()
        index_of = {uuid: info["index"] for uuid, info in self._gpu_info.items()}
        inventory = self.gpus.inventory if self.gpus else []
        minors = {info.uuid: info.minor for info in inventory}
        # With MIG instances, each Slurm GPU (an instance, or a GPU without MIG) is named by
        # its position in Slurm's list; a MIG-enabled GPU is no job's (its instances are).
        positions = gres_positions(inventory)
        if positions is not None:
            index_of = {u: positions[u] for u in index_of if u in positions}
            minors = {i.uuid: i.minor for i in inventory
                      if i.uuid in positions and i.parent_uuid is None}
        gpus = [(index_of[r.uuid], r.uuid, r.pids) for r in readings if r.uuid in index_of]
        pods = self.pods.of_gpus([u for _, u, _ in gpus]) if self.pods else None
        owners, ended = self.jobs.attribute(
            ts, gpus, minors, getattr(self.gpus, "job_hints", None), pods)
        for reading in readings:
            job = owners.get(reading.uuid)
            if job is not None:
                self._window_jobs.setdefault(job.key, (job, set()))[1].add(reading.uuid)
            row = [ts, job.ref.id if job is not None else None]
            row.extend(finite(reading.values.get(name)) for name in METRICS)
            self._gpu_rows.append((reading.uuid, row))
            if reading.health is not None:
                self._health_rows.append(
                    (reading.uuid, [ts, *(reading.health.get(n) for n in health.FIELDS)]))
        for job in ended:
            self._window_jobs.setdefault(job.key, (job, set()))
        for job_id, cores, mem in self.jobs.usage(ts):
            self._job_rows.append([ts, job_id, finite(cores), finite(mem)])
        fabric = self.fabric.sample()
        for nic, rx, tx in self.nics.sample(ts):
            port = fabric.get(nic.name, {})
            self._nic_rows.append((nic.name, [ts, finite(rx), finite(tx),
                                              *(finite(port.get(f)) for f in FABRIC_FIELDS)]))
        for nic in self.nics.inventory:
            self._nic_info[nic.name] = nic.as_dict()
        self._drain_events()

    def _refresh_gpu_info(self) -> None:
        if self.gpus is not None:
            for info in self.gpus.inventory:
                self._gpu_info[info.uuid] = info.as_dict()

    def _drain_events(self) -> None:
        if self.gpus is not None:
            self._events.extend(self.gpus.drain_events())

    def build_batch(self) -> dict:
        self.seq += 1
        self._refresh_gpu_info()
        self._drain_events()
        gpu_uuids = self._current_gpus()
        gpu_pos = {uuid: i for i, uuid in enumerate(gpu_uuids)}
        nic_names = self._current_nics()
        nic_pos = {name: i for i, name in enumerate(nic_names)}
        gpu_rows = [[row[0], gpu_pos[uuid], *row[1:]] for uuid, row in self._gpu_rows]
        nic_rows = [[row[0], nic_pos[name], *row[1:]] for name, row in self._nic_rows]
        health_rows = [[row[0], gpu_pos[uuid], *row[1:]] for uuid, row in self._health_rows]
        events = [self._event_out(e, gpu_pos) for e in self._events]
        jobs = [
            job.as_dict(sorted(gpu_pos[u] for u in uuids if u in gpu_pos))
            for job, uuids in self._window_jobs.values()
        ]
        batch = {
            "schema": SCHEMA,
            "cluster": self.config.cluster,
            "node": self.config.node,
            "agent": {
                "version": __version__,
                "boot_id": self.boot_id,
                "seq": self.seq,
                "spool_dropped": self.spool_dropped,
                "simulated": self.simulated,
            },
            "sent_at": self.clock(),
            "interval_s": _number(self.config.interval),
            "gpus": [self._gpu_info[u] for u in gpu_uuids],
            "nics": [self._nic_info[n] for n in nic_names],
            "jobs": jobs,
            "gpu_samples": {"fields": list(GPU_FIELDS), "rows": gpu_rows},
            "nic_samples": {"fields": list(NIC_FIELDS), "rows": nic_rows},
            "job_samples": {"fields": list(JOB_FIELDS), "rows": self._job_rows},
            "events": events,
            "gpu_health": {"fields": list(HEALTH_FIELDS), "rows": health_rows},
        }
        self.spool_dropped = 0
        self._reset_buffers()
        return batch

    def _current_gpus(self) -> list[str]:
        current = [i.uuid for i in self.gpus.inventory] if self.gpus is not None else []
        extra = {uuid for uuid, _ in self._gpu_rows} | {e["gpu"] for e in self._events}
        extra |= {uuid for uuid, _ in self._health_rows}
        extra.discard(None)
        uuids = current + sorted(u for u in extra - set(current) if u in self._gpu_info)
        return sorted(uuids, key=lambda u: (self._gpu_info[u]["index"], u))

    def _current_nics(self) -> list[str]:
        current = [n.name for n in self.nics.inventory]
        extra = {name for name, _ in self._nic_rows} - set(current)
        return current + sorted(extra)

    @staticmethod
    def _event_out(event: dict, gpu_pos: dict[str, int]) -> dict:
        out = dict(event)
        out["gpu"] = gpu_pos.get(event.get("gpu"))
        return out

    def close(self) -> None:
        if self.gpus is not None:
            self.gpus.close()
        if self.pods is not None:
            self.pods.close()


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
