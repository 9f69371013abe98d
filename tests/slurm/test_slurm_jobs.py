"""Real Slurm jobs (Debian's slurm-wlm) against the shipped prolog and epilog, and the
collector's attribution reading what they wrote. See tests/slurm/cluster.py for the set-up.

The node has two GRES GPUs; no NVIDIA GPU exists here, so the collector side is given the
GPUs NVML would list (index, UUID) and resolves Slurm's indexes itself (see
test_slurm_index_is_matched_through_the_device_not_nvml_index).
"""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from clusterui.web import scheduler_facts
from collectors.attribution import JobAttributor
from collectors.attribution.jobmap import parse_map_file
from collectors.attribution.metadata import Scontrol
from collectors.attribution.slurm_gpus import SlurmGpuIndex
from tests.factories import node_batch

pytestmark = pytest.mark.timeout(60)

UUID0 = "GPU-00000000-1111-2222-3333-444444444444"
UUID1 = "GPU-00000001-1111-2222-3333-444444444444"
NVML_GPUS = [(0, UUID0, []), (1, UUID1, [])]
NOBODY = 65534


def attribute(slurm, tmp_path):
    """What the collector attributes now: {uuid: job dict or None}, using the real
    scontrol of this cluster for what the prolog cannot know (the job name)."""
    attributor = JobAttributor("/nonexistent-proc", str(tmp_path), str(slurm.map_dir),
                               Scontrol())  # fmt: skip
    owners, _ = attributor.attribute(time.time(), NVML_GPUS)
    return {uuid: (job.as_dict([]) if job else None) for uuid, job in owners.items()}


def test_sbatch_job_is_recorded_named_and_removed(slurm, tmp_path):
    job = slurm.sbatch("-J", "llama-ft", "--gres=gpu:1", "-c", "2", "--wrap", "sleep 60")
    files = slurm.wait_files(["0"])
    entry = parse_map_file(files["0"])
    assert (entry.job_id, entry.uid) == (job, NOBODY)
    # No accounting storage here: Slurm gives no SLURM_JOB_ACCOUNT, so no account line.
    assert entry.meta == {"user": "nobody", "partition": "gpu", "cpus": "2", "nodes": "1"}
    assert slurm.map_files() == ["0"]

    seen = attribute(slurm, tmp_path)
    assert seen[UUID1] is None
    assert {k: seen[UUID0][k] for k in ("id", "scheduler", "user", "name", "account",
                                        "partition", "cpus")} == {
        "id": job, "scheduler": "slurm", "user": "nobody", "name": "llama-ft",
        "account": None, "partition": "gpu", "cpus": 2,
    }  # fmt: skip
    assert seen[UUID0]["started_at"] and abs(seen[UUID0]["started_at"] - time.time()) < 60

    slurm.cmd("scancel", job)
    slurm.wait_gone([job])
    assert slurm.map_files() == []


