"""A job's report for the job-end email: the JSON API's own answers for the job (its detail
and its GPU series, as ``clusterui jobstats`` fetches them), built in-process from the same
serializers, and printed by the same code (``collectors.client.report``, standard library
only), so the email's text is line for line what the command prints."""

import json

from django.conf import settings
from django.urls import reverse
from rest_framework.renderers import JSONRenderer

from clusterui.api import timeseries
from clusterui.api.serializers.jobs import JobDetailSerializer
from clusterui.api.views.jobs import with_detail
from clusterui.jobs.models import Job
from collectors.client.report import render

# The series `clusterui jobstats` asks for (collectors/client/jobstats.py: collect).
METRICS = ["util_pct", "sm_active_pct"]


def answers(job_id: int) -> dict:
    """``{"job": <GET /api/v1/jobs/<id>/>, "metrics": <GET .../metrics/?metrics=...>}``,
    as JSON would carry them (times as ISO strings)."""
    job = with_detail(Job.objects.filter(pk=job_id)).get()
    detail = JobDetailSerializer(job).data
    metrics = timeseries.read(timeseries.for_job(job), METRICS, None, None)
    return json.loads(JSONRenderer().render({"job": detail, "metrics": metrics}))


def text(report: dict) -> str:
    return render(report)


def job_url(job: Job) -> str:
    return settings.SITE_URL + reverse("job-detail", args=[job.pk])
