"""MPS clients: the processes of a job that runs through CUDA's Multi-Process Service.

Under MPS, ``nvmlDeviceGetMPSComputeRunningProcesses_v3`` lists the client processes that
submit work through the MPS server (nvml.h: "processes with a Multi-Process Service (MPS)
compute context on a device"; it takes a GPU or a MIG device handle). A real H100 (driver
580.159.04) listed them in ``nvmlDeviceGetComputeRunningProcesses`` too, after the server
(``nvidia-cuda-mps-server``, a daemon outside any job's cgroup); the collector reads both
lists, so a driver that shows only the server in the compute list loses no job. The clients
are the job's own processes, so their host PIDs lead through ``/proc/<pid>/cgroup`` to the
job exactly as ordinary processes do (``cgroup.job_of_pid``); the server's PID leads nowhere
and is outvoted or ignored.

Where several jobs share one GPU through MPS, the GPU is attributed to the job with the
most client processes on it (``JobAttributor._from_processes`` votes): a GPU row carries
one job, and the collector's log names the jobs left out (``_say_shared``).
"""

from __future__ import annotations


def mps_client_pids(probe, handle) -> set[int]:
    """Host PIDs of the MPS clients on a GPU (or MIG device); empty where NVML has no MPS
    process list (older drivers: FunctionNotFound, cached as unsupported)."""
    procs = probe.call("mps_processes", "nvmlDeviceGetMPSComputeRunningProcesses", handle)
    return {int(proc.pid) for proc in procs or ()}
