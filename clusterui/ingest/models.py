"""The ingest log: one row per batch stored, one per batch refused."""

from django.db import models


class IngestBatch(models.Model):
    """A batch that was stored. Its key ``(node, boot_id, seq)`` is inserted in the same
    transaction as the batch's samples, so a redelivered batch finds it and stores nothing,
    and ``seq`` numbers missing for a (node, boot_id) are batches that never arrived."""

    # No index of its own: the key's unique index (node, boot_id, seq) leads with it.
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="batches",
                             db_index=False)
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
    # Samples already stored (the same GPU and time under another boot id or seq: a resend,
    # a spool replay) and therefore not stored again; not refusals. The sample counts
    # above are what was stored. {"gpu_samples: duplicate of a stored sample (gpu, ts)": 8}
    # (Database defaults too: the writer's INSERT names only the columns it sets.)
    duplicates = models.IntegerField(default=0, db_default=0)
    duplicate_reasons = models.JSONField(default=dict, blank=True,
                                         db_default=models.Value({}, models.JSONField()))
    # The ingest key that signed the batch (empty when unsigned): shows key rotation progress.
    key_id = models.CharField(max_length=64, blank=True)
    # The signature version the batch used (docs/protocol.md): 1 (the envelope
    # re-serialised, accepted during the transition) or 2 (the bytes sent); 0 when unsigned;
    # null for batches stored before versions were recorded. Shows when version 1 can end.
    signature_version = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            # Idempotency: a redelivered batch conflicts here and is skipped whole.
            models.UniqueConstraint(fields=["node", "boot_id", "seq"], name="ingest_batch_key"),
        ]
        # The log is pruned (INGEST_LOG_RETENTION_DAYS, ``pruning.py``) and every health
        # page query reads a recent window of it by received_at, never the whole log.
        indexes = [
            # Rates, signing keys, signature versions and pruning: the window without
            # visiting the table.
            models.Index(fields=["received_at"],
                         include=["node", "boot_id", "seq", "key_id", "signature_version"],
                         name="ingestbatch_recv_cover_idx"),
            # The few batches with refusals, spool drops, duplicates in the window.
            models.Index(fields=["received_at"], condition=models.Q(rejected__gt=0),
                         name="ingestbatch_rejected_idx"),
            models.Index(fields=["received_at"], condition=models.Q(spool_dropped__gt=0),
                         name="ingestbatch_spool_idx"),
            models.Index(fields=["received_at"], condition=models.Q(duplicates__gt=0),
                         name="ingestbatch_duplicates_idx"),
        ]

    def __str__(self):
        return f"{self.node_id}/{self.boot_id[:8]}#{self.seq}"


class IngestRun(models.Model):
    """One collector run (node, boot id) as the ingest log has seen it: the lowest and
    highest sequence number received and how many distinct batches, kept by the writer in
    each flush's transaction. The gaps (``last_seq - first_seq + 1 - batches``) come from
    here, not from a scan of the log: the health page reads only the runs active in its
    window, and pruning old log rows changes nothing here (no phantom gaps)."""

    # No index of its own: the unique (node, boot_id) leads with it.
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="+",
                             db_index=False)
    boot_id = models.CharField(max_length=64)
    first_seq = models.BigIntegerField()
    last_seq = models.BigIntegerField()
    batches = models.BigIntegerField()
    first_received = models.DateTimeField()
    last_received = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["node", "boot_id"], name="ingestrun_node_boot_uniq"),
        ]
        # No index on last_received: every flush updates it, and an indexed column makes
        # each of those updates a new index entry in every index (ingest 0008). The health
        # page and pruning read this table (a row per collector run) whole.

    def __str__(self):
        return f"{self.node_id}/{self.boot_id[:8]} #{self.first_seq}-{self.last_seq}"


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
    old one (``manage.py ingest_key``).

    Nodes sign with their own key, derived from this secret and their name
    (``collectors.signing.derive_node_key``); the secret itself signing for any node of the
    cluster ("cluster-wide") is accepted only while ``allow_cluster_signatures`` is set."""

    cluster = models.CharField(max_length=64, help_text="Cluster name, as collectors send it")
    key_id = models.CharField(max_length=64)
    # HMAC needs the secret itself on both sides; protect the database accordingly.
    secret = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Keys from before node keys existed keep accepting cluster-wide signatures (migration
    # 0004 sets it on them) until ``manage.py ingest_key cluster-signatures ... off``.
    allow_cluster_signatures = models.BooleanField(
        default=False,
        help_text="Accept batches signed with the cluster secret itself (any node's name), "
                  "not only with each node's derived key")

    class Meta:
        ordering = ["cluster", "created_at"]
        constraints = [
            # A batch names its key by (cluster, key id).
            models.UniqueConstraint(fields=["cluster", "key_id"], name="ingestkey_cluster_id_uniq"),
        ]

    def __str__(self):
        return f"{self.cluster}/{self.key_id}{' (revoked)' if self.revoked_at else ''}"
