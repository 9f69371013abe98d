from django.db import models


class Scheduler(models.TextChoices):
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"
    NONE = "none", "None"


class JobState(models.TextChoices):
    RUNNING = "running", "Running"
    ENDED = "ended", "Ended"
