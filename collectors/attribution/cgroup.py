"""Which job a process belongs to, from ``/proc/<pid>/cgroup``.

Layouts understood:
- Slurm, cgroup v1: ``N:ctrl:/slurm/uid_<uid>/job_<id>/step_<s>/task_<n>``
- Slurm, cgroup v2: ``0::/system.slice/[<node>_]slurmstepd.scope/job_<id>/step_<s>/...``
- Slurm >= 26.05, cgroup v2: ``.../slurmstepd.scope/s<SLUID>/step_<s>/...`` (the default
  unless cgroup.conf has ``CgroupJobIdPaths=yes``). The SLUID is "s" and 13 Crockford
  base32 digits (Slurm's src/common/sluid.h); the job id is not in the path, so the
  ``JobRef`` has an empty id and its ``sluid`` for the attributor to resolve.
- Kubernetes, cgroupfs: ``/kubepods/[<qos>/]pod<uid>/<container>``
- Kubernetes, systemd: ``.../kubepods-<qos>-pod<uid_with_underscores>.slice/...``
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

SLURM_V1 = re.compile(r"^(.*?/slurm[^/]*/uid_(\d+)/job_([^/]+))(?:/|$)")
SLURM_V2 = re.compile(
    r"^(.*?/(?:[^/]*_)?slurmstepd\.scope/(?:job_([^/]+)|(s[0-9A-HJKMNP-TV-Z]{13})))(?:/|$)"
)
K8S_CGROUPFS = re.compile(r"^(.*?/kubepods(?:/[a-z]+)?/pod([a-f0-9_-]+))(?:/|$)")
K8S_SYSTEMD = re.compile(r"^(.*?/kubepods(?:-[a-z]+)?-pod([a-f0-9_]+)\.slice)(?:/|$)")


@dataclass(frozen=True)
class JobRef:
    scheduler: str  # slurm | kubernetes
    id: str  # empty for a SLUID path until resolved
    uid: int | None = None
    sluid: str | None = None


@dataclass(frozen=True)
class CgroupLine:
    hierarchy: str
    controllers: tuple[str, ...]
    path: str


def parse_cgroup_file(text: str) -> list[CgroupLine]:
    lines = []
    for raw in text.splitlines():
        parts = raw.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        ctrl = tuple(c for c in controllers.split(",") if c)
        lines.append(CgroupLine(hierarchy, ctrl, path.strip()))
    return lines


def job_from_path(path: str) -> tuple[JobRef, str] | None:
    """(job, the job's own cgroup path) for one cgroup path, or None."""
    match = SLURM_V1.match(path)
    if match:
        return JobRef("slurm", match.group(3), int(match.group(2))), match.group(1)
    match = SLURM_V2.match(path)
    if match:
        if match.group(3):
            return JobRef("slurm", "", sluid=match.group(3)), match.group(1)
        return JobRef("slurm", match.group(2)), match.group(1)
    match = K8S_SYSTEMD.match(path)
    if match:
        return JobRef("kubernetes", match.group(2).replace("_", "-")), match.group(1)
    match = K8S_CGROUPFS.match(path)
    if match:
        return JobRef("kubernetes", match.group(2).replace("_", "-")), match.group(1)
    return None


@dataclass(frozen=True)
class ProcessJob:
    job: JobRef
    cgroup_dirs: tuple[str, ...]  # candidate job directories under cgroup_root, best first
    # The path was relative to a private cgroup namespace ("/../../system.slice/..."):
    # attribution/namespaces.py
    outside_namespace: bool = False


_UP = re.compile(r"^(?:/\.\.)+(?=/|$)")


def host_path(path: str) -> tuple[str, bool]:
    """(the path relative to the cgroup root, whether it climbed out of the reader's cgroup
    namespace). In a private cgroup namespace the kernel writes another cgroup's path
    relative to the reader's own, ``/../../system.slice/...`` (seen on a real GPU node:
    ``attribution/namespaces.py``); dropping the ``..`` gives the host's path when the two
    cgroups share only the root, as a Slurm job's and a container's do."""
    rel, n = _UP.subn("", path)
    return rel.lstrip("/"), bool(n)


def job_of_pid(procfs_root: str, cgroup_root: str, pid: int) -> ProcessJob | None:
    try:
        with open(os.path.join(procfs_root, str(pid), "cgroup")) as fh:
            text = fh.read()
    except OSError:
        return None  # the process has gone (or was never in this PID namespace)
    return job_of_cgroup_text(text, cgroup_root)


def job_of_cgroup_text(text: str, cgroup_root: str) -> ProcessJob | None:
    found: JobRef | None = None
    dirs: list[str] = []
    escaped = False
    for line in parse_cgroup_file(text):
        hit = job_from_path(line.path)
        if hit is None:
            continue
        job, job_path = hit
        if found is None:
            found = job
        elif (job.id, job.sluid) != (found.id, found.sluid):
            continue
        if found.uid is None and job.uid is not None:
            found = job
        rel, up = host_path(job_path)
        escaped |= up
        if line.hierarchy == "0" and not line.controllers:
            dirs.insert(0, os.path.join(cgroup_root, rel))  # v2 unified hierarchy
        else:
            dirs.append(os.path.join(cgroup_root, ",".join(line.controllers), rel))
            dirs.extend(os.path.join(cgroup_root, c, rel) for c in line.controllers)
    if found is None:
        return None
    return ProcessJob(found, tuple(dict.fromkeys(dirs)), escaped)


def slurm_job_dirs(
    cgroup_root: str, job_id: str, uid: int | None, sluid: str | None = None
) -> list[str]:
    """Where a Slurm job's cgroup lives when no process told us (mapping-file jobs)."""
    dirs = []
    system_slice = os.path.join(cgroup_root, "system.slice")
    try:
        scopes = sorted(n for n in os.listdir(system_slice) if n.endswith("slurmstepd.scope"))
    except OSError:
        scopes = []
    dirs.extend(os.path.join(system_slice, scope, f"job_{job_id}") for scope in scopes)
    if sluid:
        dirs.extend(os.path.join(system_slice, scope, sluid) for scope in scopes)
    if uid is not None:
        for ctrl in ("cpu,cpuacct", "cpuacct", "memory"):
            dirs.append(os.path.join(cgroup_root, ctrl, "slurm", f"uid_{uid}", f"job_{job_id}"))
    return [d for d in dirs if os.path.isdir(d)]
