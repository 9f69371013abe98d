"""Nodes, GPUs and NICs with their latest values (from GpuLatest / NicLatest)."""

import datetime as dt

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusterui.gpuhealth import classify
from clusterui.gpuhealth.drain import short_reason
from clusterui.inventory import counting
from clusterui.inventory.counting import BUSY_UTIL_PCT
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
    gone = serializers.SerializerMethodField(
        help_text="Its node has not reported it for GPU_GONE_AFTER_S while reporting (a "
                  "board replaced, a MIG instance destroyed): its latest values are its last, "
                  "not now's, and the node's counts leave it out")
    latest = serializers.SerializerMethodField()

    class Meta:
        model = Gpu
        fields = ["id", "uuid", "node", "node_id", "index", "model", "memory_total_mib",
                  "power_limit_w", "pci_bus_id", "nvlink_bytes_per_s", "mig_mode",
                  "parent_id", "mig_profile", "mig_gi_id", "mig_ci_id", "mig_share",
                  "first_seen", "last_seen", "gone", "latest"]

    def get_gone(self, obj) -> bool:
        return counting.is_gone(obj, obj.node)

    @extend_schema_field(GpuLatestSerializer(allow_null=True))
    def get_latest(self, obj):
        latest = getattr(obj, "latest", None)
        return None if latest is None else GpuLatestSerializer(latest, context=self.context).data


class PortHealthSerializer(serializers.Serializer):
    """A fabric port's health as the fabric page shows it (``clusterui.fabric.health``)."""

    ts = serializers.DateTimeField(help_text="When the collector last read the port's link")
    state = serializers.CharField(source="state_text",
                                  help_text="Logical state (ACTIVE, DOWN, INIT, ARMED)")
    phys_state = serializers.CharField(source="phys_text",
                                       help_text="Physical state (LinkUp, Polling, Disabled, …)")
    rate_gbps = serializers.FloatField(source="link_gbps", allow_null=True,
                                       help_text="The link's rate now, Gb/s")
    width = serializers.IntegerField(source="link_width", allow_null=True,
                                     help_text="Lanes now (1X, 4X: 1, 4)")
    nominal_gbps = serializers.FloatField(
        allow_null=True, help_text="The highest rate the port has run at (null: never up)")
    nominal_width = serializers.IntegerField(allow_null=True)
    rate_pct = serializers.FloatField(allow_null=True,
                                      help_text="rate_gbps as a share of nominal_gbps")
    verdict = serializers.SerializerMethodField(
        help_text="The worst that holds: down (after having been up), degraded (below its "
                  "nominal rate), erroring (DETECTOR_FABRIC_ERRORS or more error counter "
                  "increases in the window, or the link went down and came back), healthy")
    errors = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Each error counter's increase over the window (window_s, up to now)")
    window_s = serializers.SerializerMethodField()
    counters_saturated = serializers.IntegerField(
        allow_null=True, help_text="Error counters stuck at their maximum (later errors are "
                                   "not counted)")
    congestion = serializers.DictField(
        child=serializers.IntegerField(allow_null=True),
        help_text="RoCE ports: the mlx5 congestion, drop, retransmission and pause counters' "
                  "rise in the newest sample interval; empty for InfiniBand")

    def get_verdict(self, obj) -> str:
        return obj.verdict(self.context["fabric_threshold"])

    def get_window_s(self, obj) -> int:
        return int(self.context["fabric_window_s"])


class NicSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", read_only=True)
    latest = serializers.SerializerMethodField()
    fabric = serializers.SerializerMethodField(
        help_text="InfiniBand / RoCE health (link, rate against nominal, errors); null for a "
                  "port that reports none (Ethernet, an older collector) or was not heard "
                  "from in the window")

    class Meta:
        model = Nic
        fields = ["id", "node", "node_id", "name", "kind", "link_bytes_per_s",
                  "first_seen", "last_seen", "latest", "fabric"]

    @extend_schema_field(NicLatestSerializer(allow_null=True))
    def get_latest(self, obj):
        latest = getattr(obj, "latest", None)
        return None if latest is None else NicLatestSerializer(latest).data

    @extend_schema_field(PortHealthSerializer(allow_null=True))
    def get_fabric(self, obj):
        port = self.context.get("fabric", {}).get(obj.id)
        return None if port is None else PortHealthSerializer(port, context=self.context).data


class NodeGpuSerializer(GpuSerializer):
    class Meta(GpuSerializer.Meta):
        fields = ["id", "uuid", "index", "model", "memory_total_mib", "power_limit_w",
                  "parent_id", "mig_profile", "mig_share", "gone", "latest"]


class NodeNicSerializer(NicSerializer):
    class Meta(NicSerializer.Meta):
        fields = ["id", "name", "kind", "link_bytes_per_s", "latest"]


