"""Findings (what a detector concluded about a job, with its evidence) and job efficiency."""

from django.conf import settings
from django.db import models
from django.db.models import Case, F, IntegerField, Q, Value, When

from clusterui.findings.choices import FindingKind, FindingState, Severity, UtilSource

# A finding's severity as a number to sort by (critical first when descending).
SEVERITY_RANK = Case(*[When(severity=s.value, then=Value(s.rank)) for s in Severity],
                     output_field=IntegerField())


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
            # The overview's top open findings: its exact order, so the page reads six
            # index entries instead of sorting every open finding.
            models.Index(SEVERITY_RANK.desc(), F("wasted_gpu_hours").desc(),
                         F("last_seen").desc(), condition=Q(state="open"),
                         name="finding_open_rank_idx"),
            # The alert sender's work queue: open findings not emailed at their severity.
            models.Index(fields=["last_seen"], name="finding_unemailed_idx",
                         condition=Q(state="open", emailed_at__isnull=True)),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} ({self.severity}) on {self.job or self.node}"

    @property
    def severity_color(self) -> str:
        return Severity(self.severity).color

    @property
    def waste_is_whole_run(self) -> bool:
        """Whether ``wasted_gpu_hours`` is the job's waste since it started, the time before
        its first sample taken to be like the time since (a straggler's lost GPU-hours are
        its window's own)."""
        return self.kind in WHOLE_RUN_WASTE_KINDS


# Samples covering less of a job's run than this: its figures are partly the measured
# time's stand-in for the rest, and the pages, emails and report say so.
MEASURED_ENOUGH_PCT = 95.0
# The findings whose waste is the job's whole-run figure (``JobEfficiency``'s), and whose
# severity counts only its measured share (``detectors.base.severity_from_waste``).
WHOLE_RUN_WASTE_KINDS = frozenset({FindingKind.LOW_UTILIZATION, FindingKind.IDLE_GPU,
                                   FindingKind.COMM_BOUND, FindingKind.INPUT_BOUND,
                                   FindingKind.BUSY_NOT_BUSY})


class JobEfficiency(models.Model):
    """How well a job used what it held, computed by the detector pass for running jobs and
    once more when the job ends."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, primary_key=True,
                               related_name="efficiency")
    computed_at = models.DateTimeField()
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    # When the job's samples begin (its first sample less one sampling interval): the
    # window starts at the scheduler's start, and before this the figures are the mean
    # over the samples standing in for time nobody measured. Null: not computed since the
    # field was added.
    measured_from = models.DateTimeField(null=True)
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
    # The detector pass adds each job's new samples to running sums (``accum``: per GPU
    # counts, sums, a 1 %-bin histogram of busy, the energy counter's last value; per job
    # NIC and host CPU sums) instead of re-reading the job's whole history every minute.
    # ``through``: the newest sample time already added. ``finalized_at``: when the pass
    # that followed the job's end closed its books (nothing more is added after it).
    through = models.DateTimeField(null=True)
    accum = models.JSONField(default=dict)
    finalized_at = models.DateTimeField(null=True)
    # The data time up to which the window detectors last judged the job; null while it has
    # never been judged (inside its grace period, too few samples, ended too early): its
    # page must then not say that nothing was found.
    judged_at = models.DateTimeField(null=True)

    class Meta:
        indexes = [
            # "Most wasteful jobs" on the overview.
            models.Index(fields=["-gpu_hours_wasted"], name="jobeff_wasted_idx"),
            # The jobs list sorted by waste: its exact order (nulls last, then newest job),
            # so a page is an index walk that stops after it (clusterui.jobs.listing).
            models.Index(F("gpu_hours_wasted").desc(nulls_last=True), F("job_id").desc(),
                         name="jobeff_wasted_page_idx"),
            # GPU-hours wasted since midnight (the overview): an index-only scan of the
            # windows that reach into today, never the rows with their JSON.
            models.Index(fields=["window_end"], include=["window_start", "gpu_hours_wasted",
                                                         "measured_from"],
                         condition=Q(gpu_hours_wasted__gt=0), name="jobeff_waste_today_idx"),
            # Usage per user or account over a range (overview, users page): each active
            # job's figures, and what of them was measured, from the index, not its row.
            models.Index(fields=["job"], include=["gpu_hours_allocated", "gpu_hours_used",
                                                  "gpu_hours_wasted", "window_start",
                                                  "window_end", "measured_from"],
                         name="jobeff_job_usage_idx"),
        ]

    def __str__(self):
        return f"efficiency of job {self.job_id}"

    @property
    def efficiency_pct(self) -> float | None:
        """Used over the GPU-hours judged (used + wasted): that is all allocated ones except
        MIG instances that reported no busy figure (``efficiency.py``)."""
        judged = (self.gpu_hours_used or 0.0) + (self.gpu_hours_wasted or 0.0)
        if not self.gpu_hours_allocated or not judged:
            return None
        return 100.0 * self.gpu_hours_used / judged

    @property
    def measured_pct(self) -> float | None:
        """The share of the window the job's samples cover, in percent (None: unknown)."""
        if self.measured_from is None or self.window_end <= self.window_start:
            return None
        whole = (self.window_end - self.window_start).total_seconds()
        covered = (self.window_end - max(self.measured_from, self.window_start)).total_seconds()
        return 100.0 * max(0.0, covered) / whole

    @property
    def partly_measured(self) -> bool:
        """True when the samples leave more than a twentieth of the window unmeasured (the
        collector came after the job started, or no process or mapping file named it)."""
        pct = self.measured_pct
        return pct is not None and pct < MEASURED_ENOUGH_PCT


