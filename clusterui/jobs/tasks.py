import datetime as dt

from celery import shared_task
from django.conf import settings
from django.db import connection
from django.utils import timezone


@shared_task(name="clusterui.jobs.close_stale_jobs", ignore_result=True)
def close_stale_jobs(now: dt.datetime | None = None) -> int:
    """End the jobs no collector has reported for ``JOB_STALE_AFTER_S``: their end is their
    newest sample.

    "Reported" is arrival time (``Job.reported_at``), not data time: a job whose history is
    still arriving (a back-fill, a collector replaying its spool after an outage) has old
    data but is being reported, and ending it there would judge it on a sliver. Jobs that
    never had an arrival time recorded fall back to their data time.
    """
    cutoff = (now or timezone.now()) - dt.timedelta(seconds=settings.JOB_STALE_AFTER_S)
    # Ingest writes a job's last_seen every minute of data; its last samples may be newer. Its
    # GPUs' raw rows after last_seen hold them (an index range of seconds per GPU).
    with connection.cursor() as cur:
        cur.execute(
            """
            UPDATE jobs_job j SET state = 'ended', ended_at = x.last, last_seen = x.last
            FROM (SELECT j2.id, GREATEST(j2.last_seen, (
                      -- Per GPU, its newest row through the (gpu_id, ts) index. As a plain
                      -- join, a day partition without statistics yet was read whole once
                      -- per stale job (minutes for a hundred jobs over 1.5M rows).
                      SELECT max(l.ts) FROM jobs_jobgpu a
                      CROSS JOIN LATERAL (
                          SELECT s.ts FROM telemetry_gpusample s
                          WHERE s.gpu_id = a.gpu_id AND s.ts > j2.last_seen
                            AND s.job_id = j2.id
                          ORDER BY s.ts DESC LIMIT 1) l
                      WHERE a.job_id = j2.id)) AS last
                  FROM jobs_job j2
                  WHERE j2.state = 'running'
                    AND (j2.reported_at < %(cutoff)s
                         OR (j2.reported_at IS NULL AND j2.last_seen < %(cutoff)s))) x
            WHERE j.id = x.id AND j.state = 'running'
            """,
            {"cutoff": cutoff},
        )
        return cur.rowcount