class GpuVerdictSerializer(serializers.Serializer):
    """One GPU's health counters read by NVIDIA's guidance (``clusterui.gpuhealth.classify``)."""

    index = serializers.IntegerField(help_text="The GPU's NVML index on the node")
    action = serializers.ChoiceField(
        choices=[classify.RESET, classify.REPLACE], allow_null=True,
        help_text="reset: nvidia-smi -r with no process on it, or a reboot (a row remap or "
                  "page retirement pending, uncorrectable ECC errors since the last reset); "
                  "replace: RMA (a row remapping failed, too many retired pages); null: none")
    reasons = serializers.SerializerMethodField(
        help_text="Why the action, each with the NVIDIA document it follows")
    warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text="Worth watching, no action (rows remapped for uncorrectable errors, NVLink "
                  "recovery errors, PCIe replays)")

    def get_reasons(self, obj) -> list[dict[str, str]]:
        return [{"text": text, "source": source} for text, source in obj.reasons]


class NodeGpuHealthSerializer(serializers.Serializer):
    """A node's GPU health as the overview, the nodes list and the drain list read it."""

    state = serializers.ChoiceField(
        choices=[classify.HEALTHY, classify.DEGRADED, classify.DRAIN],
        help_text="drain: a GPU needs a reset or replacement (drain the node first); "
                  "degraded: a GPU has something worth watching; healthy otherwise")
    label = serializers.CharField()
    reason = serializers.CharField(
        help_text="The GPUs that matter, in short (empty when healthy)")
    drain_reason = serializers.SerializerMethodField(
        help_text="With state drain: the reason the drain list gives Slurm (one line, at "
                  "most 120 characters), e.g. for scontrol update nodename=<node> "
                  "state=drain reason=<this>; null otherwise")
    gpus = GpuVerdictSerializer(many=True, help_text="Every GPU with a health reading")

    def get_drain_reason(self, obj) -> str | None:
        return short_reason(obj) if obj.state == classify.DRAIN else None


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    silent = serializers.SerializerMethodField(
        help_text="No batch from this node for longer than NODE_SILENT_AFTER_S: its latest "
                  "values are stale")
    gpu_count = serializers.SerializerMethodField(
        help_text="Physical GPUs: a MIG-enabled GPU counts once, its MIG instances (listed in "
                  "gpus with a parent_id) not at all, gone GPUs (gone: true) not at all")
    gpus_allocated = serializers.SerializerMethodField(
        help_text="GPUs held by a job now (0 while silent); a MIG instance counts its share "
                  "of its GPU (mig_share), so 3 of 7 slices held is 3/7")
    gpus_idle_allocated = serializers.SerializerMethodField(
        help_text="Of gpus_allocated, those below the busy threshold now (the larger of NVML "
                  "utilization and SM activity; a MIG instance: SM activity), as the nodes "
                  "list counts them")
    gpu_health = serializers.SerializerMethodField(
        help_text="GPU health from the collector's health counters (ECC, row remapping, "
                  "retired pages, NVLink and PCIe errors); null before the node's first health "
                  "reading (an older collector, a driver that reports none)")
    gpus = NodeGpuSerializer(many=True, read_only=True)
    nics = NodeNicSerializer(many=True, read_only=True)

    class Meta:
        model = Node
        fields = ["id", "name", "cluster", "agent_version", "simulated", "sample_interval_s",
                  "first_seen", "last_seen", "silent", "gpu_count", "gpus_allocated",
                  "gpus_idle_allocated", "gpu_health", "gpus", "nics"]

    @extend_schema_field(NodeGpuHealthSerializer(allow_null=True))
    def get_gpu_health(self, obj):
        health = self.context.get("gpu_health", {}).get(obj.id)
        return None if health is None else NodeGpuHealthSerializer(health).data

    def get_silent(self, obj) -> bool:
        now = self.context.get("now") or timezone.now()
        return now - obj.heard_at > dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)

    def get_gpu_count(self, obj) -> int:
        return sum(1 for g in obj.gpus.all() if g.parent_id is None and not counting.is_gone(g, obj))

    def _held(self, obj) -> list:
        """(GPU, latest) of the node's GPUs a job holds now; none while it is silent."""
        if self.get_silent(obj):
            return []
        return [(g, g.latest) for g in obj.gpus.all()
                if getattr(g, "latest", None) is not None and g.latest.job_id is not None
                and not counting.is_gone(g, obj)]

    def get_gpus_allocated(self, obj) -> float:
        return round(sum(counting.share_of(g) for g, _ in self._held(obj)), 4)

    def get_gpus_idle_allocated(self, obj) -> float:
        idle = [g for g, latest in self._held(obj)
                if (busy := counting.busy_pct_of(g, latest)) is not None and busy < BUSY_UTIL_PCT]
        return round(sum(counting.share_of(g) for g in idle), 4)
