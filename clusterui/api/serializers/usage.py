from rest_framework import serializers


class UsageRowSerializer(serializers.Serializer):
    """A row of ``clusterui.jobs.usage.usage_summary``."""

    name = serializers.CharField(help_text="The user, account or namespace name")
    jobs = serializers.IntegerField()
    gpu_hours = serializers.FloatField(help_text="GPU-hours allocated")
    used_gpu_hours = serializers.FloatField()
    wasted_gpu_hours = serializers.FloatField()
    efficiency_pct = serializers.FloatField(allow_null=True)
    measured_pct = serializers.FloatField(
        allow_null=True,
        help_text="The share of gpu_hours the jobs' samples cover, in percent: each job "
                  "counts its allocated GPU-hours times the share of its run since its first "
                  "sample (measured_pct on /jobs/<id>/). Below 100, the figures take the time "
                  "before a job's first sample to be like the time after it")
