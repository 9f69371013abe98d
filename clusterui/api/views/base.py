"""What the API's views share.

DRF marks its views exempt from the site's LoginRequiredMiddleware: an API client is never
sent to the login page; DRF's authentication and permission classes (settings.REST_FRAMEWORK:
token or session, IsAuthenticated) answer 401 instead."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from clusterui.api import timeseries
from clusterui.api.params import MetricsQuery
from clusterui.api.serializers.series import SeriesSerializer

METRICS_DOC = """Aligned time series of this {what}, at the requested `step` or an automatic
one (at most 600 buckets, never finer than the sampling interval). `to` defaults to now and
`from` to an hour before it, except for a job.

{covers}

Answer: `ts` holds each bucket's start; each entry of `series` is one metric of one device
(`source` gpu, nic or job) with `values` parallel to `ts`, `null` where no sample fell.
Metrics: {metrics}."""


def metrics_action(what: str, covers: str, sources: tuple[str, ...],
                   default: tuple[str, ...] = ("util_pct",)):
    """The ``metrics`` detail route of a viewset whose ``metrics_subject(obj)`` says what a
    request for ``obj`` covers (see ``clusterui.api.timeseries``); ``default``: the metrics
    read when the request names none."""
    names = ", ".join(f"`{m.name}`" for s in sources for m in timeseries.METRICS_BY_SOURCE[s])
    covers += f" Without `metrics`: {', '.join(f'`{m}`' for m in default)}."

    @extend_schema(
        summary=f"Time series of a {what}",
        description=METRICS_DOC.format(what=what, covers=covers, metrics=names),
        parameters=[MetricsQuery, OpenApiParameter("id", int, OpenApiParameter.PATH)],
        responses=SeriesSerializer,
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def metrics(self, request, pk=None):
        obj = self.get_object()
        query = MetricsQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        answer = timeseries.read(self.metrics_subject(obj), q.get("metrics") or list(default),
                                 q.get("from"),
                                 q.get("to"), step=q.get("step"), agg=q["agg"])
        return Response(answer)

    return metrics
