"""Nodes, GPUs and NICs: every signed-in user sees the whole inventory, as on the UI's
cluster page; which job holds a GPU is shown only to those who may see that job."""

from django.db.models import Prefetch
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from clusterui.api import fabric_ports, timeseries
from clusterui.api.filtersets import GpuFilterSet, NicFilterSet, NodeFilterSet
from clusterui.api.params import StepQuery
from clusterui.api.serializers.inventory import GpuSerializer, NicSerializer, NodeSerializer
from clusterui.api.serializers.series import PortErrorsSerializer
from clusterui.api.views.base import metrics_action
from clusterui.fabric.metrics import ERROR_FIELDS
from clusterui.fabric.models import PortLink
from clusterui.gpuhealth.classify import node_health
from clusterui.inventory.models import Gpu, Nic, Node
from clusterui.jobs.models import Job

ID = OpenApiParameter("id", int, OpenApiParameter.PATH)


def visible_jobs(user, gpus) -> set[int]:
    """Of the jobs holding these GPUs now, the ids ``user`` may see (one query)."""
    ids = {g.latest.job_id for g in gpus if getattr(g, "latest", None) and g.latest.job_id}
    if not ids:
        return set()
    return set(Job.objects.visible_to(user).filter(id__in=ids).values_list("id", flat=True))


class InventoryViewSet(viewsets.ReadOnlyModelViewSet):
    def gpus_of(self, objects) -> list:
        """The GPUs whose current job the serialized ``objects`` show."""
        return []

    def get_serializer(self, *args, **kwargs):
        context = {**self.get_serializer_context(), "now": timezone.now()}
        if args:
            objects = args[0] if kwargs.get("many") else [args[0]]
            context["visible_jobs"] = visible_jobs(self.request.user, self.gpus_of(objects))
        kwargs["context"] = context
        return super().get_serializer(*args, **kwargs)


@extend_schema_view(
    list=extend_schema(summary="Nodes, each with its GPUs and NICs and their latest values"),
    retrieve=extend_schema(summary="A node with its GPUs and NICs and their latest values",
                           parameters=[ID]),
)
class NodeViewSet(InventoryViewSet):
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet

    def get_queryset(self):
        nodes = Node.objects.select_related("cluster")
        if self.action == "metrics":
            return nodes
        return nodes.prefetch_related(
            Prefetch("gpus", Gpu.objects.select_related("latest").order_by("index")),
            Prefetch("nics", Nic.objects.select_related("latest").order_by("name")),
        )

    def gpus_of(self, nodes):
        return [g for node in nodes for g in node.gpus.all()]

    def get_serializer(self, *args, **kwargs):
        serializer = super().get_serializer(*args, **kwargs)
        if args:  # the nodes answered: their GPU health, one query for the page
            nodes = args[0] if kwargs.get("many") else [args[0]]
            serializer.context["gpu_health"] = node_health([n.id for n in nodes])
        return serializer

    metrics = metrics_action(
        "node", "One series per GPU of the node and metric; NIC metrics: one per NIC.",
        ("gpu", "nic"))

    def metrics_subject(self, node):
        return timeseries.for_node(node)


@extend_schema_view(
    list=extend_schema(summary="GPUs with their latest values"),
    retrieve=extend_schema(summary="A GPU with its latest values", parameters=[ID]),
)
class GpuViewSet(InventoryViewSet):
    serializer_class = GpuSerializer
    filterset_class = GpuFilterSet
    queryset = Gpu.objects.select_related("node", "latest").order_by("node__name", "index")

    def gpus_of(self, gpus):
        return gpus

    metrics = metrics_action("GPU", "One series per metric.", ("gpu",))

    def metrics_subject(self, gpu):
        return timeseries.for_gpu(gpu)


@extend_schema_view(
    list=extend_schema(summary="Network interfaces with their latest rates"),
    retrieve=extend_schema(summary="A network interface with its latest rates",
                           parameters=[ID]),
)
class NicViewSet(InventoryViewSet):
    serializer_class = NicSerializer
    filterset_class = NicFilterSet
    queryset = Nic.objects.select_related("node", "latest").order_by("node__name", "name")

    def get_serializer(self, *args, **kwargs):
        serializer = super().get_serializer(*args, **kwargs)
        if args:  # the NICs answered: their fabric health, one query for the page
            nics = args[0] if kwargs.get("many") else [args[0]]
            serializer.context.update(fabric_ports.context(list(nics)))
        return serializer

    metrics = metrics_action("NIC", "One series per metric.", ("nic",),
                             default=("rx_bytes_per_s", "tx_bytes_per_s"))

    def metrics_subject(self, nic):
        return timeseries.for_nic(nic)

    @extend_schema(
        summary="A fabric port's error counters over time",
        description=(
            "Each InfiniBand / RoCE error counter's increases per bucket, on the axis the "
            "port's `metrics` have (same `from`, `to` and `step` rules): when a link began "
            "to err, and which counter. `reported` says per bucket whether the port sent a "
            "sample then; a counter's value there is `null` where it did not (nothing is "
            "known), 0 where it did and the counter did not rise. `total`: its increases "
            "over the range. The RoCE congestion and pause counters keep no history (the "
            "newest interval only, in the NIC's `fabric`). 404 for an interface that "
            "reports no fabric counters (Ethernet, an older collector). Counters: "
            + ", ".join(f"`{name}`" for name in ERROR_FIELDS) + "."),
        parameters=[StepQuery, ID],
        responses=PortErrorsSerializer,
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def errors(self, request, pk=None):
        nic = self.get_object()
        if not PortLink.objects.filter(nic=nic).exists():
            raise NotFound(f"NIC {nic.node.name}/{nic.name} reports no fabric counters "
                           "(Ethernet, or a collector without fabric support)")
        query = StepQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        return Response(fabric_ports.error_series(nic, q.get("from"), q.get("to"),
                                                  q.get("step")))
