from rest_framework import serializers

from clusterui.findings.models import Finding


class FindingJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField()
    user = serializers.CharField()
    account = serializers.CharField()
    name = serializers.CharField()


class FindingSerializer(serializers.ModelSerializer):
    kind_label = serializers.CharField(source="get_kind_display", read_only=True)
    job = FindingJobSerializer(read_only=True, allow_null=True)
    node = serializers.CharField(source="node.name", read_only=True, allow_null=True)
    gpu = serializers.SerializerMethodField(help_text="The GPU it is about, if one")
    acknowledged_by = serializers.CharField(source="acknowledged_by.get_username",
                                            read_only=True, allow_null=True)

    class Meta:
        model = Finding
        fields = ["id", "kind", "kind_label", "severity", "state", "job", "node", "gpu",
                  "window_start", "window_end", "first_seen", "last_seen", "closed_at",
                  "title", "explanation", "suggestion", "evidence", "wasted_gpu_hours",
                  "acknowledged_at", "acknowledged_by"]

    def get_gpu(self, obj) -> str | None:
        return None if obj.gpu is None else f"{obj.gpu.node.name}/gpu{obj.gpu.index}"