def test_prolog_environment_is_what_slurm_documents(slurm):
    """The ground truth the scripts are written against (docs/collector.md lists it)."""
    job = slurm.sbatch("-J", "env-check", "--gres=gpu:1", "--wrap", "sleep 60")
    slurm.wait_files(["0"])
    env = slurm.prolog_env(job)
    slurm.cmd("scancel", job)
    slurm.wait_gone([job])
    assert env["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd"
    assert (env["SLURM_JOB_ID"], env["SLURM_JOB_UID"], env["SLURM_JOB_USER"]) == (
        job, str(NOBODY), "nobody")
    assert (env["SLURM_JOB_GPUS"], env["SLURM_JOB_PARTITION"]) == ("0", "gpu")
    assert env["SLURM_JOB_CPUS_PER_NODE"] == "1" and env["SLURM_JOB_NUM_NODES"] == "1"
    assert env["SLURMD_NODENAME"] == slurm.node
    for absent in ("SLURM_JOB_NAME", "SLURM_CPUS_ON_NODE", "SLURM_JOB_ACCOUNT"):
        assert absent not in env


def test_srun_job_is_recorded_while_it_runs(slurm, tmp_path):
    run = subprocess.Popen(["srun", "--uid=nobody", f"--chdir={slurm.path('jobs')}",
                            "-J", "srun-step", "--gres=gpu:1", "sleep", "60"],
                           env=slurm.env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        entry = parse_map_file(slurm.wait_files(["0"])["0"])
        assert entry.uid == NOBODY and entry.meta["user"] == "nobody"
        assert attribute(slurm, tmp_path)[UUID0]["name"] == "srun-step"
        job = entry.job_id
        slurm.cmd("scancel", job)
        slurm.wait_gone([job])
    finally:
        run.kill()
        run.wait()
    assert slurm.map_files() == []


def test_salloc_allocation_is_recorded_before_any_step(slurm):
    """PrologFlags=Alloc: the prolog runs when the allocation is granted, so an idle
    interactive allocation is attributed before its first srun."""
    done = subprocess.run(["salloc", "--uid=nobody", "--no-shell", "-J", "interactive",
                           "--gres=gpu:1"], env=slurm.env, capture_output=True, text=True,
                          timeout=20, check=True)  # fmt: skip
    job = next(w for w in done.stderr.split() if w.isdigit())
    entry = parse_map_file(slurm.wait_files(["0"])["0"])
    assert entry.job_id == job
    steps = slurm.cmd("squeue", "-h", "-s", "-j", job, "-o", "%i")
    assert steps.split() in ([], [f"{job}.extern"])  # no step has run
    slurm.cmd("scancel", job)
    slurm.wait_gone([job])
    assert slurm.map_files() == []


def test_array_tasks_each_own_their_gpu(slurm, tmp_path):
    """The prolog sees each task's own job id (SLURM_ARRAY_* are not given to the slurmd
    Prolog); that id is what the cgroup path and the collector use."""
    array = slurm.sbatch("-J", "sweep", "--array=0-1", "--gres=gpu:1", "--wrap", "sleep 60")
    files = slurm.wait_files(["0", "1"])
    tasks = dict(line.split() for line in slurm.cmd(
        "squeue", "-h", "-j", array, "-o", "%A %i").splitlines())  # fmt: skip
    assert sorted(tasks.values()) == [f"{array}_0", f"{array}_1"]
    owners = {parse_map_file(text).job_id for text in files.values()}
    assert owners == set(tasks)
    seen = attribute(slurm, tmp_path)
    assert {seen[UUID0]["id"], seen[UUID1]["id"]} == set(tasks)
    assert seen[UUID0]["name"] == seen[UUID1]["name"] == "sweep"
    slurm.cmd("scancel", array)
    slurm.wait_gone(list(tasks))
    assert slurm.map_files() == []


def test_two_gpu_job_owns_both(slurm, tmp_path):
    job = slurm.sbatch("-J", "ddp", "--gres=gpu:2", "--wrap", "sleep 60")
    files = slurm.wait_files(["0", "1"])
    assert {parse_map_file(t).job_id for t in files.values()} == {job}
    assert slurm.prolog_env(job)["SLURM_JOB_GPUS"] == "0,1"
    seen = attribute(slurm, tmp_path)
    assert seen[UUID0]["id"] == seen[UUID1]["id"] == job
    assert seen[UUID0]["name"] == "ddp"
    slurm.cmd("scancel", job)
    slurm.wait_gone([job])
    assert slurm.map_files() == []


def test_epilog_leaves_a_newer_jobs_file(slurm):
    """A GPU handed to a new job before the old epilog ran keeps the new job's file."""
    first = slurm.sbatch("-J", "first", "--gres=gpu:1", "--wrap", "sleep 60")
    slurm.wait_files(["0"])
    foreign = slurm.map_dir / "1"
    foreign.write_text("999999 1000\n")
    slurm.cmd("scancel", first)
    slurm.wait_gone([first])
    assert slurm.map_files() == ["1"]
    foreign.unlink()


@pytest.fixture(scope="module")
def real_prolog_env(slurm):
    job = slurm.sbatch("-J", "shape", "--gres=gpu:1", "--wrap", "sleep 60")
    slurm.wait_files(["0"])
    env = slurm.prolog_env(job)
    slurm.cmd("scancel", job)
    slurm.wait_gone([job])
    return env


@pytest.mark.parametrize(("nodelist", "cpus_per_node", "expected"), [
    ("n[1-3],{node}", "2(x3),1", "1"),
    ("{node},n[1-3]", "2(x3),1", "2"),
    ("n1,{node},n[2-3]", "8,4(x3)", "4"),
])  # fmt: skip
def test_cpus_are_this_nodes_share_of_a_multi_node_job(real_prolog_env, slurm, tmp_path,
                                                        nodelist, cpus_per_node, expected):  # fmt: skip
    """One slurmd cannot run a multi-node job, so the prolog runs here in the environment
    a real job's prolog got, reshaped the way Slurm writes it for a 4-node job
    (SLURM_JOB_CPUS_PER_NODE in node-list order, runs as "2(x3)"); scontrol expands the
    node list with this cluster's slurm.conf."""
    env = dict(real_prolog_env)
    env.update(SLURM_JOB_NUM_NODES="4", SLURM_NODELIST=nodelist.format(node=slurm.node),
               SLURM_JOB_CPUS_PER_NODE=cpus_per_node, PATH="/usr/bin:/bin")  # fmt: skip
    script = slurm.path("etc", "prolog.d", "clusterui-prolog.sh")
    subprocess.run([str(script), str(tmp_path)], env=env, check=True, timeout=10)
    entry = parse_map_file((tmp_path / "0").read_text())
    assert (entry.meta["cpus"], entry.meta["nodes"]) == (expected, "4")


def test_slurm_index_is_matched_through_the_device_not_nvml_index(slurm, tmp_path):
    """Slurm's GPU 0 is the first File= of gres.conf, /dev/nvidia4 here. NVML (simulated:
    there is no GPU) numbers by PCI bus id and says its GPU 0 has minor number 5 and its
    GPU 1 minor number 4, so the job's GPU is NVML's 1. The collector asks the real
    `slurmd -G` for the device files and matches minor numbers."""
    job = slurm.sbatch("-J", "one-gpu", "--gres=gpu:1", "--wrap", "sleep 60")
    slurm.wait_files(["0"])
    assert slurm.prolog_env(job)["SLURM_JOB_GPUS"] == "0"
    index = SlurmGpuIndex()
    assert index.minors() == [4, 5]  # from the real slurmd -G and the real device files
    attributor = JobAttributor("/nonexistent-proc", str(tmp_path), str(slurm.map_dir),
                               Scontrol(), index)  # fmt: skip
    owners, _ = attributor.attribute(time.time(), NVML_GPUS, {UUID0: 5, UUID1: 4})
    assert owners[UUID0] is None
    assert owners[UUID1].ref.id == job
    slurm.cmd("scancel", job)
    slurm.wait_gone([job])


def follow_to_the_end(slurm, tmp_path, job: str, timeout: float = 40):
    """Sample as the collector does (every 0.2 s here) from the job's start until its end
    and exit state are known: (the first report, [the reports of its end])."""
    attributor = JobAttributor("/nonexistent-proc", str(tmp_path), str(slurm.map_dir),
                               Scontrol())  # fmt: skip
    first, ends = None, []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owners, ended = attributor.attribute(time.time(), NVML_GPUS)
        if first is None and owners[UUID0] is not None:
            first = owners[UUID0].as_dict([0])
        ends.extend(j.as_dict([]) for j in ended if j.ref.id == job)
        if ends and ends[-1].get("exit_state"):
            return first, ends
        time.sleep(0.2)
    raise AssertionError(f"job {job} not seen to its end: first {first}, ends {ends}"
                         f"\n{slurm.logs()}")


@pytest.mark.django_db(transaction=True)
def test_walltime_queue_wait_and_exit_state_end_to_end(slurm, tmp_path, clean_samples):
    """sbatch --time=4:00 of a script that exits 3: the collector's attribution carries
    TimeLimit and SubmitTime from its first scontrol query and FAILED 3:0 from the one at
    the end (asked again while Slurm says COMPLETING); ingest stores them and the job page
    says each with its source."""
    job = slurm.sbatch("-J", "walltime", "--time=4:00", "--gres=gpu:1", "--wrap",
                       "sleep 4; exit 3")  # fmt: skip
    slurm.wait_files(["0"])
    hold = slurm.path("hold-epilog")
    hold.touch()  # a slow site epilog after ours: COMPLETING for 3 s once the files go
    try:
        first, ends = follow_to_the_end(slurm, tmp_path, job)
    finally:
        hold.unlink()
    assert first["id"] == job and first["time_limit_s"] == 240
    assert "exit_state" not in first  # a running job's ExitCode=0:0 is no exit
    assert 0 <= first["started_at"] - first["submitted_at"] < 30
    # Sent ended at once, without a state (Slurm said COMPLETING), then again with it.
    assert len(ends) == 2 and ends[0]["ended_at"] == ends[1]["ended_at"]
    assert "exit_state" not in ends[0]
    last = ends[-1]
    assert (last["exit_state"], last["exit_code"], last["exit_signal"]) == ("failed", 3, 0)

    start = time.time() - 30
    running = node_batch("gpu-slurm", seq=1, samples=3, start=start, gpus=1, job=job)
    running["jobs"] = [first]
    envelopes = [running]
    for seq, report in enumerate(ends, start=2):  # the state learned a batch later
        envelopes.append(node_batch("gpu-slurm", seq=seq, samples=1, start=start + 30, gpus=1,
                                    job=None))  # fmt: skip
        envelopes[-1]["jobs"] = [report]
    for envelope in envelopes:
        result = ingest_envelope(envelope)
        assert result is not None and result.rejected == 0
    stored = Job.objects.get(external_id=job)
    assert (stored.time_limit_s, stored.exit_state, stored.exit_code) == (240, "failed", 3)
    assert stored.queue_wait.total_seconds() == first["started_at"] - first["submitted_at"]
    shown = {fact.label: fact for fact in scheduler_facts.facts(
        stored, stored.ended_at - stored.started_at, running=False)}
    assert shown["Requested walltime"].value == "4 min"
    assert "TimeLimit, from scontrol" in shown["Requested walltime"].source
    assert shown["Exit state"].value == "Failed, exit code 3"


def test_no_time_limit_is_sent_as_none(slurm, tmp_path):
    """No --time in a partition without MaxTime is no figure at all: scontrol says
    TimeLimit=UNLIMITED, or 365-00:00:00 when the backfill scheduler started the job."""
    job = slurm.sbatch("-J", "open-ended", "-p", "nolimit", "--gres=gpu:1", "--wrap",
                       "sleep 60")  # fmt: skip
    slurm.wait_files(["0"])
    seen = attribute(slurm, tmp_path)[UUID0]
    shown = slurm.cmd("scontrol", "show", "job", "-o", job)
    assert re.search(r" TimeLimit=(UNLIMITED|365-00:00:00) ", shown), shown
    assert seen["id"] == job and "time_limit_s" not in seen
    assert seen["submitted_at"] > 0
    slurm.cmd("scancel", job)
    slurm.wait_gone([job])


def job_process(slurm, job: str, timeout: float = 20) -> int:
    """The pid of a process of ``job`` (its sleep) as Slurm started it, found by its real
    environment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    env = fh.read().split(b"\0")
                with open(f"/proc/{name}/comm") as fh:
                    comm = fh.read().strip()
            except OSError:
                continue
            if comm == "sleep" and f"SLURM_JOB_ID={job}".encode() in env:
                return int(name)
        time.sleep(0.1)
    raise AssertionError(f"no sleep process of job {job}\n{slurm.logs()}")


def procfs_with(tmp_path, pid: int, job: str, step: str) -> str:
    """A /proc holding the process's real environment, and the cgroup Slurm's cgroup v2
    plugin gives a task (the layout of docs/collector.md, "Job attribution"; this test
    cluster runs proctrack/linuxproc, so the real process is in no job cgroup)."""
    proc = tmp_path / "proc" / str(pid)
    proc.mkdir(parents=True)
    (proc / "environ").write_bytes(Path(f"/proc/{pid}/environ").read_bytes())
    (proc / "cgroup").write_text(
        f"0::/system.slice/slurmstepd.scope/job_{job}/step_{step}/user/task_0\n")
    return str(tmp_path / "proc")


@pytest.mark.parametrize("how", ["batch", "srun"])
def test_a_jobs_idle_gpu_is_found_from_its_busy_ones_environment(slurm, tmp_path, how):
    """A job holds two GPUs and runs on one (the batch script itself, or an srun step
    given one of them). No mapping file is read (an empty directory: a site without the
    prolog): the process's real environment, as Slurm set it, names the job's other GPU,
    matched to NVML through the device's minor number as the prolog's files are
    (Slurm's GPU 0 is NVML's GPU 1 here)."""
    command = "exec sleep 60" if how == "batch" else "srun --gres=gpu:1 sleep 60"
    job = slurm.sbatch("-J", "holds-two", "--gres=gpu:2", "--wrap", command)
    try:
        pid = job_process(slurm, job)
        env = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text()
                   .split("\0") if "=" in item)
        if how == "batch":
            assert env["SLURM_JOB_GPUS"] == "0,1" and "SLURM_STEP_ID" not in env
        else:  # the step's GPU, and the job's inherited from the batch step
            assert (env["SLURM_STEP_GPUS"], env["SLURM_JOB_GPUS"]) == ("0", "0,1")
        procfs = procfs_with(tmp_path, pid, job, "batch" if how == "batch" else "0")
        no_prolog = tmp_path / "no-prolog"
        no_prolog.mkdir()
        attributor = JobAttributor(procfs, str(tmp_path / "cgroup"), str(no_prolog),
                                   Scontrol(), SlurmGpuIndex())  # fmt: skip
        busy = [(0, UUID0, []), (1, UUID1, [pid])]  # NVML GPU 1 is Slurm's 0: the busy one
        owners, _ = attributor.attribute(time.time(), busy, {UUID0: 5, UUID1: 4})
        assert owners[UUID1].ref.id == job
        assert owners[UUID0] is owners[UUID1]  # the idle one, the same job
    finally:
        slurm.cmd("scancel", job)
        slurm.wait_gone([job])
