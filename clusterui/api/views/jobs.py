"""Jobs: only those ``Job.objects.visible_to(user)`` returns exist for a user. Another
user's job is a 404 by id, absent from lists, and its metrics are a 404 too."""

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets

from clusterui.api import timeseries
from clusterui.api.serializers.jobs import JobDetailSerializer, JobSerializer
from clusterui.api.views.base import metrics_action
from clusterui.findings.models import Finding
from clusterui.jobs.filtersets import JobFilterSet, with_efficiency
from clusterui.jobs.listing import ordered_for_pages
from clusterui.jobs.models import Job, JobGpu


def with_detail(jobs):
    """What a job's detail shows (``JobDetailSerializer``): its efficiency, its GPUs by node
    and its findings, newest first. The job-end email reads the same (``alerts.jobreport``)."""
    return with_efficiency(jobs).prefetch_related(
        Prefetch("allocations", JobGpu.objects.select_related("gpu__node")
                 .order_by("gpu__node__name", "gpu__index")),
        Prefetch("findings", Finding.objects.order_by("-last_seen")),
    )


@extend_schema_view(
    list=extend_schema(
        summary="Jobs you may see, with their GPU-hours and efficiency",
        description="Staff see every job, others their own. `ordering=-wasted` puts the "
                    "jobs that wasted the most GPU-hours first."),
    retrieve=extend_schema(
        summary="A job with its efficiency, allocated GPUs and findings",
        parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH)]),
)
class JobViewSet(viewsets.ReadOnlyModelViewSet):
    filterset_class = JobFilterSet

    def get_queryset(self):
        jobs = Job.objects.visible_to(self.request.user)
        if self.action == "list":
            return with_efficiency(jobs)
        if self.action == "retrieve":
            return with_detail(jobs)
        return jobs

    def paginate_queryset(self, queryset):
        # Sorted by an efficiency figure, a page walks an index instead of sorting every
        # job (clusterui.jobs.listing); the answer's count stays exact.
        ordering = self.request.query_params.get("ordering", "").split(",")
        return super().paginate_queryset(ordered_for_pages(queryset, ordering))

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    metrics = metrics_action(
        "job",
        "GPU metrics: one series per GPU allocated to the job. NIC metrics: one per NIC of "
        "the nodes those GPUs are on. Host metrics (`cpu_cores_used`, `host_mem_used_bytes`): "
        "one series for the job. By default the whole life of the job; a range asked for is "
        "kept within it.",
        ("gpu", "nic", "job"))

    def metrics_subject(self, job):
        return timeseries.for_job(job)
