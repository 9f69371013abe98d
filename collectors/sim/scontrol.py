"""A SIMULATED ``scontrol``: what Slurm 22.05's ``scontrol show job -o <id>`` prints of a
simulated job, so the collector's own scontrol code (``attribution/metadata.py``: the query,
its parsing, the cache, the end-of-job query) runs unchanged on the simulated cluster and
the demo's jobs carry scheduler facts: the requested walltime, the submit time, the queue
wait and how each job ended.

The line has the fields, order and formats of the real captures in
``tests/data/scontrol-22.05`` (Debian's slurm-wlm 22.05: no ``--json``, so the collector
falls back to the text form as it does there). The facts are made up from each job's seed,
like everything simulated: a queue wait of minutes (sometimes an hour or more), a limit
above the run for most jobs; a job that runs into its limit ends TIMEOUT (ExitCode 0:15),
a few end FAILED (1:0) or CANCELLED (0:0, as scancel leaves it), the rest COMPLETED. Like
slurmctld, it forgets a job ``MIN_JOB_AGE_S`` after its end.
"""

from __future__ import annotations

import math
import re
import subprocess
import time
from dataclasses import dataclass

from collectors.attribution.metadata import Scontrol
from collectors.client.report import slurm_duration
from collectors.sim.signals import unit

MIN_JOB_AGE_S = 300  # slurmctld's MinJobAge default
# Time limits users ask for, in hours (the smallest that covers the run is taken, with room).
LIMITS_H = (1, 2, 4, 8, 12, 24, 48, 72)


@dataclass(frozen=True)
class Facts:
    submit: float
    limit_s: int
    state: str  # the final JobState
    exit_code: str  # ExitCode as scontrol prints it, "code:signal"


def facts_of(job) -> Facts:
    """A simulated job's scheduler facts, from its seed (``node.SimJob``)."""
    run = max(60.0, job.end - job.start)
    u = unit(job.seed, 0x5C0)
    wait = (unit(job.seed, 0x5C1) * 300 if u < 0.7
            else 300 + unit(job.seed, 0x5C2) * 3300 if u < 0.95
            else 3600 + unit(job.seed, 0x5C3) * 5 * 3600)
    outcome = unit(job.seed, 0x5C4)
    if outcome < 0.08:  # ran into its limit: Slurm limits are whole minutes
        return Facts(job.start - wait, math.ceil(run / 60) * 60, "TIMEOUT", "0:15")
    room = run * (1.1 + unit(job.seed, 0x5C5))
    limit = next((h for h in LIMITS_H if h * 3600 >= room), LIMITS_H[-1]) * 3600
    state, code = (("FAILED", "1:0") if outcome < 0.16 else ("CANCELLED", "0:0")
                   if outcome < 0.22 else ("COMPLETED", "0:0"))
    return Facts(job.start - wait, limit, state, code)


