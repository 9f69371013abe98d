from rest_framework import serializers


class UsageRowSerializer(serializers.Serializer):
    """A row of ``clusterui.jobs.usage.usage_summary``."""

    name = serializers.CharField(help_text="The user, account or namespace name")
    jobs = serializers.IntegerField()
    gpu_hours = serializers.FloatField(help_text="GPU-hours allocated")
    used_gpu_hours = serializers.FloatField()
    wasted_gpu_hours = serializers.FloatField()
    efficiency_pct = serializers.FloatField(allow_null=True)
