"""Filtering of the findings list: one FilterSet serves the web UI and the API."""

import django_filters
from django.db.models import Case, IntegerField, Value, When

from clusterui.findings.choices import FindingKind, FindingState, Severity
from clusterui.findings.models import Finding
from clusterui.jobs.filtersets import ClusterFilter, UtcIsoDateTimeFilter


class FindingFilterSet(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=FindingKind.choices)
    # A job's finding is its job's cluster's; a node's finding (no job) its node's.
    cluster = ClusterFilter(paths=("job__cluster", "node__cluster"))
    severity = django_filters.ChoiceFilter(choices=Severity.choices)
    state = django_filters.ChoiceFilter(choices=FindingState.choices)
    user = django_filters.CharFilter(field_name="job__user")
    account = django_filters.CharFilter(field_name="job__account")
    job = django_filters.NumberFilter(field_name="job_id")
    node = django_filters.CharFilter(field_name="node__name")
    acknowledged = django_filters.BooleanFilter(field_name="acknowledged_at",
                                                lookup_expr="isnull", exclude=True)
    since = UtcIsoDateTimeFilter(field_name="last_seen", lookup_expr="gte",
                                 help_text="Seen at or after (ISO 8601)")
    ordering = django_filters.OrderingFilter(
        fields=(("last_seen", "last_seen"), ("first_seen", "first_seen"),
                ("wasted_gpu_hours", "wasted"), ("severity_rank", "severity")),
        help_text="last_seen, first_seen, wasted or severity (info < warning < critical); "
                  "prefix - to reverse",
    )

    class Meta:
        model = Finding
        fields = []

    @property
    def qs(self):
        # Severity sorts by rank, not alphabetically (critical, info, warning).
        if not hasattr(self, "_qs"):
            rank = Case(*(When(severity=s.value, then=Value(s.rank)) for s in Severity),
                        output_field=IntegerField())
            self.queryset = self.queryset.annotate(severity_rank=rank)
        return super().qs
