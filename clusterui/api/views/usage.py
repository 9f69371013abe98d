import datetime as dt

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.exceptions import ValidationError

from clusterui.api.pagination import LimitOffsetPagination
from clusterui.api.params import UsageQuery
from clusterui.api.serializers.usage import UsageRowSerializer
from clusterui.jobs.models import Job
from clusterui.jobs.usage import GROUPS, usage_summary

DEFAULT_SPAN = dt.timedelta(days=7)


class UsagePagination(LimitOffsetPagination):
    """Pages of rows, with the grouping and the period they cover."""

    def get_paginated_response(self, data):
        response = super().get_paginated_response(data)
        response.data = {**self.period, **response.data}
        return response

    def get_paginated_response_schema(self, schema):
        out = super().get_paginated_response_schema(schema)
        out["properties"] = {
            "group": {"type": "string", "enum": list(GROUPS)},
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
            **out["properties"],
        }
        out["required"] = ["group", "from", "to", *out.get("required", [])]
        return out


@extend_schema(
    summary="GPU-hours and waste per user, per account or per Kubernetes namespace",
    description="Over the jobs you may see (staff: all) that were active between `from` "
                "(default: 7 days before `to`) and `to` (default: now), most wasted first, "
                "on every cluster or on `cluster`. A job counts with its whole-life "
                "figures.",
    parameters=[UsageQuery],
)
class UsageView(generics.ListAPIView):
    serializer_class = UsageRowSerializer
    pagination_class = UsagePagination
    filter_backends = []

    def get_queryset(self):
        query = UsageQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        end = q.get("to") or timezone.now()
        start = q.get("from") or end - DEFAULT_SPAN
        if end <= start:
            raise ValidationError({"to": "must be after from (to defaults to now)"})
        self.paginator.period = {"group": q["group"], "from": start, "to": end}
        jobs = Job.objects.visible_to(self.request.user)
        if q.get("cluster") is not None:
            jobs = jobs.filter(cluster=q["cluster"])
        return usage_summary(jobs, q["group"], start, end)
