"""The ingest log: one row per batch stored, one per batch refused."""

from django.db import models


class IngestBatch(models.Model):
    """A batch that was stored. Its key ``(node, boot_id, seq)`` is inserted in the same
    transaction as the batch's samples, so a redelivered batch finds it and stores nothing,
    and ``seq`` numbers missing for a (node, boot_id) are batches that never arrived."""

    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="batches")
    boot_id = models.CharField(max_length=64)
    seq = models.BigIntegerField()
    sent_at = models.DateTimeField(null=True)
    received_at = models.DateTimeField()
    first_ts = models.DateTimeField(null=True)
    last_ts = models.DateTimeField(null=True)
    gpu_samples = models.IntegerField(default=0)
    nic_samples = models.IntegerField(default=0)
    job_samples = models.IntegerField(default=0)
    events = models.IntegerField(default=0)
    rejected = models.IntegerField(default=0, help_text="Rows and entries refused")
    # {"gpu_samples: util_pct out of range [0, 100]": 3, ...}
    rejected_reasons = models.JSONField(default=dict, blank=True)
    # {"<reason>": "row 12: got 140.0"}: one example per reason, to act on.
    rejected_examples = models.JSONField(default=dict, blank=True)
    spool_dropped = models.IntegerField(default=0, help_text="Batches the collector's full spool dropped")
    # The ingest key that signed the batch (empty when unsigned): shows key rotation progress.
    key_id = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            # Idempotency: a redelivered batch conflicts here and is skipped whole.
            models.UniqueConstraint(fields=["node", "boot_id", "seq"], name="ingest_batch_key"),
        ]
        indexes = [
            # The ingest health page: batches and rejections over the last minutes.
            models.Index(fields=["received_at"], name="ingestbatch_received_idx"),
        ]

    def __str__(self):
        return f"{self.node_id}/{self.boot_id[:8]}#{self.seq}"


class RejectedBatch(models.Model):
    """A batch refused whole (bad envelope, unknown schema, too large), with the reason."""

    received_at = models.DateTimeField(auto_now_add=True)
    cluster = models.CharField(max_length=64, blank=True)
    node = models.CharField(max_length=128, blank=True)
    reason = models.CharField(max_length=512)
    excerpt = models.TextField(blank=True, help_text="The start of the envelope, for diagnosis")

    class Meta:
        ordering = ["-received_at"]
        indexes = [
            # The ingest health page lists recent refusals.
            models.Index(fields=["-received_at"], name="rejectedbatch_received_idx"),
        ]

    def __str__(self):
        return f"{self.node or '?'}: {self.reason}"


class IngestKey(models.Model):
    """A cluster's key for signing batches (HMAC-SHA256). Several may be active at once, so
    a key is rotated by adding the new one, moving the collectors to it, then revoking the
    old one (``manage.py ingest_key``)."""

    cluster = models.CharField(max_length=64, help_text="Cluster name, as collectors send it")
    key_id = models.CharField(max_length=64)
    # HMAC needs the secret itself on both sides; protect the database accordingly.
    secret = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "created_at"]
        constraints = [
            # A batch names its key by (cluster, key id).
            models.UniqueConstraint(fields=["cluster", "key_id"], name="ingestkey_cluster_id_uniq"),
        ]

    def __str__(self):
        return f"{self.cluster}/{self.key_id}{' (revoked)' if self.revoked_at else ''}"
