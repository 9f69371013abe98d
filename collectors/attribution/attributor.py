"""Attribute each GPU to the job that owns it, and measure each job's host CPU and memory.

Order of evidence per GPU: on a Kubernetes node, the pod the kubelet allocated it to
(pod-resources, ``podmap.py``: covers allocated-but-idle GPUs, names the namespace), then the
cgroup of a process NVML sees on it (direct evidence, and it gives the job's cgroup), then
the prolog mapping file (covers allocated-but-idle Slurm GPUs), then the job a
dcgm-exporter label names (``hpc_job``, pod), then the Slurm job whose process on another GPU
lists this one in its environment (``slurm_env.py``: a job's idle GPUs without the prolog),
else no job.

A pod's job id is its UID, as its cgroup path gives it (cgroup.py): from the kubelet's
/pods where configured, else from a process on one of its GPUs, else ``namespace/name``
until one of those says it. Once a pod is a job its id does not change while it runs; a pod
re-created under the same name (a StatefulSet's) with another UID is a new job.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace

from collectors.attribution.cgroup import JobRef, ProcessJob, job_of_pid, slurm_job_dirs
from collectors.attribution.jobmap import MapEntry, read_job_map
from collectors.attribution.kubelet import PodRef
from collectors.attribution.metadata import Scontrol, meta_from_environ, read_environ, user_of_uid
from collectors.attribution.slurm_env import JobGpusFromEnviron
from collectors.attribution.slurm_gpus import SlurmGpuIndex
from collectors.attribution.usage import cpu_count, cpu_seconds, memory_bytes
from collectors.rates import CounterRates

log = logging.getLogger(__name__)

_LEADING_INT = re.compile(r"^\s*(\d+)")
# How long after the sample that saw a Slurm job end its exit state is asked for again, at
# each sample, while slurmctld still says COMPLETING (its epilogs still running).
END_WAIT_S = 60.0


@dataclass
class Job:
    ref: JobRef
    uid: int | None = None
    meta: dict[str, str] = field(default_factory=dict)
    cgroup_dirs: tuple[str, ...] = ()
    ended_at: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.ref.scheduler, self.ref.id)

    def as_dict(self, gpus: list[int]) -> dict:
        user = self.meta.get("user") or user_of_uid(self.uid)
        out = {
            "id": self.ref.id,
            "scheduler": self.ref.scheduler,
            "user": user,
            "name": self.meta.get("name"),
            "account": self.meta.get("account"),
            "partition": self.meta.get("partition"),
            "started_at": _float(self.meta.get("start_time")),
            "ended_at": self.ended_at,
            "gpus": gpus,
            "cpus": _int(self.meta.get("cpus")) or cpu_count(self.cgroup_dirs),
        }
        # The scheduler facts (scontrol's), only those known: absent is "not reported".
        facts = {
            "submitted_at": _float(self.meta.get("submit_time")),
            "time_limit_s": _int(self.meta.get("time_limit_s")) or None,
            "exit_state": self.meta.get("exit_state"),
            "exit_code": _int(self.meta.get("exit_code")),
            "exit_signal": _int(self.meta.get("exit_signal")),
        }
        out.update((k, v) for k, v in facts.items() if v is not None)
        # A pod's namespace, name and owning workload (docs/protocol.md), where known.
        out.update((k, self.meta[k]) for k in POD_KEYS if self.meta.get(k))
        return out


POD_KEYS = ("namespace", "pod", "owner_kind", "owner_name")


def pod_meta(pod: PodRef) -> dict[str, str]:
    meta = {"namespace": pod.namespace, "pod": pod.name, "name": pod.name,
            "owner_kind": pod.owner_kind, "owner_name": pod.owner_name, "user": pod.user,
            "start_time": None if pod.start_time is None else repr(pod.start_time)}
    return {k: v for k, v in meta.items() if v}


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value and value > 0 else None


def _int(text: str | None) -> int | None:
    """'16' or Slurm's '16(x2)' -> 16."""
    match = _LEADING_INT.match(text or "")
    return int(match.group(1)) if match else None


