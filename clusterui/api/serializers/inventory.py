"""Nodes, GPUs and NICs with their latest values (from GpuLatest / NicLatest)."""

import datetime as dt

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusterui.inventory.models import Gpu, Nic, Node
from clusterui.telemetry.metrics import GPU_METRIC_NAMES
from clusterui.telemetry.models import GpuLatest, NicLatest


class GpuLatestSerializer(serializers.ModelSerializer):
    job = serializers.SerializerMethodField(
        help_text="The job holding the GPU at that sample, if you may see it")
    allocated = serializers.SerializerMethodField(
        help_text="Whether a job held the GPU at that sample")

    class Meta:
        model = GpuLatest
        fields = ["ts", "allocated", "job", *GPU_METRIC_NAMES]

    def get_allocated(self, obj) -> bool:
        return obj.job_id is not None

    def get_job(self, obj) -> int | None:
        visible = self.context.get("visible_jobs", set())
        return obj.job_id if obj.job_id in visible else None


class NicLatestSerializer(serializers.ModelSerializer):
    class Meta:
        model = NicLatest
        fields = ["ts", "rx_bytes_per_s", "tx_bytes_per_s"]


class GpuSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", read_only=True)
    latest = serializers.SerializerMethodField()

    class Meta:
        model = Gpu
        fields = ["id", "uuid", "node", "node_id", "index", "model", "memory_total_mib",
                  "power_limit_w", "pci_bus_id", "nvlink_bytes_per_s", "mig_mode",
                  "parent_id", "mig_profile", "mig_gi_id", "mig_ci_id", "mig_share",
                  "first_seen", "last_seen", "latest"]

    @extend_schema_field(GpuLatestSerializer(allow_null=True))
    def get_latest(self, obj):
        latest = getattr(obj, "latest", None)
        return None if latest is None else GpuLatestSerializer(latest, context=self.context).data


class NicSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", read_only=True)
    latest = serializers.SerializerMethodField()

    class Meta:
        model = Nic
        fields = ["id", "node", "node_id", "name", "kind", "link_bytes_per_s",
                  "first_seen", "last_seen", "latest"]

    @extend_schema_field(NicLatestSerializer(allow_null=True))
    def get_latest(self, obj):
        latest = getattr(obj, "latest", None)
        return None if latest is None else NicLatestSerializer(latest).data


class NodeGpuSerializer(GpuSerializer):
    class Meta(GpuSerializer.Meta):
        fields = ["id", "uuid", "index", "model", "memory_total_mib", "power_limit_w", "latest"]


class NodeNicSerializer(NicSerializer):
    class Meta(NicSerializer.Meta):
        fields = ["id", "name", "kind", "link_bytes_per_s", "latest"]


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    silent = serializers.SerializerMethodField(
        help_text="No batch from this node for longer than NODE_SILENT_AFTER_S: its latest "
                  "values are stale")
    gpus = NodeGpuSerializer(many=True, read_only=True)
    nics = NodeNicSerializer(many=True, read_only=True)

    class Meta:
        model = Node
        fields = ["id", "name", "cluster", "agent_version", "simulated", "sample_interval_s",
                  "first_seen", "last_seen", "silent", "gpus", "nics"]

    def get_silent(self, obj) -> bool:
        now = self.context.get("now") or timezone.now()
        return now - obj.heard_at > dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
