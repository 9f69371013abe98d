"""Fabric health as stored: each port's link now, and the samples where its errors rose.

``PortLink``: one row per InfiniBand / RoCE port, overwritten by every newer sample (link
state changes rarely; the pages and the detector want "now" and the port's nominal rate,
not a series). ``nominal_gbps`` is the highest rate seen while the port was ACTIVE: the
rate it trained to when healthy, so a later lower one is a degraded link.

``PortErrors``: a row per (port, sample) in which an error counter rose (sparse: a healthy
port writes none), the increases over that sample interval. The detector sums a window of
them; rows older than ``RAW_RETENTION_DAYS`` are deleted by the detector pass.
"""

from django.db import models

from clusterui.inventory.models import Nic


class PortLink(models.Model):
    nic = models.OneToOneField(Nic, on_delete=models.CASCADE, primary_key=True,
                               related_name="link")
    ts = models.DateTimeField(help_text="Time of the sample this row holds")
    link_state = models.SmallIntegerField(null=True)
    phys_state = models.SmallIntegerField(null=True)
    link_width = models.SmallIntegerField(null=True)
    link_gbps = models.FloatField(null=True)
    nominal_gbps = models.FloatField(null=True, help_text="Highest rate seen while ACTIVE")
    nominal_width = models.SmallIntegerField(null=True)
    counters_saturated = models.SmallIntegerField(null=True)
    # The latest interval's RoCE counter increases (mlx5 hw_counters: congestion, drops,
    # retransmissions; and the netdev's pause frames, metrics.ROCE_FIELDS): no history kept.
    congestion = models.JSONField(default=dict)
    active_seen = models.DateTimeField(null=True, help_text="Last sample that was ACTIVE")

    class Meta:
        indexes = [
            # The fabric page and the detector read the ports heard from recently.
            models.Index(fields=["ts"], name="fabric_portlink_ts_idx"),
        ]

    def __str__(self):
        return f"{self.nic}: state {self.link_state}, {self.link_gbps} Gb/s"


class PortErrors(models.Model):
    id = models.BigAutoField(primary_key=True)
    nic = models.ForeignKey(Nic, on_delete=models.CASCADE, related_name="+")
    ts = models.DateTimeField()
    # One per field of ``metrics.ERROR_FIELDS``: the increase over the sample interval.
    symbol_error = models.BigIntegerField(null=True)
    link_error_recovery = models.BigIntegerField(null=True)
    link_downed = models.BigIntegerField(null=True)
    port_rcv_errors = models.BigIntegerField(null=True)
    port_rcv_remote_physical_errors = models.BigIntegerField(null=True)
    port_xmit_discards = models.BigIntegerField(null=True)
    local_link_integrity_errors = models.BigIntegerField(null=True)
    excessive_buffer_overrun_errors = models.BigIntegerField(null=True)

    class Meta:
        constraints = [
            # A sample is stored once (a batch delivered again, a spool replay).
            models.UniqueConstraint(fields=["nic", "ts"], name="fabric_porterrors_nic_ts_uniq"),
        ]
        indexes = [
            # Retention deletes by time alone; window sums use the (nic, ts) unique index.
            models.Index(fields=["ts"], name="fabric_porterrors_ts_idx"),
        ]

    def __str__(self):
        return f"{self.nic} errors at {self.ts:%Y-%m-%d %H:%M:%S}"

