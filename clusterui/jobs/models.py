"""Batch jobs, as the collectors attribute GPUs to them."""

from django.db import models
from django.db.models import F, Q

from clusterui.jobs import visibility
from clusterui.jobs.choices import ExitState, JobState, Scheduler


class JobQuerySet(models.QuerySet):
    def visible_to(self, user):
        """The one place that decides which jobs a user may see: staff see all, others
        their own (by their scheduler name on each cluster) and those of the accounts they
        lead (``clusterui/jobs/visibility.py``)."""
        if not user.is_authenticated:
            return self.none()
        rule = visibility.rule_for(user)
        return self if rule is None else self.filter(rule.q())


class Job(models.Model):
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="jobs")
    scheduler = models.CharField(max_length=16, choices=Scheduler.choices)
    external_id = models.CharField("job id", max_length=128)
    user = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=256, blank=True)
    account = models.CharField(max_length=64, blank=True)
    partition = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.RUNNING)
    started_at = models.DateTimeField(null=True)
    ended_at = models.DateTimeField(null=True)
    cpus = models.IntegerField(null=True, help_text="CPUs allocated (all nodes)")
    # Scheduler facts, as the collector got them from the scheduler (docs/protocol.md):
    # for Slurm, scontrol when it first saw the job (walltime, submit time) and when it saw
    # it end (exit state, code, signal). Null or empty: not reported.
    submitted_at = models.DateTimeField(null=True, blank=True)
    time_limit_s = models.IntegerField(null=True, blank=True,
                                       help_text="Requested walltime in seconds (null: none)")
    exit_state = models.CharField(max_length=16, choices=ExitState.choices, blank=True)
    exit_code = models.SmallIntegerField(null=True, blank=True)
    exit_signal = models.SmallIntegerField(null=True, blank=True)
    # Kubernetes: the pod's namespace and name, and the workload that owns it (a
    # Deployment, a Job, a StatefulSet...), as the node's kubelet said (docs/protocol.md).
    # Empty: not Kubernetes, or not reported. A namespace is Kubernetes' account.
    namespace = models.CharField(max_length=63, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    first_seen = models.DateTimeField()
    # Data time: the job's newest sample. Its inferred end when no collector reports it.
    last_seen = models.DateTimeField()
    # Arrival time: when a batch that carried the job last reached the server (kept to
    # within a minute). A job is ended for silence on this, so a back-fill or a spool
    # replay of its history does not end it while its batches are still arriving.
    reported_at = models.DateTimeField(null=True, blank=True)
    # The node whose report created the job: only its reports may change the job's user,
    # account and name once set (others may only fill them in while empty), so a node
    # cannot hand another user's job to someone else. See ``JobMetadataChange``.
    origin_node = models.ForeignKey("inventory.Node", on_delete=models.SET_NULL, null=True,
                                    blank=True, related_name="+")
    gpus = models.ManyToManyField("inventory.Gpu", through="JobGpu", related_name="jobs")

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            # A job is identified by (cluster, scheduler, id): ingest upserts on it.
            models.UniqueConstraint(
                fields=["cluster", "scheduler", "external_id"], name="job_identity_uniq"
            ),
        ]
        indexes = [
            # close_stale_jobs scans running jobs by last_seen.
            models.Index(
                fields=["last_seen"], name="job_running_last_seen_idx",
                condition=Q(state="running"),
            ),
            # ... and by arrival time.
            models.Index(
                fields=["reported_at"], name="job_running_reported_idx",
                condition=Q(state="running"),
            ),
            # A researcher's job list: their jobs, newest first.
            models.Index(fields=["user", "-started_at"], name="job_user_started_idx"),
            # An account leader's job list: the account's jobs, newest first.
            models.Index(fields=["account", "-started_at"], name="job_account_started_idx"),
            # The jobs list's default order (newest first, unknown starts last, then id):
            # page 1 of a million jobs is an index walk, not a sort.
            models.Index(F("started_at").desc(nulls_last=True), F("id").desc(),
                         name="job_started_page_idx"),
            # Jobs active in a range (overview, users page): those that ended after its
            # start, found without a scan of every job.
            models.Index(fields=["ended_at"], include=["user", "account", "started_at"],
                         name="job_ended_idx"),
            # A namespace's jobs (the jobs list filtered by namespace), newest first;
            # only Kubernetes jobs have one.
            models.Index(fields=["namespace", "-started_at"], name="job_namespace_started_idx",
                         condition=~Q(namespace="")),
        ]

    def __str__(self):
        return f"{self.scheduler}:{self.external_id}"

    @property
    def queue_wait(self):
        """Submit to start (a timedelta) where both are known and in that order, else None."""
        if self.submitted_at is None or self.started_at is None:
            return None
        wait = self.started_at - self.submitted_at
        return wait if wait.total_seconds() >= 0 else None


class JobGpu(models.Model):
    """A GPU allocated to a job (a multi-node job has GPUs on several nodes)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="allocations")
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.CASCADE, related_name="allocations")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        constraints = [
            # Ingest inserts allocations with ON CONFLICT on (job, gpu).
            models.UniqueConstraint(fields=["job", "gpu"], name="jobgpu_job_gpu_uniq"),
        ]

    def __str__(self):
        return f"{self.job_id} -> gpu {self.gpu_id}"


class JobMetadataChange(models.Model):
    """A report that would change a job's user, account or name once set: accepted when it
    came from the job's origin node, refused (the job keeps its value) from any other."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="metadata_changes")
    node = models.ForeignKey("inventory.Node", on_delete=models.SET_NULL, null=True,
                             related_name="+", help_text="The node whose report it was")
    field = models.CharField(max_length=16)  # "user", "account" or "name"
    old = models.CharField(max_length=256, blank=True)
    new = models.CharField(max_length=256, blank=True)
    accepted = models.BooleanField()
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            # The job's history of changes, newest first.
            models.Index(fields=["job", "-at"], name="jobmetachange_job_at_idx"),
        ]

    def __str__(self):
        verdict = "accepted" if self.accepted else "refused"
        return f"job {self.job_id} {self.field}: {self.old!r} -> {self.new!r} ({verdict})"
