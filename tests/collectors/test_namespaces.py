"""The collector in the wrong namespaces, as a real GPU node showed them (NVIDIA H100,
driver 580.159.04; ``collectors/attribution/namespaces.py``):

- from a private cgroup namespace, ``/proc/<pid>/cgroup`` of a Slurm job's process read
  ``0::/../../system.slice/slurmstepd.scope/job_4247/step_0/user/task_0``;
- from a private PID namespace, NVML listed no process on the busy GPU at all.
"""

import os

from collectors.attribution.cgroup import host_path, job_of_cgroup_text
from collectors.sim.nvml import SimNVML
from tests.collectors.sim_agent import run_agent
from tests.collectors.sysfs_trees import add_process, write
from tests.collectors.test_job_attribution import UUID0, make_attributor

SEEN = "0::/../../system.slice/slurmstepd.scope/job_4247/step_0/user/task_0\n"


def test_a_path_from_a_private_cgroup_namespace_still_names_the_job_and_its_host_directory():
    assert host_path("/../../system.slice/x") == ("system.slice/x", True)
    assert host_path("/system.slice/x") == ("system.slice/x", False)
    assert host_path("/..a/b") == ("..a/b", False)  # a name, not a step up
    hit = job_of_cgroup_text(SEEN, "/cg")
    assert (hit.job.scheduler, hit.job.id) == ("slurm", "4247") and hit.outside_namespace
    assert hit.cgroup_dirs == ("/cg/system.slice/slurmstepd.scope/job_4247",)


def test_its_cpu_and_memory_are_read_and_the_log_says_why_once(roots, caplog):
    add_process(roots["proc"], 536, SEEN)
    jdir = os.path.join(roots["cgroup"], "system.slice/slurmstepd.scope/job_4247")
    write(os.path.join(jdir, "cpu.stat"), "usage_usec 1000000\n")
    write(os.path.join(jdir, "memory.current"), "2535673856")
    att = make_attributor(roots)
    with caplog.at_level("WARNING", logger="collectors.attribution.attributor"):
        for ts in (10.0, 20.0):
            owners, _ = att.attribute(ts, [(0, UUID0, [536])])
            assert owners[UUID0].ref.id == "4247"
    assert att.usage(20.0) == [("4247", None, 2535673856)]  # a rate needs two readings
    write(os.path.join(jdir, "cpu.stat"), "usage_usec 40000000\n")
    assert att.usage(30.0) == [("4247", 3.9, 2535673856)]
    [said] = [r.getMessage() for r in caplog.records if r.name.endswith("attributor")]
    assert "own cgroup namespace" in said and "--cgroupns=host" in said and jdir in said


class HiddenProcesses(SimNVML):
    """NVML from a private PID namespace: the GPUs work, no process is listed."""

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return []

    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses
    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses


def test_busy_gpus_with_no_process_listed_are_said_once(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="collectors.attribution.namespaces"):
        _, _, batch, _ = run_agent(tmp_path, HiddenProcesses, gpus=2, mapping=False, ticks=5)
    assert batch["jobs"] == []  # nothing could name the job
    said = [r.getMessage() for r in caplog.records if r.name.endswith("namespaces")]
    assert len(said) == 1 and "NVML lists no process" in said[0] and "--pid=host" in said[0]


def test_nothing_is_said_while_the_processes_are_seen_or_too_soon(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="collectors.attribution.namespaces"):
        _, _, seen, _ = run_agent(tmp_path / "a", SimNVML, gpus=2, mapping=False, ticks=5)
        run_agent(tmp_path / "b", HiddenProcesses, gpus=2, mapping=False, ticks=2)
    assert [j["id"] for j in seen["jobs"]] == ["77"]
    assert [r for r in caplog.records if r.name.endswith("namespaces")] == []
