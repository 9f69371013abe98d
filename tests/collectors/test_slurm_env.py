"""A Slurm job's idle GPUs from the environment of its process on a busy one
(``collectors/attribution/slurm_env.py``). The environments are what Debian's Slurm 22.05.8
gave (``tests/slurm/test_slurm_jobs.py``, which runs the real thing): the batch step
``SLURM_JOB_GPUS=0,1`` and no step id; an ``srun --gres=gpu:1`` step ``SLURM_STEP_GPUS=0``,
``SLURM_STEP_ID=0``, ``SLURM_JOB_NUM_NODES=1`` and the inherited ``SLURM_JOB_GPUS=0,1``."""

import os

import pytest

from collectors.attribution import JobAttributor
from collectors.attribution.metadata import Scontrol
from collectors.attribution.slurm_env import gpus_of_environ, parse_index_list
from collectors.attribution.slurm_gpus import SlurmGpuIndex
from tests.collectors.sysfs_trees import add_process, write

UUIDS = [f"GPU-0000000{i}-1111-2222-3333-444444444444" for i in range(4)]
BATCH = {"SLURM_JOB_ID": "7001", "SLURM_JOB_GPUS": "0,1,2,3", "SLURM_JOB_NUM_NODES": "1"}
STEP = {"SLURM_JOB_ID": "7001", "SLURM_STEP_ID": "0", "SLURM_STEP_GPUS": "0",
        "SLURM_JOB_GPUS": "0,1,2,3", "SLURM_JOB_NUM_NODES": "1"}


def cgroup(job: str, step: str = "0") -> str:
    return f"0::/system.slice/slurmstepd.scope/job_{job}/step_{step}/user/task_0\n"


@pytest.mark.parametrize(("env", "gpus"), [
    (BATCH, {0, 1, 2, 3}),  # the batch step: the job's GPUs
    (STEP, {0, 1, 2, 3}),  # a step of a one-node job: the inherited list is this node's
    # A step on another node of a two-node job: the inherited SLURM_JOB_GPUS is the batch
    # node's; only the step's own GPUs are this node's.
    ({**STEP, "SLURM_JOB_NUM_NODES": "2", "SLURM_STEP_GPUS": "4,5"}, {4, 5}),
    ({**STEP, "SLURM_JOB_NUM_NODES": "2", "SLURM_STEP_GPUS": ""}, set()),
    ({"SLURM_JOB_ID": "7001"}, set()),  # no list at all
])  # fmt: skip
def test_which_gpus_an_environment_names(env, gpus):
    assert gpus_of_environ(env) == ("7001", frozenset(gpus))


def test_a_list_that_is_not_slurms_names_nothing():
    assert parse_index_list("0,1,3") == {0, 1, 3}
    assert parse_index_list("0-2,5") == {0, 1, 2, 5}
    assert parse_index_list("0,GPU-1234") == frozenset()
    assert parse_index_list("") == frozenset()


def attribute(roots, gpus):
    att = JobAttributor(roots["proc"], roots["cgroup"], roots["jobmap"],
                        Scontrol(executable=""), SlurmGpuIndex(executable=""))  # fmt: skip
    owners, _ = att.attribute(10.0, [(i, UUIDS[i], pids) for i, pids in enumerate(gpus)])
    return {i: (owners[u].ref.id if owners[u] else None) for i, u in enumerate(UUIDS[:len(gpus)])}


def test_a_job_on_one_of_its_four_gpus_owns_the_other_three(roots):
    add_process(roots["proc"], 500, cgroup("7001", "batch"), BATCH)
    assert attribute(roots, [[500], [], [], []]) == {0: "7001", 1: "7001", 2: "7001", 3: "7001"}


def test_what_names_a_gpu_better_wins(roots):
    """A mapping file names GPU 3 for job 7002, a process of job 7003 runs on GPU 2: those
    are theirs, whatever job 7001's environment says."""
    add_process(roots["proc"], 500, cgroup("7001"), STEP)
    add_process(roots["proc"], 600, cgroup("7003"), {"SLURM_JOB_ID": "7003",
                                                     "SLURM_JOB_GPUS": "2"})
    write(os.path.join(roots["jobmap"], "3"), "7002 1000\n")
    assert attribute(roots, [[500], [], [600], []]) == {0: "7001", 1: "7001", 2: "7003",
                                                         3: "7002"}


def test_a_process_whose_environment_is_another_jobs_claims_nothing(roots):
    """Its cgroup says job 7001, its environment job 9999 (it was started from another
    job's shell, say): the environment is not 7001's word."""
    add_process(roots["proc"], 500, cgroup("7001", "batch"), {**BATCH, "SLURM_JOB_ID": "9999"})
    assert attribute(roots, [[500], [], [], []]) == {0: "7001", 1: None, 2: None, 3: None}


def test_a_step_on_the_second_node_of_a_job_claims_its_own_gpus_only(roots):
    env = {**STEP, "SLURM_JOB_NUM_NODES": "2", "SLURM_STEP_GPUS": "0,1"}
    add_process(roots["proc"], 500, cgroup("7001"), env)
    assert attribute(roots, [[500], [], [], []]) == {0: "7001", 1: "7001", 2: None, 3: None}
