from django.db import models

from clusterui.findings.choices import FindingKind

# Email categories a recipient can turn off: one per finding kind, the job-end summary,
# and the admins' digest.
DIGEST = "digest"
JOB_END = "job_end"
# An opt-out row with this category turns every alert email off.
ALL = "all"


class EmailStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    SKIPPED = "skipped", "Skipped"
    FAILED = "failed", "Failed"


class RecipientRole(models.TextChoices):
    OWNER = "owner", "Job owner"
    ACCOUNT_MANAGER = "account_manager", "Account manager"
    ADMIN = "admin", "Administrator"


# What each category is about, in the words of the preferences page.
CATEGORY_HELP = {
    FindingKind.LOW_UTILIZATION: "A job's GPUs are mostly idle over the detection window.",
    FindingKind.IDLE_GPU: "Some GPUs of a job do (almost) nothing while others work.",
    FindingKind.COMM_BOUND: "A multi-GPU job waits on NIC or NVLink traffic.",
    FindingKind.INPUT_BOUND: "GPUs wait while the job's CPUs are saturated (data loading).",
    FindingKind.THROTTLING: "GPU clocks are held down by temperature or power limits.",
    FindingKind.GPU_ERRORS: "The GPU driver reported errors (Xid) on a job's GPUs.",
    FindingKind.STRAGGLER: "One node of a multi-node job holds the others back.",
    FindingKind.GPU_HEALTH: "A node's GPU needs a reset or replacement (ECC, row remapping).",
    JOB_END: "A summary of a job when it ends (the clusterui jobstats report), for jobs that "
             "wasted much of their GPU time, or for every job if you ask below.",
    FindingKind.FABRIC_LINK: "A node's InfiniBand / RoCE port is down, slower than its "
                             "nominal rate, or counting link errors (administrators).",
    DIGEST: "The administrators' daily summary: top waste and open findings.",
}


def category_label(category: str) -> str:
    if category == DIGEST:
        return "Daily digest"
    if category == ALL:
        return "All alert emails"
    if category == JOB_END:
        return "Job-end summary"
    try:
        return FindingKind(category).label
    except ValueError:
        return category