def show_job(job, now: float) -> str | None:
    """``scontrol show job -o`` of the job at ``now``, or None once Slurm has forgotten it
    (or before it was submitted)."""
    f = facts_of(job)
    if now < f.submit or now > job.end + MIN_JOB_AGE_S:
        return None
    ended = now >= job.end
    state, code = (f.state, f.exit_code) if ended else ("RUNNING", "0:0")
    reason = {"TIMEOUT": "TimeLimit", "FAILED": "NonZeroExitCode"}.get(state, "None")
    end = job.end if ended else job.start + f.limit_s
    nodes = len(job.nodes)
    cpus = job.cpus_per_node * nodes
    gpus = job.gpus_per_node
    fields = [
        ("JobId", job.id), ("JobName", job.name), ("UserId", f"{job.user}({job.uid})"),
        ("GroupId", f"{job.user}({job.uid})"), ("MCS_label", "N/A"),
        ("Priority", str(4294901759 - (int(job.id) % 100000 if job.id.isdigit() else 0))),
        ("Nice", "0"),
        ("Account", job.account), ("QOS", "normal"), ("JobState", state), ("Reason", reason),
        ("Dependency", "(null)"), ("Requeue", "1"), ("Restarts", "0"), ("BatchFlag", "1"),
        ("Reboot", "0"), ("ExitCode", code),
        ("RunTime", slurm_duration(min(now, job.end) - job.start)),
        ("TimeLimit", slurm_duration(f.limit_s)), ("TimeMin", "N/A"),
        ("SubmitTime", _local(f.submit)), ("EligibleTime", _local(f.submit)),
        ("AccrueTime", _local(f.submit)), ("StartTime", _local(job.start)),
        ("EndTime", _local(end)), ("Deadline", "N/A"), ("SuspendTime", "None"),
        ("SecsPreSuspend", "0"), ("LastSchedEval", _local(job.start)), ("Scheduler", "Main"),
        ("Partition", job.partition), ("AllocNode:Sid", "login1:4242"),
        ("ReqNodeList", "(null)"), ("ExcNodeList", "(null)"),
        ("NodeList", hostlist(job.nodes)), ("BatchHost", job.nodes[0]),
        ("NumNodes", str(nodes)), ("NumCPUs", str(cpus)), ("NumTasks", str(nodes)),
        ("CPUs/Task", str(job.cpus_per_node)), ("ReqB:S:C:T", "0:0:*:*"),
        ("TRES", f"cpu={cpus},node={nodes},billing={cpus},gres/gpu={gpus * nodes}"),
        ("Socks/Node", "*"), ("NtasksPerN:B:S:C", "1:0:*:*"), ("CoreSpec", "*"),
        ("MinCPUsNode", str(job.cpus_per_node)), ("MinMemoryNode", "0"),
        ("MinTmpDiskNode", "0"), ("Features", "(null)"), ("DelayBoot", "00:00:00"),
        ("OverSubscribe", "OK"), ("Contiguous", "0"), ("Licenses", "(null)"),
        ("Network", "(null)"), ("Command", "(null)"), ("WorkDir", f"/home/{job.user}"),
        ("StdErr", "/dev/null"), ("StdIn", "/dev/null"), ("StdOut", "/dev/null"),
        ("Power", ""), ("TresPerNode", f"gres:gpu:{gpus}"),
    ]
    return " ".join(f"{k}={v}" for k, v in fields) + " \n"


def _local(t: float) -> str:
    """A time as scontrol prints it: local, to the second, without a zone."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def hostlist(names) -> str:
    """Node names as Slurm compresses them: gpu-a003,gpu-a004 -> gpu-a[003-004]."""
    parsed = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
    if not all(parsed) or len({m.group(1) for m in parsed}) != 1 or len(names) == 1:
        return ",".join(names)
    prefix, width = parsed[0].group(1), len(parsed[0].group(2))
    numbers = sorted(int(m.group(2)) for m in parsed)
    runs, start = [], numbers[0]
    for a, b in zip(numbers, numbers[1:] + [None], strict=True):
        if b != a + 1:
            runs.append(f"{start:0{width}d}" + (f"-{a:0{width}d}" if a != start else ""))
            start = b
    return f"{prefix}[{','.join(runs)}]"


class SimScontrol(Scontrol):
    """The collector's ``Scontrol`` with the simulator in place of the command: only
    ``_call`` differs. ``jobs()``: the simulated cluster's jobs; ``clock()``: its time."""

    def __init__(self, jobs, clock) -> None:
        super().__init__(executable="clusterui-sim-scontrol")  # never run: _call answers
        self._jobs, self._clock = jobs, clock

    def _call(self, *args: str) -> subprocess.CompletedProcess:
        command = ["scontrol", *args]
        if "--json" in args:  # as 22.05 answers it
            return subprocess.CompletedProcess(
                command, 1, "", "scontrol: unrecognized option '--json'\n")
        job_id = args[-1]
        job = next((j for j in reversed(self._jobs()) if j.id == job_id), None)
        line = show_job(job, self._clock()) if job is not None else None
        if line is None:
            return subprocess.CompletedProcess(
                command, 1, "", "slurm_load_jobs error: Invalid job id specified\n")
        return subprocess.CompletedProcess(command, 0, line, "")
