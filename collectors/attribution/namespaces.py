"""Telling an operator when the collector cannot see the job's processes, as seen on a real
GPU node (NVIDIA H100, driver 580.159.04, 2026-11-26; ``docs/collector.md``, "Run it in a
container or on Kubernetes"):

- **A private PID namespace** (a container without ``--pid=host`` / ``hostPID: true``): NVML
  lists no process of the GPU at all, not even with their host PIDs, so every GPU looks
  free of jobs while it is busy. Nothing in the collector's own namespace says so; a GPU
  busy for several ticks with no process listed does (``BusyWithoutProcesses``).
- **A private cgroup namespace** (``--cgroupns=private``, the default for containers on
  cgroup v2): ``/proc/<pid>/cgroup`` reads ``0::/../../system.slice/...``, relative to the
  collector's own cgroup. The job is still named by the path; ``cgroup.host_path`` drops
  the leading ``..`` so its directory is found under the host's cgroup mount when the two
  share only the root (a Slurm job's, seen), and the attributor says so once.

Each is said once per collector run, in the log.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

BUSY_TICKS = 3  # consecutive ticks of a busy GPU without a listed process before saying so


class BusyWithoutProcesses:
    """Watches NVML readings: a GPU busy (utilization or SM activity above 0) for
    ``BUSY_TICKS`` ticks in a row while NVML lists no process on it."""

    def __init__(self) -> None:
        self._streak: dict[str, int] = {}
        self.said = False

    def check(self, readings) -> None:
        if self.said:
            return
        for r in readings:
            busy = any((r.values.get(k) or 0) > 0 for k in ("util_pct", "sm_active_pct"))
            self._streak[r.uuid] = self._streak.get(r.uuid, 0) + 1 if busy and not r.pids else 0
            if self._streak[r.uuid] >= BUSY_TICKS:
                self.said = True
                log.warning(
                    "GPU %s has been busy for %d samples (%s %% utilization) while NVML lists "
                    "no process on it: NVML shows only the processes of the collector's PID "
                    "namespace. Run the collector in the host's (--pid=host; hostPID: true on "
                    "Kubernetes); until then GPUs are attributed by mapping files only.",
                    r.uuid, BUSY_TICKS, r.values.get("util_pct"))
                return
