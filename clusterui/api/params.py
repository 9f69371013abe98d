"""Query parameters shared by the time-series and usage endpoints, as serializers: they
validate (a bad value is a 400 naming the parameter) and document themselves in the
OpenAPI schema."""

import datetime as dt
import re

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusterui.inventory.models import Cluster
from clusterui.jobs.filtersets import UNKNOWN_CLUSTER
from clusterui.jobs.usage import GROUPS
from clusterui.telemetry.series import AGGREGATES
from clusterui.telemetry.timebounds import EARLIEST, LATEST, parse_iso

MAX_STEP_S = 7 * 86400
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def parse_time(raw: str) -> dt.datetime:
    """ISO 8601 (a time without an offset is in the server's TIME_ZONE, UTC by default; a
    bare date is its midnight) or Unix seconds."""
    raw = raw.strip()
    value = None
    if _NUMBER.match(raw):
        seconds = float(raw)
        if EARLIEST.timestamp() <= seconds < LATEST.timestamp():
            value = dt.datetime.fromtimestamp(seconds, dt.UTC)
    else:
        value = parse_iso(raw, bare_date=True)
    if value is None:
        raise serializers.ValidationError(
            f"expected an ISO 8601 time (2026-03-02T14:00:00Z) or Unix seconds, got {raw!r}")
    if not EARLIEST <= value < LATEST:
        raise serializers.ValidationError(
            f"{raw!r} is outside {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}")
    return value


@extend_schema_field(OpenApiTypes.STR)
class TimeParam(serializers.Field):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("expected a time")
        return parse_time(data)

    def to_representation(self, value):
        return value.isoformat()


class TimeRangeQuery(serializers.Serializer):
    """``from`` and ``to`` (Python keywords, hence added in ``get_fields``)."""

    range_help = ("ISO 8601 (2026-03-02T14:00:00Z; without an offset: "
                  f"{settings.TIME_ZONE}) or Unix seconds")

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = TimeParam(required=False, help_text=f"Start, {self.range_help}")
        fields["to"] = TimeParam(required=False, help_text=f"End, {self.range_help}")
        return fields

    def validate(self, attrs):
        start, end = attrs.get("from"), attrs.get("to")
        if start is not None and end is not None and end <= start:
            raise serializers.ValidationError({"to": "must be after from"})
        return attrs


class StepQuery(TimeRangeQuery):
    step = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_STEP_S,
        help_text="Bucket width in seconds; automatic when left out (at most 600 buckets, "
                  "never finer than the nodes' sampling interval)")


class MetricsQuery(StepQuery):
    metrics = serializers.CharField(
        required=False, max_length=2000,
        help_text="Comma-separated metric names (see the endpoint's description; without "
                  "it, `util_pct`, or a NIC's `rx_bytes_per_s,tx_bytes_per_s`)")
    agg = serializers.ChoiceField(choices=sorted(AGGREGATES), required=False, default="avg",
                                  help_text="How samples in a bucket are combined")

    def validate_metrics(self, value):
        names = list(dict.fromkeys(m.strip() for m in value.split(",") if m.strip()))
        if not names:
            raise serializers.ValidationError("name at least one metric")
        return names


class UsageQuery(TimeRangeQuery):
    group = serializers.ChoiceField(choices=list(GROUPS), required=False, default="user",
                                    help_text="Summarise per user, per account or per Kubernetes namespace")
    cluster = serializers.CharField(
        required=False, max_length=64,
        help_text="Only this cluster's jobs (its name); an unknown name is a 400")

    def validate_cluster(self, value):
        cluster = Cluster.objects.filter(name=value).first()
        if cluster is None:
            raise serializers.ValidationError(UNKNOWN_CLUSTER % {"value": value})
        return cluster
