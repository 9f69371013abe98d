from django.db import models


class Scheduler(models.TextChoices):
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"
    NONE = "none", "None"


class JobState(models.TextChoices):
    RUNNING = "running", "Running"
    ENDED = "ended", "Ended"


class ExitState(models.TextChoices):
    """How a job ended, as its scheduler says (contract 1's ``exit_state``; for Slurm its
    final JobState: COMPLETED is ``completed``, OUT_OF_MEMORY ``out_of_memory``...)."""

    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    TIMEOUT = "timeout", "Timed out"
    OUT_OF_MEMORY = "out_of_memory", "Out of memory"
    NODE_FAIL = "node_fail", "Node failure"
    PREEMPTED = "preempted", "Preempted"
    BOOT_FAIL = "boot_fail", "Boot failure"
    DEADLINE = "deadline", "Deadline reached"
