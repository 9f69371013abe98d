"""Filters of the inventory lists. Jobs and findings reuse the web UI's filtersets
(``clusterui.jobs.filtersets``, ``clusterui.findings.filtersets``)."""

import django_filters
from django.utils import timezone

from clusterui.fabric import health
from clusterui.gpuhealth import classify
from clusterui.inventory.choices import NicKind
from clusterui.inventory.models import Gpu, Nic, Node


class NodeFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains",
                                     help_text="Node name contains this")
    simulated = django_filters.BooleanFilter()
    gpu_health = django_filters.ChoiceFilter(
        choices=[(v, v) for v in (classify.DRAIN, classify.DEGRADED, classify.HEALTHY, "none")],
        method="filter_gpu_health",
        help_text="Nodes whose GPU health is this state (drain: a GPU needs a reset or "
                  "replacement; degraded; healthy); none: no health reading yet")

    def filter_gpu_health(self, queryset, name, value):
        states = {node_id: h.state for node_id, h in classify.node_health().items()}
        if value == "none":
            return queryset.exclude(id__in=list(states))
        return queryset.filter(id__in=[n for n, state in states.items() if state == value])

    class Meta:
        model = Node
        fields = []


class GpuFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="node__cluster__name")
    node = django_filters.CharFilter(field_name="node__name")
    model = django_filters.CharFilter(field_name="model", lookup_expr="icontains",
                                      help_text="GPU model contains this")
    uuid = django_filters.CharFilter(field_name="uuid")
    # A choice, not a BooleanFilter: that one ignores a value it cannot read ("maybe").
    physical = django_filters.ChoiceFilter(
        choices=[("true", "true"), ("false", "false")], method="filter_physical",
        help_text="true: physical GPUs only (a MIG-enabled GPU, not its MIG instances), as "
                  "every GPU count counts them; false: MIG instances only")

    class Meta:
        model = Gpu
        fields = []

    def filter_physical(self, queryset, name, value):
        return (queryset.physical() if value == "true"
                else queryset.filter(parent__isnull=False))


class NicFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="node__cluster__name")
    node = django_filters.CharFilter(field_name="node__name")
    kind = django_filters.ChoiceFilter(choices=NicKind.choices)
    fabric = django_filters.ChoiceFilter(
        choices=[(v, v) for v in ("unhealthy", *health.VERDICTS)],
        method="filter_fabric",
        help_text="Ports whose fabric verdict is this one (unhealthy: down, degraded or "
                  "erroring); ports without fabric health never match")

    def filter_fabric(self, queryset, name, value):
        threshold = health.error_threshold()
        ports = health.ports(*health.window(timezone.now()))
        return queryset.filter(id__in=[
            p.nic_id for p in ports
            if (p.unhealthy(threshold) if value == "unhealthy" else p.verdict(threshold) == value)])

    class Meta:
        model = Nic
        fields = []