class JobAttributor:
    def __init__(
        self,
        procfs_root: str,
        cgroup_root: str,
        job_map_dir: str,
        scontrol: Scontrol | None = None,
        slurm_gpus: SlurmGpuIndex | None = None,
    ) -> None:
        self.procfs_root = procfs_root
        self.cgroup_root = cgroup_root
        self.job_map_dir = job_map_dir
        self.scontrol = scontrol if scontrol is not None else Scontrol()
        self.slurm_gpus = slurm_gpus if slurm_gpus is not None else SlurmGpuIndex()
        self.active: dict[tuple[str, str], Job] = {}
        self._closing: dict[tuple[str, str], tuple[Job, float]] = {}  # job -> (job, ask until)
        self._cpu = CounterRates()
        self._pod_ids: dict[tuple[str, str], str] = {}  # (namespace, name) -> active job id
        self._shared: dict[str, frozenset] = {}  # GPU uuid -> the jobs last said to share it
        self._said_cgroupns = False
        self._environ_gpus = JobGpusFromEnviron(procfs_root)

    def attribute(
        self,
        ts: float,
        gpus: list[tuple[int, str, list[int]]],
        minors: dict[str, int | None] | None = None,
        hints: dict | None = None,
        pods: dict[str, PodRef] | None = None,
    ) -> tuple[dict[str, Job | None], list[Job]]:
        """({gpu uuid: job or None}, jobs that ended since the last call).

        An ended Slurm job whose exit state scontrol did not give yet (still completing)
        is returned once more, with it, by the call that learns it.

        ``gpus`` is [(NVML index, uuid, host pids running on it)]; ``minors`` {uuid: NVML
        minor number}, which ties a GPU to Slurm's index of it (see slurm_gpus); ``hints``
        {uuid: JobHint} the jobs dcgm-exporter's labels name, used when neither a process
        nor a mapping file says (collectors/gpu/dcgm_exporter.py); ``pods`` {uuid: PodRef}
        the pod the kubelet allocated each GPU to (collectors/attribution/podmap.py).
        """
        slurm_index = None
        if minors and self._has_index_files():  # slurmd -G only where Slurm files exist
            slurm_index = self.slurm_gpus.of(minors)
        mapping = read_job_map(
            self.job_map_dir, [(index, uuid) for index, uuid, _ in gpus], slurm_index
        )
        owners: dict[str, Job | None] = {}
        seen: dict[tuple[str, str], Job] = {}
        by_sluid = {e.meta["sluid"]: e.job_id for e in mapping.values() if "sluid" in e.meta}
        for index, uuid, pids in gpus:
            pod = (pods or {}).get(uuid)
            job = self._from_processes(pids, by_sluid, uuid)
            if pod is not None:
                job = self._from_pod(pod, job)
            job = (job or self._from_mapping(mapping.get(index))
                   or self._from_hint((hints or {}).get(uuid)))
            if job is not None:
                job = seen.setdefault(job.key, self._remember(job, mapping.get(index), pids))
                if pod is not None:
                    job.meta.update(pod_meta(pod))  # the kubelet's word, owner included
            owners[uuid] = job
        self._claim_idle_siblings(gpus, owners, minors, slurm_index)
        for key in seen:  # back (a mapping file rewritten): not ended after all
            self._closing.pop(key, None)
        ended = []
        for key in list(self.active):
            if key not in seen:
                job = self.active.pop(key)
                job.ended_at = ts
                self._cpu.forget(key)
                self.scontrol.forget(job.ref.id)
                self._pod_ids.pop((job.meta.get("namespace"), job.meta.get("pod")), None)
                if job.ref.scheduler == "slurm":
                    self._closing[key] = (job, ts + END_WAIT_S)
                ended.append(job)
        for job in self._ask_exit_states(ts):
            if not any(j is job for j in ended):
                ended.append(job)
        return owners, ended

    def _claim_idle_siblings(self, gpus, owners: dict, minors, slurm_index) -> None:
        """The GPUs nothing named (no process, mapping file or pod) that a Slurm job's
        process on another GPU names as its own in its environment (``slurm_env.py``):
        the idle GPUs of a job that uses fewer than it holds, without the prolog."""
        self._environ_gpus.keep(pid for _i, _u, pids in gpus for pid in pids)
        if all(owners.get(uuid) is not None for _i, uuid, _p in gpus):
            return
        claims: dict[int, Job] = {}  # Slurm GPU index -> the job whose process names it
        for _index, uuid, pids in gpus:
            job = owners.get(uuid)
            if job is not None and job.ref.scheduler == "slurm" and pids:
                for gres_index in self._environ_gpus.of(job.ref.id, pids):
                    claims.setdefault(gres_index, job)
        if not claims:
            return
        if slurm_index is None and minors:
            slurm_index = self.slurm_gpus.of(minors)
        slurm_index = slurm_index or {}
        for index, uuid, _pids in gpus:
            if owners.get(uuid) is None:
                owners[uuid] = claims.get(slurm_index.get(uuid, index))

    def _ask_exit_states(self, ts: float) -> list[Job]:
        """The ended jobs whose exit state scontrol gave now; the others are asked again
        at the next sample until END_WAIT_S has passed (a job Slurm no longer knows is not)."""
        learned = []
        for key, (job, until) in list(self._closing.items()):
            facts = self.scontrol.at_end(job.ref.id)
            if facts is None and ts < until:
                continue
            del self._closing[key]
            if facts:
                job.meta.update(facts)
                learned.append(job)
        return learned

    def _has_index_files(self) -> bool:
        try:
            return any(name.isdigit() for name in os.listdir(self.job_map_dir))
        except OSError:
            return False

    def _from_processes(self, pids: list[int], by_sluid: dict[str, str],
                        uuid: str = "") -> Job | None:
        votes: Counter = Counter()
        found = {}
        for pid in pids:
            hit = job_of_pid(self.procfs_root, self.cgroup_root, pid)
            if hit is not None and not hit.job.id:
                hit = self._resolve_sluid(hit, pid, by_sluid)
            if hit is None:
                continue
            if hit.outside_namespace and not self._said_cgroupns:
                self._said_cgroupns = True
                log.warning(
                    "process %d's cgroup is given relative to the collector's own cgroup "
                    "namespace: run the collector in the host's (--cgroupns=host; on "
                    "Kubernetes a privileged container). Its job is still named; its CPU and "
                    "memory are read from %s, the path without its leading '..'", pid,
                    ", ".join(hit.cgroup_dirs))
            key = (hit.job.scheduler, hit.job.id)
            votes[key] += 1
            if key not in found:
                found[key] = Job(hit.job, hit.job.uid, cgroup_dirs=hit.cgroup_dirs)
                found[key].meta["_pid"] = str(pid)
        if not votes:
            self._shared.pop(uuid, None)
            return None
        ranked = votes.most_common()
        self._say_shared(uuid, ranked)
        return found[ranked[0][0]]

    def _say_shared(self, uuid: str, ranked: list) -> None:
        """Processes of several jobs on one GPU (MPS clients, Slurm shards, time-slicing):
        a GPU row carries one job, so the others are not reported on it. Said once per GPU
        and set of jobs, in the log, so an operator can see whom the figures leave out."""
        jobs = frozenset(key for key, _n in ranked)
        if len(jobs) < 2:
            self._shared.pop(uuid, None)
            return
        if self._shared.get(uuid) == jobs:
            return
        self._shared[uuid] = jobs
        (_s, kept), kept_n = ranked[0]
        others = ", ".join(f"{job_id} ({n})" for (_s, job_id), n in ranked[1:])
        log.warning("GPU %s runs processes of %d jobs: its samples go to job %s (%d "
                    "processes); not reported on it: %s", uuid, len(jobs), kept, kept_n,
                    others)

    def _resolve_sluid(self, hit: ProcessJob, pid: int, by_sluid: dict[str, str]):
        """A Slurm >= 26.05 cgroup path names the job by SLUID: the job id is the one the
        prolog recorded with that SLUID, else the process's own SLURM_JOB_ID."""
        job_id = by_sluid.get(hit.job.sluid or "")
        if job_id is None:
            job_id = read_environ(self.procfs_root, pid, ("SLURM_JOB_ID",)).get("SLURM_JOB_ID")
        if not job_id:
            return None
        return ProcessJob(replace(hit.job, id=job_id), hit.cgroup_dirs)

    def _from_pod(self, pod: PodRef, process_job: Job | None) -> Job:
        """The job of the pod the kubelet allocated a GPU to; ``process_job`` what a
        process on the GPU says (its cgroup: the pod's UID and the pod's cgroup)."""
        from_cgroup = process_job if (process_job is not None
                                      and process_job.ref.scheduler == "kubernetes") else None
        name = (pod.namespace, pod.name)
        placeholder = f"{pod.namespace}/{pod.name}"
        known = self._pod_ids.get(name)
        uid = pod.uid or (from_cgroup.ref.id if from_cgroup else None)
        if known is not None and (known == placeholder or uid is None):
            job_id = known  # the id it started with, for as long as it runs
        else:  # a new pod, or one re-created under its name (a StatefulSet's): its UID
            job_id = uid or placeholder
        self._pod_ids[name] = job_id
        job = Job(JobRef("kubernetes", job_id), meta=pod_meta(pod))
        if from_cgroup is not None and from_cgroup.ref.id == job_id:
            job.cgroup_dirs = from_cgroup.cgroup_dirs
        return job

    def _from_mapping(self, entry: MapEntry | None) -> Job | None:
        if entry is None:
            return None
        ref = JobRef("slurm", entry.job_id, entry.uid)
        return Job(ref, entry.uid)

    @staticmethod
    def _from_hint(hint) -> Job | None:
        if hint is None:
            return None
        return Job(JobRef(hint.scheduler, hint.id), meta=dict(hint.meta))

    def _remember(self, job: Job, entry: MapEntry | None, pids: list[int]) -> Job:
        known = self.active.get(job.key)
        if known is None:
            known = job
            self.active[job.key] = known
            self._describe(known, pids)
        if entry is not None and entry.job_id == known.ref.id:
            known.meta.update(entry.meta)  # the prolog's word wins
            if known.uid is None:
                known.uid = entry.uid
        if job.cgroup_dirs and not known.cgroup_dirs:
            known.cgroup_dirs = job.cgroup_dirs
        if not known.cgroup_dirs and known.ref.scheduler == "slurm":
            known.cgroup_dirs = tuple(slurm_job_dirs(self.cgroup_root, known.ref.id, known.uid,
                                                     known.meta.get("sluid")))  # fmt: skip
        return known

    def _describe(self, job: Job, pids: list[int]) -> None:
        """First sight of a job: fill what the mapping file may not say."""
        pid = job.meta.pop("_pid", None)
        extra: dict[str, str] = {}
        if pid is not None:
            extra = meta_from_environ(self.procfs_root, int(pid))
        if job.ref.scheduler == "slurm":  # once per job; the exit state is asked at its end
            for key, value in self.scontrol.lookup(job.ref.id).items():
                extra.setdefault(key, value)
        if job.uid is None and extra.get("uid", "").isdigit():
            job.uid = int(extra["uid"])
        extra.pop("uid", None)
        for key, value in extra.items():
            job.meta.setdefault(key, value)

    def usage(self, ts: float) -> list[tuple[str, float | None, int | None]]:
        """[(job id, cpu cores used, host memory bytes)] for active jobs with a cgroup."""
        rows = []
        for key, job in self.active.items():
            if not job.cgroup_dirs:
                continue
            seconds = cpu_seconds(job.cgroup_dirs)
            cores = self._cpu.update(key, ts, seconds)
            mem = memory_bytes(job.cgroup_dirs)
            if cores is None and mem is None:
                continue
            rows.append((job.ref.id, cores, mem))
        return rows