class GpuSlice(models.Model):
    """One allocated GPU over one minute of its job: the sums a detector window adds up.

    Written by the detector pass with one ``INSERT ... SELECT ... ON CONFLICT`` from the raw
    samples (``clusterui.findings.slices``) and kept only as long as a window reaches back;
    the counts make every mean, share and correlation exact over any run of minutes,
    whatever the sampling interval. Percentages are 0-100; NVLink is max(tx, rx) against
    the GPU's NVLink capacity.
    """

    # No separate FK indexes: the unique (job, gpu, bucket) index leads with the job.
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+",
                            db_index=False)
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.CASCADE, related_name="+",
                            db_index=False)
    bucket = models.DateTimeField(help_text="Start of the minute")
    samples = models.IntegerField(default=0)
    util_sum = models.FloatField(default=0.0)
    util_n = models.IntegerField(default=0)
    sm_sum = models.FloatField(default=0.0)
    sm_n = models.IntegerField(default=0)
    busy_sum = models.FloatField(default=0.0)
    busy_n = models.IntegerField(default=0)
    nvlink_sum = models.FloatField(default=0.0)
    nvlink_n = models.IntegerField(default=0)
    nvlink_max = models.FloatField(null=True)
    nvlink_high = models.IntegerField(default=0, help_text="Samples at or above the "
                                      "communication-bound traffic threshold")
    # Busy (x) against NVLink (y), sample by sample: sums for a lag-0 correlation.
    nvc_n = models.IntegerField(default=0)
    nvc_x = models.FloatField(default=0.0)
    nvc_y = models.FloatField(default=0.0)
    nvc_xx = models.FloatField(default=0.0)
    nvc_yy = models.FloatField(default=0.0)
    nvc_xy = models.FloatField(default=0.0)
    throttled = models.IntegerField(default=0, help_text="Samples with a real throttle reason")
    throttle_bits = models.BigIntegerField(default=0, help_text="OR of those reasons")
    throttled_clock_sum = models.FloatField(default=0.0)
    throttled_clock_n = models.IntegerField(default=0)
    free_clock_max = models.FloatField(null=True, help_text="Highest SM clock while busy and "
                                       "not throttled (MHz)")

    class Meta:
        constraints = [
            # The pass upserts on it, and windows read a job's minutes through it.
            models.UniqueConstraint(fields=["job", "gpu", "bucket"], name="gpuslice_uniq"),
        ]
        indexes = [
            # Pruning minutes that no window reaches any more.
            models.Index(fields=["bucket"], name="gpuslice_bucket_idx"),
        ]

    def __str__(self):
        return f"job {self.job_id} gpu {self.gpu_id} at {self.bucket:%Y-%m-%d %H:%M}"


class JobSlice(models.Model):
    """One job over one minute: its nodes' fabric NICs and its host CPU, and busy against
    NIC traffic node-sample by node-sample (see ``GpuSlice``)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+",
                            db_index=False)
    bucket = models.DateTimeField(help_text="Start of the minute")
    nic_n = models.IntegerField(default=0)
    nic_sum = models.FloatField(default=0.0)
    nic_max = models.FloatField(null=True)
    nic_high = models.IntegerField(default=0)
    nic_bytes = models.FloatField(default=0.0)
    nc_n = models.IntegerField(default=0)
    nc_x = models.FloatField(default=0.0)
    nc_y = models.FloatField(default=0.0)
    nc_xx = models.FloatField(default=0.0)
    nc_yy = models.FloatField(default=0.0)
    nc_xy = models.FloatField(default=0.0)
    cpu_n = models.IntegerField(default=0)
    cpu_frac_sum = models.FloatField(default=0.0, help_text="Sum of cores used / cores "
                                     "allocated, per node sample")

    class Meta:
        constraints = [
            # The pass upserts on it, and windows read a job's minutes through it.
            models.UniqueConstraint(fields=["job", "bucket"], name="jobslice_uniq"),
        ]
        indexes = [
            # Pruning minutes that no window reaches any more.
            models.Index(fields=["bucket"], name="jobslice_bucket_idx"),
        ]

    def __str__(self):
        return f"job {self.job_id} at {self.bucket:%Y-%m-%d %H:%M}"


class NodeSlice(models.Model):
    """One node of a multi-node job over one minute: its fabric NICs' traffic, so a window
    can compare the job's nodes (the straggler detector; see ``GpuSlice``)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+",
                            db_index=False)
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="+",
                             db_index=False)
    bucket = models.DateTimeField(help_text="Start of the minute")
    nic_n = models.IntegerField(default=0)
    nic_sum = models.FloatField(default=0.0, help_text="Sum of the node's fabric traffic, % "
                                "of its links' capacity, per node sample")

    class Meta:
        constraints = [
            # The pass upserts on it, and windows read a job's minutes through it.
            models.UniqueConstraint(fields=["job", "node", "bucket"], name="nodeslice_uniq"),
        ]
        indexes = [
            # Pruning minutes that no window reaches any more.
            models.Index(fields=["bucket"], name="nodeslice_bucket_idx"),
        ]

    def __str__(self):
        return f"job {self.job_id} node {self.node_id} at {self.bucket:%Y-%m-%d %H:%M}"


