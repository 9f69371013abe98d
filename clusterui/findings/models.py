"""Findings (what a detector concluded about a job, with its evidence) and job efficiency."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from clusterui.findings.choices import FindingKind, FindingState, Severity, UtilSource


class FindingQuerySet(models.QuerySet):
    def visible_to(self, user):
        """A finding is visible to whoever may see its job (``Job.objects.visible_to``);
        findings about a node and no job are for staff."""
        from clusterui.jobs.models import Job

        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(job__in=Job.objects.visible_to(user))

    def open(self):
        return self.filter(state=FindingState.OPEN)


class Finding(models.Model):
    kind = models.CharField(max_length=32, choices=FindingKind.choices)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    state = models.CharField(max_length=16, choices=FindingState.choices,
                             default=FindingState.OPEN)
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, null=True, blank=True,
                            related_name="findings")
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, null=True, blank=True,
                             related_name="findings")
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.SET_NULL, null=True, blank=True,
                            related_name="findings")
    # The window the detector looked at when it last decided.
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    # The numbers that led to the finding, for the user to judge it: {"mean_util_pct": 7.9, ...}
    evidence = models.JSONField(default=dict)
    wasted_gpu_hours = models.FloatField(default=0.0)
    title = models.CharField(max_length=200)
    explanation = models.TextField()
    suggestion = models.TextField()
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                        null=True, blank=True, related_name="+")
    # Alerting: the severity last emailed, so an escalation is emailed again.
    emailed_at = models.DateTimeField(null=True, blank=True)
    emailed_severity = models.CharField(max_length=16, choices=Severity.choices, blank=True)

    objects = FindingQuerySet.as_manager()

    class Meta:
        ordering = ["-last_seen"]
        constraints = [
            # Deduplication: at most one open finding per job and kind.
            models.UniqueConstraint(fields=["job", "kind"], condition=Q(state="open"),
                                    name="finding_one_open_per_job_kind"),
            # And per node and kind for node-level findings.
            models.UniqueConstraint(fields=["node", "kind"],
                                    condition=Q(state="open", job__isnull=True),
                                    name="finding_one_open_per_node_kind"),
        ]
        indexes = [
            # The findings list and the overview: open findings, newest first.
            models.Index(fields=["state", "-last_seen"], name="finding_state_seen_idx"),
            # The alert sender's work queue: open findings not emailed at their severity.
            models.Index(fields=["last_seen"], name="finding_unemailed_idx",
                         condition=Q(state="open", emailed_at__isnull=True)),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} ({self.severity}) on {self.job or self.node}"

    @property
    def severity_color(self) -> str:
        return Severity(self.severity).color


class JobEfficiency(models.Model):
    """How well a job used what it held, computed by the detector pass for running jobs and
    once more when the job ends."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, primary_key=True,
                               related_name="efficiency")
    computed_at = models.DateTimeField()
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    gpus = models.IntegerField(default=0)
    gpu_hours_allocated = models.FloatField(default=0.0)
    gpu_hours_used = models.FloatField(default=0.0)
    gpu_hours_wasted = models.FloatField(default=0.0)
    util_source = models.CharField(max_length=16, choices=UtilSource.choices)
    util_mean_pct = models.FloatField(null=True)
    # {"<gpu uuid>": {"index": 0, "node": "gpu-a001", "mean": .., "p10": .., "p90": ..}}
    per_gpu = models.JSONField(default=dict)
    mem_peak_mib = models.FloatField(null=True)
    mem_capacity_mib = models.FloatField(null=True)
    energy_j = models.FloatField(null=True)
    net_bytes = models.FloatField(null=True, help_text="NIC bytes moved on the job's nodes")
    nic_util_mean_pct = models.FloatField(null=True)
    nic_util_peak_pct = models.FloatField(null=True)
    nvlink_util_mean_pct = models.FloatField(null=True)
    nvlink_util_peak_pct = models.FloatField(null=True)
    cpu_cores_mean = models.FloatField(null=True)
    cpus_allocated = models.IntegerField(null=True)

    class Meta:
        indexes = [
            # The jobs list sorted by waste, and "most wasteful jobs" on the overview.
            models.Index(fields=["-gpu_hours_wasted"], name="jobeff_wasted_idx"),
        ]

    def __str__(self):
        return f"efficiency of job {self.job_id}"

    @property
    def efficiency_pct(self) -> float | None:
        if not self.gpu_hours_allocated:
            return None
        return 100.0 * self.gpu_hours_used / self.gpu_hours_allocated
