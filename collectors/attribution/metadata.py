"""Job metadata (user, name, account, ...) from what the node can see, never invented.

Sources, first answer wins per field: the prolog mapping file, the job process's
environment (``SLURM_*``), ``scontrol show job <id> --json`` or its
one-line text form ``scontrol show job -o <id>`` (older Slurm, whose scontrol has no
``--json``) when scontrol is installed, and for the user only, the passwd entry of the
job's uid.

The scheduler facts come from scontrol alone: the requested walltime (TimeLimit) and
the submit time when the collector first sees the job, the exit state (JobState,
ExitCode) from one more query when it sees the job end. Slurm gives the slurmd Prolog
neither, and its Epilog only an exit code (SLURM_JOB_EXIT_CODE2), which reads 0:0 for a
cancelled or timed-out job (scontrol: 0:15) and comes without a state (seen on Slurm
22.05, tests/slurm): not used.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import re
import shutil
import subprocess
import time

log = logging.getLogger(__name__)

SCONTROL_TIMEOUT_S = 3.0

_ENV_KEYS = {
    "SLURM_JOB_USER": "user",
    "SLURM_JOB_NAME": "name",
    "SLURM_JOB_ACCOUNT": "account",
    "SLURM_JOB_PARTITION": "partition",
    "SLURM_JOB_START_TIME": "start_time",
    "SLURM_CPUS_ON_NODE": "cpus",  # a job step's environment has it; the prolog's has not
    "SLURM_JOB_NUM_NODES": "nodes",
    "SLURM_JOB_UID": "uid",
}


_said_denied = False


def read_environ(procfs_root: str, pid: int, keys) -> dict[str, str]:
    """The named variables of a process's environment that are set and not empty."""
    global _said_denied
    path = os.path.join(procfs_root, str(pid), "environ")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except PermissionError:
        if not _said_denied:
            _said_denied = True
            log.warning(
                "cannot read %s (permission denied): jobs found by their processes get "
                "their user, name and CPUs from mapping files and scontrol only. Reading "
                "another user's process environment takes CAP_SYS_PTRACE and "
                "CAP_DAC_READ_SEARCH together (the shipped systemd unit grants both)", path)
        return {}
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key in keys and value:
            out[key] = value
    return out


def meta_from_environ(procfs_root: str, pid: int) -> dict[str, str]:
    return {_ENV_KEYS[k]: v for k, v in read_environ(procfs_root, pid, _ENV_KEYS).items()}


