"""Each GPU's latest health counters: one row per GPU, rewritten when a value changes.

Not a sample table: these counters change a few times in a GPU's life, and the detector
and the UI need only the current state. ``changed_at`` is when a value last changed,
``ts`` the reading that last confirmed it (refreshed at most every ``REFRESH_S``).
"""

from django.db import models

from clusterui.gpuhealth.fields import COUNTS, FLAGS
from clusterui.inventory.models import Gpu

REFRESH_S = 900


class GpuHealth(models.Model):
    gpu = models.OneToOneField(Gpu, on_delete=models.CASCADE, primary_key=True,
                               related_name="health")
    ts = models.DateTimeField()
    changed_at = models.DateTimeField()
    ecc_corrected_volatile = models.BigIntegerField(null=True)
    ecc_uncorrected_volatile = models.BigIntegerField(null=True)
    ecc_corrected_aggregate = models.BigIntegerField(null=True)
    ecc_uncorrected_aggregate = models.BigIntegerField(null=True)
    remapped_correctable = models.BigIntegerField(null=True)
    remapped_uncorrectable = models.BigIntegerField(null=True)
    retired_pages_sbe = models.BigIntegerField(null=True)
    retired_pages_dbe = models.BigIntegerField(null=True)
    nvlink_replay_errors = models.BigIntegerField(null=True)
    nvlink_recovery_errors = models.BigIntegerField(null=True)
    nvlink_crc_flit_errors = models.BigIntegerField(null=True)
    nvlink_crc_data_errors = models.BigIntegerField(null=True)
    pcie_replays = models.BigIntegerField(null=True)
    remap_pending = models.BooleanField(null=True)
    remap_failure = models.BooleanField(null=True)
    retired_pages_pending = models.BooleanField(null=True)

    def __str__(self):
        return f"health of {self.gpu}"


assert {f.name for f in GpuHealth._meta.fields} >= set(COUNTS + FLAGS)
