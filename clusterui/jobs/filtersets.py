"""Filtering and ordering of the jobs list: one FilterSet serves the web UI and the API."""

import datetime as dt

import django_filters
from django.core.exceptions import ValidationError
from django.core.validators import EMPTY_VALUES, ProhibitNullCharactersValidator
from django.db.models import F, FloatField, Q
from django.db.models.functions import Cast, NullIf

from clusterui.findings.choices import FindingKind
from clusterui.inventory.models import Cluster
from clusterui.jobs.choices import JobState, Scheduler
from clusterui.jobs.models import Job


def with_efficiency(queryset):
    """Annotate the numbers the list shows and sorts by (one JOIN, no N+1)."""
    return queryset.select_related("efficiency", "cluster").annotate(
        wasted_gpu_hours=F("efficiency__gpu_hours_wasted"),
        allocated_gpu_hours=F("efficiency__gpu_hours_allocated"),
        efficiency_ratio=Cast(F("efficiency__gpu_hours_used"), FloatField())
        / NullIf(F("efficiency__gpu_hours_allocated"), 0.0),
    )


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time, turned to UTC: PostgreSQL refuses offsets beyond ±15:59 (a valid
    ISO string such as ``...-19:53``), which would otherwise reach it and fail."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return value.astimezone(dt.UTC)
        except (OverflowError, ValueError):
            raise ValidationError("Enter a date/time between years 1 and 9999 in UTC.",
                                  code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


UNKNOWN_CLUSTER = "no cluster is named '%(value)s'"


class ClusterChoiceField(django_filters.fields.ModelChoiceField):
    """A cluster by name; a NUL character, which PostgreSQL cannot compare, is refused as
    the other text filters refuse it."""

    def to_python(self, value):
        if isinstance(value, str):
            ProhibitNullCharactersValidator()(value)
        return super().to_python(value)


class ClusterFilter(django_filters.ModelChoiceFilter):
    """``?cluster=NAME``: the rows of one cluster. A name no cluster has is an error (the
    API's 400, the page's message), never an empty list that looks like an idle cluster.
    ``paths``: where the cluster is from the row; a row matches on any of them."""

    field_class = ClusterChoiceField

    def __init__(self, *args, paths=("cluster",), **kwargs):
        self.paths = paths
        kwargs.setdefault("field_name", paths[0])  # for the OpenAPI schema's type
        kwargs.setdefault("queryset", Cluster.objects.all())
        kwargs.setdefault("to_field_name", "name")
        kwargs.setdefault("label", "Cluster")
        kwargs.setdefault("help_text", "Only this cluster's rows (its name); an unknown "
                                       "name is a 400")
        kwargs.setdefault("error_messages", {"invalid_choice": UNKNOWN_CLUSTER})
        super().__init__(*args, **kwargs)

    def filter(self, qs, value):
        if value in EMPTY_VALUES:
            return qs
        match = Q()
        for path in self.paths:
            match |= Q(**{f"{path}_id": value.pk})
        return qs.filter(match)


class NullsLastOrderingFilter(django_filters.OrderingFilter):
    """Rows without a value (a job whose efficiency is not computed yet) sort last in either
    direction: PostgreSQL would put them first in a descending sort, so "most wasted first"
    would open with jobs that have no figures at all."""

    def filter(self, qs, value):
        if value in EMPTY_VALUES:
            return qs
        fields = [self.get_ordering_value(p) for p in value
                  if p not in EMPTY_VALUES]
        return qs.order_by(*[
            F(f[1:]).desc(nulls_last=True) if f.startswith("-") else F(f).asc(nulls_last=True)
            for f in fields
        ], "-id")


class JobFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search",
                                  help_text="Job id, name, user, account, namespace or pod "
                                            "contains this")
    cluster = ClusterFilter()
    external_id = django_filters.CharFilter(
        field_name="external_id", label="Scheduler job id",
        help_text="The scheduler's job id, exactly (the same id may exist on several "
                  "clusters: add cluster)")
    user = django_filters.CharFilter(field_name="user")
    account = django_filters.CharFilter(field_name="account")
    partition = django_filters.CharFilter(field_name="partition")
    namespace = django_filters.CharFilter(
        field_name="namespace", help_text="Kubernetes namespace, exactly (add cluster to tell "
                                          "apart clusters with the same namespace)")
    state = django_filters.ChoiceFilter(choices=JobState.choices)
    scheduler = django_filters.ChoiceFilter(choices=Scheduler.choices)
    finding = django_filters.ChoiceFilter(
        choices=FindingKind.choices, method="with_finding", label="Finding",
        help_text="Jobs with a finding of this kind (open or closed)")
    active_from = UtcIsoDateTimeFilter(
        method="active_from_filter", label="Active after",
        help_text="Jobs still running at, or ended after, this time (ISO 8601)")
    active_to = UtcIsoDateTimeFilter(
        field_name="started_at", lookup_expr="lt", label="Active before",
        help_text="Jobs started before this time (ISO 8601)")
    ordering = NullsLastOrderingFilter(
        fields=(
            ("started_at", "started"),
            ("wasted_gpu_hours", "wasted"),
            ("efficiency_ratio", "efficiency"),
            ("allocated_gpu_hours", "gpu_hours"),
            ("user", "user"),
        ),
        help_text="started, wasted, efficiency, gpu_hours or user; prefix - to reverse",
    )

    class Meta:
        model = Job
        fields = []

    def search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(external_id__icontains=value) | Q(name__icontains=value)
            | Q(user__icontains=value) | Q(account__icontains=value)
            | Q(namespace__icontains=value) | Q(pod__icontains=value)
        )

    def with_finding(self, queryset, name, value):
        return queryset.filter(findings__kind=value).distinct()

    def active_from_filter(self, queryset, name, value):
        return queryset.filter(Q(ended_at__isnull=True) | Q(ended_at__gte=value))