def _number(value):
    """scontrol JSON numbers are plain ints (old) or {"set":..,"number":..} (new)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


# Slurm's job states in which a job has ended for good, as ``exit_state`` names them (the
# protocol's vocabulary). COMPLETING (epilogs still running), REQUEUED and the rest are
# not an end.
FINAL_STATES = {
    "COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled",
    "TIMEOUT": "timeout", "OUT_OF_MEMORY": "out_of_memory", "NODE_FAIL": "node_fail",
    "PREEMPTED": "preempted", "BOOT_FAIL": "boot_fail", "DEADLINE": "deadline",
}  # fmt: skip
# What a first look at a job keeps (the rest of a parse is the end query's).
START_KEYS = ("user", "name", "account", "partition", "start_time", "nodes", "cpus", "uid",
              "time_limit_s", "submit_time")  # fmt: skip


def exit_facts(parsed: dict[str, str]) -> dict[str, str] | None:
    """The exit state of a parsed job that has ended for good, with its exit code and
    signal where known; None while it has not (or Slurm no longer knows it)."""
    state = FINAL_STATES.get(parsed.get("state", ""))
    if state is None:
        return None
    out = {"exit_state": state}
    for key in ("exit_code", "exit_signal"):
        if key in parsed:
            out[key] = parsed[key]
    return out


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
    # Slurm's OpenAPI shapes (not run here: Debian's 22.05 has no --json): time_limit in
    # minutes, job_state a list (23.11+) or a string, exit_code {return_code, signal.id}.
    limit = _number(job.get("time_limit"))
    if limit:
        _set_limit(out, int(limit) * 60)
    submit = _number(job.get("submit_time"))
    if submit:
        out["submit_time"] = str(submit)
    state = job.get("job_state")
    state = state[0] if isinstance(state, list) and state else state
    if isinstance(state, str) and state:
        out["state"] = state
    code = job.get("exit_code")
    if isinstance(code, dict):
        signal = code.get("signal")
        for key, value in (("exit_code", code.get("return_code")),
                           ("exit_signal", signal.get("id") if isinstance(signal, dict) else None)):  # fmt: skip
            value = _number(value)
            if value is not None:
                out[key] = str(int(value))
    return out


# `scontrol show job -o` writes Key=Value pairs separated by spaces; a value may itself
# hold spaces (a job name), so a pair ends where the next known-shaped key begins.
_TEXT_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=(.*?)(?=\s+[A-Za-z][A-Za-z0-9_/:]*=|\s*$)")
_TEXT_UNSET = {"", "(null)", "Unknown", "N/A", "None"}


def parse_scontrol_text(text: str) -> dict[str, str]:
    """The first job of ``scontrol show job -o``: the same keys as the JSON form."""
    line = next((ln for ln in text.splitlines() if ln.startswith("JobId=")), "")
    pairs: dict[str, str] = {}
    for key, value in _TEXT_PAIR.findall(line):
        pairs.setdefault(key, value.strip())
    out = {}
    for key, src in (("name", "JobName"), ("account", "Account"), ("partition", "Partition")):
        if pairs.get(src, "") not in _TEXT_UNSET:
            out[key] = pairs[src]
    user = re.fullmatch(r"(.*)\((\d+)\)", pairs.get("UserId", ""))
    if user:
        if user.group(1):
            out["user"] = user.group(1)
        out["uid"] = user.group(2)
    nodes = pairs.get("NumNodes", "")
    if nodes.isdigit():
        out["nodes"] = nodes
        if nodes == "1" and pairs.get("NumCPUs", "").isdigit():
            out["cpus"] = pairs["NumCPUs"]  # the whole job's count: per node only if 1
    for key, src in (("start_time", "StartTime"), ("submit_time", "SubmitTime")):
        stamp = _local_time(pairs.get(src, ""))
        if stamp is not None:
            out[key] = stamp
    limit = _TIME_LIMIT.fullmatch(pairs.get("TimeLimit", ""))  # "UNLIMITED": no limit
    if limit:
        days, hours, minutes, seconds = (int(g or 0) for g in limit.groups())
        _set_limit(out, ((days * 24 + hours) * 60 + minutes) * 60 + seconds)
    if pairs.get("JobState", "") not in _TEXT_UNSET:
        out["state"] = pairs["JobState"]
    code = re.fullmatch(r"(\d+):(\d+)", pairs.get("ExitCode", ""))
    if code:
        out["exit_code"], out["exit_signal"] = code.groups()
    return out


# The backfill scheduler gives a job without a limit in a partition without one a year
# (backfill.c: YEAR_MINUTES), which scontrol then shows (tests/data/scontrol-22.05): that is
# no request, and no limit is sent.
BACKFILL_NO_LIMIT_S = 365 * 86400


def _set_limit(out: dict[str, str], seconds: int) -> None:
    if 0 < seconds != BACKFILL_NO_LIMIT_S:
        out["time_limit_s"] = str(seconds)


# TimeLimit as scontrol prints it: [days-]hours:minutes:seconds.
_TIME_LIMIT = re.compile(r"(?:(\d+)-)?(\d+):(\d\d):(\d\d)")


def _local_time(text: str) -> str | None:
    """scontrol's local time without zone ("2026-11-25T20:40:48") as Unix seconds."""
    if text in _TEXT_UNSET:
        return None
    try:
        return str(int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))))
    except ValueError:
        return None


class Scontrol:
    """``scontrol show job <id> --json`` (or ``-o`` text where scontrol has no --json),
    cached per job (failures too). ``executable``: None for the ``scontrol`` on the PATH,
    "" for none (nothing is asked)."""

    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable if executable is not None else shutil.which("scontrol")
        self._cache: dict[str, dict[str, str]] = {}
        self._json: bool | None = None  # does this scontrol take --json? (None: not known yet)

    def lookup(self, job_id: str) -> dict[str, str]:
        """What a first look tells of the job (cached: once per job)."""
        if not self.executable:
            return {}
        if job_id not in self._cache:
            found = self._run(job_id)
            self._cache[job_id] = {k: v for k, v in found.items() if k in START_KEYS}
        return self._cache[job_id]

    def at_end(self, job_id: str) -> dict[str, str] | None:
        """The job's exit state, exit code and signal once it has ended for good; None
        while it is still completing. {} when scontrol no longer knows it (slurmctld keeps
        an ended job MinJobAge seconds, default 300) or cannot be asked. Not cached."""
        if not self.executable:
            return {}
        found = self._run(job_id)
        if not found:
            return {}
        return exit_facts(found)

    def _run(self, job_id: str) -> dict[str, str]:
        if self._json is not False:
            done = self._call("show", "job", job_id, "--json")
            if done is not None and done.returncode == 0:
                self._json = True
                return parse_scontrol_json(done.stdout)
            if done is None or "option" not in done.stderr:
                return {}  # e.g. the job has gone: --json itself is fine
            self._json = False  # e.g. 22.05: "unrecognized option '--json'"
        done = self._call("show", "job", "-o", job_id)
        if done is None or done.returncode != 0:
            return {}
        return parse_scontrol_text(done.stdout)

    def _call(self, *args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run([self.executable, *args], capture_output=True, text=True,
                                  timeout=SCONTROL_TIMEOUT_S, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.info("scontrol %s failed: %s", " ".join(args), exc)
            return None

    def forget(self, job_id: str) -> None:
        self._cache.pop(job_id, None)


def user_of_uid(uid: int | None) -> str | None:
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return None
