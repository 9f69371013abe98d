"""The job page's scheduler facts: requested walltime, how much of it the job used, when it
was submitted, how long it waited in the queue and how it ended. Each says where it comes
from, and "not reported" with the reason where it is absent (docs/web-ui.md)."""

import datetime as dt
from dataclasses import dataclass

from clusterui.jobs.choices import Scheduler
from clusterui.web.templatetags.web_format import duration, pct

NOT_REPORTED = "not reported"
AT_START = "from scontrol when the collector first saw the job"
AT_END = "from scontrol when the collector saw the job end"
# Why a Slurm job has no exit state: the collector asks only while slurmctld remembers it.
NO_EXIT = ("not reported: the collector asks scontrol when it sees the job end, and "
           "slurmctld forgets an ended job after MinJobAge (default 300 s); ClusterUI does "
           "not query Slurm accounting (sacct, which needs slurmdbd)")
# Why a job has none of the facts (they come from Slurm's scontrol only): said once.
WHY_NOT = {
    Scheduler.KUBERNETES: "ClusterUI asks no scheduler about Kubernetes pods",
    Scheduler.NONE: "the job ran under no scheduler",
}


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    source: str
    when: dt.datetime | None = None  # a time, which the template writes in the page's zone


def none_because(job) -> str | None:
    """Why the job has none of the facts (not a Slurm job), or None for a Slurm job."""
    if job.scheduler == Scheduler.SLURM:
        return None
    return WHY_NOT.get(job.scheduler, WHY_NOT[Scheduler.NONE])


def facts(job, elapsed: dt.timedelta, running: bool) -> list[Fact]:
    """A Slurm job's facts (none for another job: ``none_because``)."""
    if none_because(job):
        return []
    limit = job.time_limit_s
    out = [Fact("Requested walltime", duration(limit) if limit else NOT_REPORTED,
                f"Slurm's TimeLimit, {AT_START}" if limit else
                "not reported: no time limit (UNLIMITED), or scontrol could not be asked")]
    if limit:
        verb = "running for" if running else "ran"
        share = pct(100 * elapsed.total_seconds() / limit)
        out.append(Fact("Used of requested",
                        f"{verb} {duration(elapsed)} of {duration(limit)} requested ({share})",
                        "the job's duration on this page against its TimeLimit"))
    else:
        out.append(Fact("Used of requested", NOT_REPORTED, "needs the requested walltime"))
    submitted = job.submitted_at
    out.append(Fact("Submitted", "" if submitted else NOT_REPORTED,
                    f"Slurm's SubmitTime, {AT_START}" if submitted
                    else "not reported: scontrol could not be asked", submitted))  # fmt: skip
    wait = job.queue_wait
    out.append(Fact("Queue wait", duration(wait) if wait is not None else NOT_REPORTED,
                    "SubmitTime to StartTime" if wait is not None
                    else "needs both the submit and the start time"))  # fmt: skip
    out.append(_exit(job, running))
    return out


def _exit(job, running: bool) -> Fact:
    if job.exit_state:
        value = job.get_exit_state_display()
        if job.exit_signal:
            value += f", signal {job.exit_signal}"
        elif job.exit_code is not None:
            value += f", exit code {job.exit_code}"
        return Fact("Exit state", value, f"Slurm's JobState and ExitCode, {AT_END}")
    if running:
        return Fact("Exit state", "still running", "asked of scontrol when the job ends")
    return Fact("Exit state", NOT_REPORTED, NO_EXIT)
