"""Job metadata (user, name, account, ...) from what the node can see, never invented.

Sources, first answer wins per field: the prolog mapping file, the job process's
environment (``SLURM_*``), ``scontrol show job <id> --json`` when scontrol is installed,
and for the user only, the passwd entry of the job's uid.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import shutil
import subprocess

log = logging.getLogger(__name__)

SCONTROL_TIMEOUT_S = 3.0

_ENV_KEYS = {
    "SLURM_JOB_USER": "user",
    "SLURM_JOB_NAME": "name",
    "SLURM_JOB_ACCOUNT": "account",
    "SLURM_JOB_PARTITION": "partition",
    "SLURM_JOB_START_TIME": "start_time",
    "SLURM_CPUS_ON_NODE": "cpus",
    "SLURM_JOB_NUM_NODES": "nodes",
    "SLURM_JOB_UID": "uid",
}


def meta_from_environ(procfs_root: str, pid: int) -> dict[str, str]:
    try:
        with open(os.path.join(procfs_root, str(pid), "environ"), "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key in _ENV_KEYS and value:
            out[_ENV_KEYS[key]] = value
    return out


def _number(value):
    """scontrol JSON numbers are plain ints (old) or {"set":..,"number":..} (new)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def parse_scontrol_json(text: str) -> dict[str, str]:
    try:
        jobs = json.loads(text).get("jobs") or []
    except (ValueError, AttributeError):
        return {}
    if not jobs:
        return {}
    job = jobs[0]
    out = {}
    for key, src in (("user", "user_name"), ("name", "name"), ("account", "account"),
                     ("partition", "partition")):  # fmt: skip
        if isinstance(job.get(src), str) and job[src]:
            out[key] = job[src]
    start = _number(job.get("start_time"))
    if start:
        out["start_time"] = str(start)
    nodes = _number(job.get("node_count"))
    if nodes:
        out["nodes"] = str(nodes)
        cpus = _number(job.get("cpus"))
        if cpus and nodes == 1:  # scontrol's cpus is the whole job's; per node only if 1
            out["cpus"] = str(cpus)
    uid = _number(job.get("user_id"))
    if uid is not None:
        out["uid"] = str(uid)
    return out


class Scontrol:
    """``scontrol show job <id> --json``, cached per job (failures too)."""

    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable or shutil.which("scontrol")
        self._cache: dict[str, dict[str, str]] = {}

    def lookup(self, job_id: str) -> dict[str, str]:
        if not self.executable:
            return {}
        if job_id not in self._cache:
            self._cache[job_id] = self._run(job_id)
        return self._cache[job_id]

    def _run(self, job_id: str) -> dict[str, str]:
        try:
            done = subprocess.run(
                [self.executable, "show", "job", job_id, "--json"],
                capture_output=True,
                text=True,
                timeout=SCONTROL_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.info("scontrol show job %s failed: %s", job_id, exc)
            return {}
        if done.returncode != 0:
            return {}
        return parse_scontrol_json(done.stdout)

    def forget(self, job_id: str) -> None:
        self._cache.pop(job_id, None)


def user_of_uid(uid: int | None) -> str | None:
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return None
