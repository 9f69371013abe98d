"""Telemetry that is not a raw time series: latest values and device events.

The raw samples live in the day-partitioned tables named in ``metrics.py``. They are
created by migration 0002 in plain SQL (Django cannot declare partitioned tables), written
only by ``COPY`` in ``clusterui.ingest.writer`` and read by the queries in ``series.py``.
"""

from django.db import models


class GpuLatest(models.Model):
    """The newest sample of each GPU, kept by ingest, for every "now" view.

    Reading "latest per GPU" from the raw table costs seconds at scale; this costs a
    primary-key lookup.
    """

    gpu = models.OneToOneField("inventory.Gpu", on_delete=models.CASCADE, primary_key=True,
                               related_name="latest")
    ts = models.DateTimeField()
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, related_name="+")
    util_pct = models.FloatField(null=True)
    mem_util_pct = models.FloatField(null=True)
    mem_used_mib = models.IntegerField(null=True)
    power_w = models.FloatField(null=True)
    temp_c = models.FloatField(null=True)
    sm_clock_mhz = models.FloatField(null=True)
    sm_active_pct = models.FloatField(null=True)
    tensor_active_pct = models.FloatField(null=True)
    dram_active_pct = models.FloatField(null=True)
    pcie_tx_bytes_per_s = models.FloatField(null=True)
    pcie_rx_bytes_per_s = models.FloatField(null=True)
    nvlink_tx_bytes_per_s = models.FloatField(null=True)
    nvlink_rx_bytes_per_s = models.FloatField(null=True)
    throttle_reasons = models.BigIntegerField(null=True)
    energy_j = models.FloatField(null=True)

    def __str__(self):
        return f"gpu {self.gpu_id} at {self.ts:%Y-%m-%d %H:%M:%S}"


class NicLatest(models.Model):
    nic = models.OneToOneField("inventory.Nic", on_delete=models.CASCADE, primary_key=True,
                               related_name="latest")
    ts = models.DateTimeField()
    rx_bytes_per_s = models.FloatField(null=True)
    tx_bytes_per_s = models.FloatField(null=True)

    def __str__(self):
        return f"nic {self.nic_id} at {self.ts:%Y-%m-%d %H:%M:%S}"


class GpuEvent(models.Model):
    """An Xid error, a lost GPU or another discrete event a collector reported."""

    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.CASCADE, related_name="events")
    ts = models.DateTimeField()
    kind = models.CharField(max_length=32)
    code = models.IntegerField(null=True)
    message = models.CharField(max_length=512, blank=True)
    batch = models.ForeignKey("ingest.IngestBatch", on_delete=models.SET_NULL, null=True,
                              related_name="+")

    class Meta:
        ordering = ["-ts"]
        indexes = [
            # The node and job pages list a GPU's events over a time range.
            models.Index(fields=["gpu", "-ts"], name="gpuevent_gpu_ts_idx"),
        ]
        constraints = [
            # One stored copy of an event, whatever batch carried it (a spool resent under
            # a new boot id): the writer inserts ON CONFLICT DO NOTHING and counts the
            # rest as duplicates. An event without a code equals another without one.
            models.UniqueConstraint(fields=["gpu", "ts", "kind", "code", "message"],
                                    nulls_distinct=False, name="gpuevent_identity_uniq"),
        ]

    def __str__(self):
        return f"{self.kind} {self.code or ''} on gpu {self.gpu_id} at {self.ts:%Y-%m-%d %H:%M:%S}"
