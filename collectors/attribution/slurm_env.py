"""A Slurm job's other GPUs on this node, from the environment of its process on one.

A job that holds 8 GPUs and runs on one shows a process on that one only: its 7 idle GPUs
have none, so without the prolog's mapping files nothing names their job, and the waste
ClusterUI is for goes unseen. Slurm writes the job's GPUs into its processes' environment,
as Slurm's own index of each (the position in the node's GRES list, the index the prolog's
file names use: ``slurm_gpus.py``):

- the batch step (and an interactive or external-launcher step) gets ``SLURM_JOB_GPUS``,
  the job's GPUs on this node, and no ``SLURM_STEP_ID``;
- a step that ``srun`` launches gets ``SLURM_STEP_GPUS``, the step's GPUs on this node,
  and ``SLURM_STEP_ID``; it also inherits ``SLURM_JOB_GPUS`` from the batch step's
  environment, which names the *batch* node's GPUs: taken only where the job has one node
  (``SLURM_JOB_NUM_NODES=1``, inherited too), where the batch node is this one. On the
  other nodes of a multi-node job a step's own GPUs are all its processes say.

SchedMD/slurm at 284c3b95f08a: ``src/slurmd/slurmstepd/slurmstepd.c`` (batch, interactive
and external steps get ``gres_g_job_set_env``, launched tasks ``gres_g_step_set_env``) and
``src/plugins/gres/common/gres_common.c``, ``gres_common_gpu_set_env``
(``SLURM_JOB_GPUS`` / ``SLURM_STEP_GPUS``, set from the GRES index list or unset). Seen on
Debian's Slurm 22.05.8 (``tests/slurm/test_slurm_jobs.py``): the batch step had
``SLURM_JOB_GPUS=0,1`` and no step id; ``srun --gres=gpu:1`` had ``SLURM_STEP_GPUS=0``,
``SLURM_STEP_ID=0``, the inherited ``SLURM_JOB_GPUS=0,1`` and ``SLURM_JOB_NUM_NODES=1``.

A process's environment is what it started with (``/proc/<pid>/environ``), so it is read
once per process. Its owner could have changed it before ``exec``; the GPUs it names are
only given to its own job where nothing better (a process on them, a mapping file, the
kubelet) names theirs.
"""

from __future__ import annotations

from collectors.attribution.metadata import read_environ

KEYS = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
        "SLURM_JOB_NUM_NODES")


def gpus_of_environ(env: dict[str, str]) -> tuple[str | None, frozenset[int]]:
    """(the job id, the Slurm GPU indexes on this node it names) from a process's
    ``KEYS``: its step's GPUs, and the job's where they are this node's (see above)."""
    found = parse_index_list(env.get("SLURM_STEP_GPUS", ""))
    if "SLURM_STEP_ID" not in env or env.get("SLURM_JOB_NUM_NODES") == "1":
        found |= parse_index_list(env.get("SLURM_JOB_GPUS", ""))
    return env.get("SLURM_JOB_ID"), found


def parse_index_list(text: str) -> frozenset[int]:
    """'0,1,3' (and 'a-b' ranges) -> {0, 1, 3}; anything else in it -> nothing at all."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            return frozenset()  # not Slurm's list: claim nothing
        out.update(range(int(low), int(high if dash else low) + 1))
    return frozenset(out)


class JobGpusFromEnviron:
    """Slurm GPU indexes per process, each process's environment read once."""

    def __init__(self, procfs_root: str) -> None:
        self.procfs_root = procfs_root
        self._seen: dict[int, tuple[str | None, frozenset[int]]] = {}

    def of(self, job_id: str, pids: list[int]) -> frozenset[int]:
        """The Slurm GPU indexes on this node that processes ``pids`` of job ``job_id``
        name (a process of another job, or of none, names nothing)."""
        found: set[int] = set()
        for pid in pids:
            if pid not in self._seen:
                self._seen[pid] = gpus_of_environ(read_environ(self.procfs_root, pid, KEYS))
            owner, indexes = self._seen[pid]
            if owner == job_id:
                found |= indexes
        return frozenset(found)

    def keep(self, pids) -> None:
        """Forget the processes not in ``pids`` (gone: a new one may take the number)."""
        live = set(pids)
        for pid in [p for p in self._seen if p not in live]:
            del self._seen[pid]
