"""The alert outbox and log, recipients' opt-outs, per-address daily counts, digest runs."""

from django.db import models
from django.db.models import Q

from clusterui.alerts.choices import EmailStatus, RecipientRole, category_label
from clusterui.findings.choices import Severity


class AlertEmail(models.Model):
    """One email to one address. Pending, it is the outbox: a failed send stays pending with
    a later ``next_attempt_at``, so an SMTP outage delays it and never loses it. Sent or
    skipped, it is the log a recipient and an operator read."""

    category = models.CharField(max_length=32, help_text="a finding kind, or 'digest'")
    finding = models.ForeignKey("findings.Finding", on_delete=models.CASCADE, null=True,
                                blank=True, related_name="alert_emails")
    # Kept apart from the finding: "one email per job and kind" spans a finding that closed
    # and opened again.
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, null=True, blank=True,
                            related_name="+")
    severity = models.CharField(max_length=16, choices=Severity.choices, blank=True)
    # The severity emailed before, when this email is an escalation.
    previous_severity = models.CharField(max_length=16, choices=Severity.choices, blank=True)
    digest_day = models.DateField(null=True, blank=True)
    to = models.EmailField(max_length=254)
    username = models.CharField(max_length=150, blank=True,
                               help_text="the recipient's login, when the address has one")
    role = models.CharField(max_length=16, choices=RecipientRole.choices)
    status = models.CharField(max_length=16, choices=EmailStatus.choices,
                              default=EmailStatus.PENDING)
    status_detail = models.CharField(max_length=300, blank=True,
                                     help_text="why it was skipped or failed")
    attempts = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    subject = models.CharField(max_length=300, blank=True)
    message_id = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # A finding is claimed once per severity (Finding.emailed_severity), and each
            # claim writes one email per recipient: never two for the same claim.
            models.UniqueConstraint(fields=["finding", "to", "severity"],
                                    name="alertemail_once_per_finding_severity"),
            # One digest per address and day, whoever queues it.
            models.UniqueConstraint(fields=["to", "digest_day"],
                                    condition=Q(digest_day__isnull=False),
                                    name="alertemail_one_digest_per_day"),
            # One job-end summary per job and address (JobEndRun is the claim; this is the
            # database's word on it).
            models.UniqueConstraint(fields=["job", "to"], condition=Q(category="job_end"),
                                    name="alertemail_one_job_end_per_job"),
        ]
        indexes = [
            # The delivery queue: pending emails that are due, oldest first.
            models.Index(fields=["next_attempt_at"], name="alertemail_due_idx",
                         condition=Q(status="pending")),
            # "One email per job and kind": what this address was already sent for a job.
            models.Index(fields=["job", "category", "to"], name="alertemail_job_kind_to_idx"),
            # The preferences page: an address's recent alert emails.
            models.Index(fields=["to", "-created_at"], name="alertemail_to_created_idx"),
        ]

    def __str__(self):
        return f"{category_label(self.category)} to {self.to} ({self.status})"

    @property
    def category_label(self) -> str:
        return category_label(self.category)


class OptOut(models.Model):
    """An address that turned a category (or 'all') off. Keyed by address, not by login:
    admins and account managers may have no login, and the signed link carries the address."""

    address = models.EmailField(max_length=254)
    category = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Recipients are checked by (address, category); the preferences page rewrites them.
            models.UniqueConstraint(fields=["address", "category"], name="optout_address_uniq"),
        ]

    def __str__(self):
        return f"{self.address} opted out of {category_label(self.category)}"


class OptIn(models.Model):
    """An address that asked for more than a category's default: for ``job_end``, the
    summary of every job of theirs, not only of those that wasted much (``jobend``)."""

    address = models.EmailField(max_length=254)
    category = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["address", "category"], name="optin_address_uniq"),
        ]

    def __str__(self):
        return f"{self.address} opted in to {category_label(self.category)} for every job"


class DailyCount(models.Model):
    """Finding emails sent to an address on a local day. A send reserves its slot with one
    conditional UPDATE, so two workers can never exceed ALERT_DAILY_LIMIT between them."""

    address = models.EmailField(max_length=254)
    day = models.DateField()
    sent = models.IntegerField(default=0)

    class Meta:
        constraints = [
            # The reservation updates (address, day) and inserts it with ON CONFLICT.
            models.UniqueConstraint(fields=["address", "day"], name="dailycount_address_day_uniq"),
        ]

    def __str__(self):
        return f"{self.address} on {self.day}: {self.sent}"


class DigestRun(models.Model):
    """The admins' digest of a local day, queued once: its insert is the claim."""

    day = models.DateField(unique=True)
    created_at = models.DateTimeField()
    open_findings = models.IntegerField(default=0)

    def __str__(self):
        return f"digest of {self.day}"


class JobEndRun(models.Model):
    """A finalized job, considered once for its job-end summary: the insert is the claim, so
    two workers never both queue it, and a job finalized again (late data) is not emailed
    again. ``outcome`` says what was decided (for the admin and the tests)."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, primary_key=True,
                               related_name="+")
    created_at = models.DateTimeField()
    outcome = models.CharField(max_length=120, blank=True)

    def __str__(self):
        return f"job-end summary of job {self.job_id}: {self.outcome}"
