"""``clusterui jobstats JOBID``: one job's report from the JSON API, in the spirit of
Princeton's ``jobstats``: efficiency, per-node and per-GPU figures, memory high-water,
energy, findings with what to do, and a text sparkline per GPU.

Every figure printed is one the API gave (``/api/v1/jobs/<id>/``, its ``efficiency``,
``per_node``, ``per_gpu`` and ``findings``); only the sparklines are drawn here, from the
job's ``metrics`` series, by averaging neighbouring buckets down to the line's width.
Fetching is here; the text itself is ``report.render`` (the server's job-end email prints
the same report).
"""

from __future__ import annotations

from collectors.client.api import Client
from collectors.client.report import SPARK, SPARK_ASCII, WIDTH, render, sparkline

__all__ = ["SPARK", "SPARK_ASCII", "WIDTH", "Ambiguous", "NotFound", "collect", "find_job",
           "render", "sparkline"]


class NotFound(Exception):
    """No job with that id that you may see."""


class Ambiguous(Exception):
    """The id names jobs on several clusters (or schedulers): ``--cluster`` picks one."""


def find_job(client: Client, job_id: str, *, cluster: str | None = None,
             scheduler: str | None = None) -> dict:
    """The job's list entry: its scheduler id on ``cluster`` (any, if None)."""
    params = {"external_id": job_id, "limit": 100}
    if cluster:
        params["cluster"] = cluster
    if scheduler:
        params["scheduler"] = scheduler
    rows = client.get("jobs/", params)["results"]
    if not rows:
        where = f" on cluster {cluster!r}" if cluster else ""
        raise NotFound(f"no job {job_id!r}{where} that you may see")
    if len(rows) > 1:
        places = ", ".join(sorted(f"{r['cluster']} ({r['scheduler']})" for r in rows))
        raise Ambiguous(f"job {job_id!r} exists on {len(rows)} clusters or schedulers: "
                        f"{places}; name one with --cluster (and --scheduler)")
    return rows[0]


def collect(client: Client, job_id: str, *, cluster: str | None = None,
            scheduler: str | None = None) -> dict:
    """``{"job": <the API's job detail>, "metrics": <its util_pct and sm_active_pct
    series>}``."""
    row = find_job(client, job_id, cluster=cluster, scheduler=scheduler)
    detail = client.get(f"jobs/{row['id']}/")
    metrics = client.get(f"jobs/{row['id']}/metrics/", {"metrics": "util_pct,sm_active_pct"})
    return {"job": detail, "metrics": metrics}