class UsageHour(models.Model):
    """GPU-hours per (user, account) of the jobs that ended in one clock hour (UTC), or that
    have not ended (``hour`` = infinity): the sums the overview's "wasted by user" table
    reads instead of every active job (``clusterui.findings.usage_rollup``).

    The sums of ``UsageJob`` rows by group, kept by the detector pass; see ``UsageJob``.
    ``hour`` may be infinity, which Python cannot hold: read these rows in SQL."""

    user = models.CharField(max_length=64)
    account = models.CharField(max_length=64)
    hour = models.DateTimeField(help_text="Start of the hour the jobs ended in; infinity for "
                                "jobs that have not ended")
    jobs = models.IntegerField(default=0)
    gpu_hours_allocated = models.FloatField(default=0.0)
    gpu_hours_used = models.FloatField(default=0.0)
    gpu_hours_wasted = models.FloatField(default=0.0)
    # The allocated GPU-hours the jobs' samples cover (``JobEfficiency.measured_pct``).
    gpu_hours_measured = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            # The pass adds each change with ON CONFLICT on it.
            models.UniqueConstraint(fields=["user", "account", "hour"],
                                    name="usagehour_uniq"),
        ]
        indexes = [
            # The overview: every group's hours from the range's start on.
            models.Index(fields=["hour"], include=["user", "account", "jobs",
                                                   "gpu_hours_allocated", "gpu_hours_used",
                                                   "gpu_hours_wasted", "gpu_hours_measured"],
                         name="usagehour_measured_idx"),
        ]

    def __str__(self):
        return f"{self.user}/{self.account} at {self.hour}"


class UsageJob(models.Model):
    """One job as ``UsageHour`` counts it now: its group, end hour and figures
    (``JobEfficiency``'s, or 0). The detector pass rewrites the rows of the jobs a trigger
    has marked changed (``UsageDirty``), then re-adds every ``UsageHour`` group they left or
    joined from these rows (so no rounding accumulates); a reader takes a marked job's row
    away and adds its current state."""

    job_id = models.BigIntegerField(primary_key=True)  # no FK: the job may be deleted
    user = models.CharField(max_length=64)
    account = models.CharField(max_length=64)
    hour = models.DateTimeField()
    gpu_hours_allocated = models.FloatField(default=0.0)
    gpu_hours_used = models.FloatField(default=0.0)
    gpu_hours_wasted = models.FloatField(default=0.0)
    gpu_hours_measured = models.FloatField(default=0.0)

    class Meta:
        indexes = [
            # The pass re-adds the groups its changes touched from their jobs' rows.
            models.Index(fields=["user", "account", "hour"],
                         include=["gpu_hours_allocated", "gpu_hours_used", "gpu_hours_wasted",
                                  "gpu_hours_measured"],
                         name="usagejob_measured_idx"),
        ]

    def __str__(self):
        return f"usage of job {self.job_id}"


class UsageDirty(models.Model):
    """A job whose group, end or figures changed since the detector pass last counted it.

    Written only by database triggers on ``jobs_job`` and ``findings_jobefficiency``
    (migration ``0004``), whoever writes those rows (ingest, the pass, ``close_stale_jobs``,
    the admin); insert-only, so writers never wait on each other. The pass takes the marks it
    sees and recounts those jobs; a reader adds the marked jobs' differences itself, so the
    sums are exact between passes too."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField()

    def __str__(self):
        return f"job {self.job_id} changed"


class LateSpan(models.Model):
    """Samples a node sent that may be older than where the detector pass already is.

    Written by ingest (``writer._mark_late``) when a node's batch is older than the newest
    data stored for it (batches out of order) or the node was silent until it came (a spool
    replayed after an outage, while its jobs' other nodes went on): the pass may have moved
    a job past these samples' time. The next pass adds the part of the span it had already
    passed to the job's slices and totals, judges the window the span ends, and deletes the
    row. Short-lived: a handful of rows, taken by the next pass.
    """

    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="+")
    start = models.DateTimeField(help_text="Oldest sample stored from the batch")
    end = models.DateTimeField(help_text="Newest sample stored from the batch")
    received_at = models.DateTimeField()

    def __str__(self):
        return f"late data of node {self.node_id} {self.start:%H:%M:%S}-{self.end:%H:%M:%S}"
