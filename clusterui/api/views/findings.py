"""Findings: visible as their job is (``Finding.objects.visible_to``); acknowledging is the
one write."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from clusterui.api.serializers.findings import FindingSerializer
from clusterui.findings.filtersets import FindingFilterSet
from clusterui.findings.models import Finding

ID = OpenApiParameter("id", int, OpenApiParameter.PATH)


@extend_schema_view(
    list=extend_schema(summary="Findings about the jobs you may see (staff: all, and nodes)"),
    retrieve=extend_schema(summary="A finding with its evidence", parameters=[ID]),
)
class FindingViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = FindingSerializer
    filterset_class = FindingFilterSet

    def get_queryset(self):
        return Finding.objects.visible_to(self.request.user).select_related(
            "job", "node", "gpu__node", "acknowledged_by")

    @extend_schema(summary="Acknowledge a finding", request=None,
                   description="Records who acknowledged it and when; acknowledging again "
                               "changes nothing.",
                   parameters=[ID], responses=FindingSerializer)
    @action(detail=True, methods=["post"], filter_backends=[])
    def acknowledge(self, request, pk=None):
        finding = self.get_object()
        Finding.objects.filter(pk=finding.pk, acknowledged_at=None).update(
            acknowledged_at=timezone.now(), acknowledged_by=request.user)
        return Response(self.get_serializer(self.get_queryset().get(pk=finding.pk)).data)
