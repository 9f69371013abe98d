"""Where a simulated cluster's stored history ends, for a simulator that continues it.

``make demo`` keeps its database between runs while each run of ``clusterui-simcluster``
starts a new simulated timeline. Fed blindly, a second run would back-fill over the hour
the first one stored (every GPU sampled twice, by two different jobs) and give its jobs the
first run's job ids (one job "started" twice). This prints what the simulator needs to go on
instead: ``--after`` (the newest sample stored for the cluster, Unix seconds) and
``--first-job-id`` (one past the largest numeric Slurm job id the cluster has), each null
when the cluster has none, as one JSON object."""

import json

from django.core.management.base import BaseCommand
from django.db import connection
from django.db.models import Max

from clusterui.telemetry.models import GpuLatest


def stored_end(cluster: str) -> dict:
    """``{"after": Unix seconds of the newest sample, "first_job_id": the next free Slurm
    job id}`` of ``cluster``'s stored history, each None when it has none (also read by the
    Compose demo's ``demo-key``: ``clusterui.demofeed.seed_state``)."""
    newest = GpuLatest.objects.filter(gpu__node__cluster__name=cluster).aggregate(
        newest=Max("ts"))["newest"]
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT max(j.external_id::bigint)
            FROM jobs_job j JOIN inventory_cluster c ON c.id = j.cluster_id
            WHERE c.name = %s AND j.scheduler = 'slurm' AND j.external_id ~ '^[0-9]{1,18}$'
            """,
            [cluster],
        )
        (largest,) = cur.fetchone()
    return {"after": newest.timestamp() if newest else None,
            "first_job_id": largest + 1 if largest is not None else None}


class Command(BaseCommand):
    help = ("Print, as JSON, where the stored history of a (simulated) cluster ends: the "
            "newest sample's time and the next free Slurm job id.")

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default="demo")

    def handle(self, *args, cluster, **options):
        self.stdout.write(json.dumps(stored_end(cluster)))
