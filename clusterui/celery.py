"""The Celery application: the ingest queue and the periodic (beat) tasks."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterui.settings")

app = Celery("clusterui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Tasks that live outside a tasks.py module.
app.autodiscover_tasks(["clusterui.ingest"], related_name="pruning")
# Celery's Django fix-up closes the database connection around every task unless told to
# reuse it: a new connection per batch cost three quarters of the ingest time. Reuse it
# for this many tasks (Django's CONN_MAX_AGE and health checks still apply).
app.conf["CELERY_DB_REUSE_MAX"] = int(os.environ.get("CELERY_DB_REUSE_MAX", "1000"))


@task_prerun.connect
@task_postrun.connect
def _drop_broken_connections(**kwargs):
    """Like Django's request signals: a connection that errored (the database restarted) or
    outlived CONN_MAX_AGE is closed, so the next task (or retry) opens a fresh one."""
    from django.db import close_old_connections

    close_old_connections()


def _every(env_name: str, default_s: float) -> float:
    """A beat period in seconds, overridable by an environment variable."""
    raw = os.environ.get(env_name)
    if raw is None:
        return default_s
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{env_name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise SystemExit(f"{env_name} must be positive, got {raw!r}")
    return value


def _entry(task: str, env_name: str, default_s: float) -> dict:
    period = _every(env_name, default_s)
    # Expire just under the period so that runs missed while workers were busy never pile up.
    return {"task": task, "schedule": period, "options": {"expires": period * 0.9}}


app.conf.beat_schedule = {
    "maintain-partitions": _entry(
        "clusterui.telemetry.maintain_partitions", "BEAT_PARTITIONS_S", 3600
    ),
    # Hot GPU hours closed RAW_HOT_MINUTES ago (and read by the detectors) into packed hour
    # chunks and rollups.
    "compact-telemetry": _entry("clusterui.telemetry.compact", "BEAT_COMPACT_S", 300),
    # Dead rows reclaimed where PostgreSQL's autovacuum is off (else it does nothing).
    "vacuum-tables": _entry("clusterui.telemetry.vacuum", "BEAT_VACUUM_S", 300),
    "close-stale-jobs": _entry("clusterui.jobs.close_stale_jobs", "BEAT_STALE_JOBS_S", 60),
    "alert-silent-nodes": _entry("clusterui.ingest.alert_silent_nodes", "BEAT_SILENT_NODES_S",
                                 60),
    # Efficiency and findings for running jobs; jobs marked ended are finalized next pass.
    # Ingest-log rows older than INGEST_LOG_RETENTION_DAYS, in bounded batches.
    "prune-ingest-log": _entry("clusterui.ingest.prune_ingest_log", "BEAT_PRUNE_INGEST_LOG_S",
                               600),
    "run-detectors": _entry("clusterui.findings.run_detectors", "BEAT_DETECTORS_S", 60),
    "send-alerts": _entry("clusterui.alerts.send_alerts", "BEAT_ALERTS_S", 60),
    # The digest goes out at the first check after ALERT_DIGEST_HOUR (local time), once a day.
    "send-digest": _entry("clusterui.alerts.send_digest", "BEAT_DIGEST_S", 900),
}
