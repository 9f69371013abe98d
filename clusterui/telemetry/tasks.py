import datetime as dt

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from clusterui.telemetry import compaction, partitions, vacuum
from clusterui.telemetry.metrics import (
    GPU_CHUNK_TABLE,
    GPU_ROLLUP_TABLES,
    JOB_ROLLUP_TABLES,
    NIC_PACK_TABLE,
    NIC_ROLLUP_TABLES,
    NODE_ROLLUP_TABLES,
    SAMPLE_TABLES,
)


@shared_task(name="clusterui.telemetry.maintain_partitions", ignore_result=True)
def maintain_partitions():
    """Create the coming days' partitions and drop those past retention: raw samples (hot
    and packed, GPU and NIC) after RAW_RETENTION_DAYS, rollups (GPU, job and NIC) after
    ROLLUP_1M/5M/1H_RETENTION_DAYS."""
    today = timezone.now().date()
    partitions.create_ahead(today, settings.PARTITION_DAYS_AHEAD)
    partitions.drop_older_than(today - dt.timedelta(days=settings.RAW_RETENTION_DAYS),
                               (*SAMPLE_TABLES, GPU_CHUNK_TABLE, NIC_PACK_TABLE))
    partitions.drop_older_than(today - dt.timedelta(days=settings.ROLLUP_1M_RETENTION_DAYS),
                               (GPU_ROLLUP_TABLES[60],))
    partitions.drop_older_than(today - dt.timedelta(days=settings.ROLLUP_5M_RETENTION_DAYS),
                               (GPU_ROLLUP_TABLES[300], NIC_ROLLUP_TABLES[300],
                                NODE_ROLLUP_TABLES[300]))
    partitions.drop_older_than(today - dt.timedelta(days=settings.ROLLUP_1H_RETENTION_DAYS),
                               (GPU_ROLLUP_TABLES[3600], JOB_ROLLUP_TABLES[3600],
                                NODE_ROLLUP_TABLES[3600]))


@shared_task(name="clusterui.telemetry.compact", ignore_result=True)
def compact():
    """Pack the hot GPU samples older than the horizon into hour chunks and rollups,
    recompute the NIC rollups that are due, and truncate the hot partitions of the days
    packed."""
    # Well inside the task's time limit; what is left waits for the next run.
    compaction.compact(budget_s=settings.CELERY_TASK_TIME_LIMIT * 0.5)


@shared_task(name="clusterui.telemetry.vacuum", ignore_result=True)
def vacuum_tables():
    """Vacuum the tables whose dead rows are due, where PostgreSQL's autovacuum is off."""
    vacuum.vacuum_due(budget_s=settings.CELERY_TASK_TIME_LIMIT * 0.5)
