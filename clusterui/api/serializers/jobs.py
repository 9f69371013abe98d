"""Jobs: the list (with the efficiency figures it sorts by) and the detail."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusterui.findings.models import Finding, JobEfficiency
from clusterui.jobs.models import Job
from clusterui.jobs.pernode import per_node


class JobSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    gpu_hours = serializers.FloatField(
        source="allocated_gpu_hours", read_only=True, allow_null=True,
        help_text="GPU-hours allocated over the job's life (null until first computed)")
    wasted_gpu_hours = serializers.FloatField(
        read_only=True, allow_null=True,
        help_text="Allocated GPU-hours the GPUs spent idle")
    efficiency_pct = serializers.SerializerMethodField(
        help_text="Used / allocated GPU-hours, in percent")
    judged_at = serializers.DateTimeField(
        source="efficiency.judged_at", read_only=True, allow_null=True,
        help_text="Data time up to which the detectors last judged the job; null while they "
                  "never have (grace period, too few samples)")
    finalized_at = serializers.DateTimeField(
        source="efficiency.finalized_at", read_only=True, allow_null=True,
        help_text="When the pass closed the books of the ended job; null while it runs or "
                  "its last data is still to be read")

    measured_pct = serializers.FloatField(
        source="efficiency.measured_pct", read_only=True, allow_null=True,
        help_text="The share of the job's run (from its start) its samples cover, in percent: "
                  "below 100 its GPU-hours figures take the time before its first sample to "
                  "be like the time since (measured_pct on /jobs/<id>/)")

    queue_wait_s = serializers.SerializerMethodField(
        help_text="Seconds from submit to start, where the scheduler reported both")

    class Meta:
        model = Job
        fields = ["id", "cluster", "scheduler", "external_id", "name", "user", "account",
                  "partition", "state", "started_at", "ended_at", "cpus", "gpu_hours",
                  "wasted_gpu_hours", "efficiency_pct", "measured_pct", "judged_at",
                  "finalized_at", "submitted_at", "queue_wait_s", "time_limit_s", "exit_state",
                  "exit_code", "exit_signal", "namespace", "pod", "owner_kind", "owner_name"]

    def get_queue_wait_s(self, obj) -> float | None:
        wait = obj.queue_wait
        return None if wait is None else wait.total_seconds()

    def get_efficiency_pct(self, obj) -> float | None:
        ratio = getattr(obj, "efficiency_ratio", None)
        return None if ratio is None else 100.0 * ratio


class PerNodeSerializer(serializers.Serializer):
    node = serializers.CharField()
    gpus = serializers.IntegerField()
    gpu_hours_allocated = serializers.FloatField()
    gpu_hours_used = serializers.FloatField()
    gpu_hours_wasted = serializers.FloatField()
    efficiency_pct = serializers.FloatField(
        allow_null=True, help_text="Used / allocated GPU-hours on this node, in percent "
                                   "(weighted as the job's efficiency)")
    nvml_util_mean_pct = serializers.FloatField(
        allow_null=True, help_text="Mean of its GPUs' NVML utilization means")
    mem_peak_mib = serializers.FloatField(allow_null=True)
    energy_j = serializers.FloatField(allow_null=True)


class EfficiencySerializer(serializers.ModelSerializer):
    """The detector pass's figures (not its internal running sums)."""

    efficiency_pct = serializers.FloatField(read_only=True, allow_null=True)
    measured_from = serializers.DateTimeField(
        read_only=True, allow_null=True,
        help_text="When the job's samples begin (its first sample less one sampling "
                  "interval). The window starts at the scheduler's start; before this the "
                  "mean over the samples stands in for time that was not measured")
    measured_pct = serializers.FloatField(
        read_only=True, allow_null=True,
        help_text="The share of the window (window_start to window_end) the samples cover, "
                  "in percent; null when not known")
    partly_measured = serializers.BooleanField(
        read_only=True,
        help_text="True when the samples cover less than 95 % of the window: the pages and "
                  "the jobstats report then say from when the job was measured")
    per_node = serializers.SerializerMethodField(
        help_text="Per node: its GPUs, their allocated, used and wasted GPU-hours, mean busy "
                  "(the efficiency's signal) and NVML utilization, memory and energy")

    class Meta:
        model = JobEfficiency
        fields = ["computed_at", "window_start", "window_end", "measured_from", "measured_pct",
                  "partly_measured", "through", "finalized_at",
                  "gpus", "gpu_hours_allocated", "gpu_hours_used", "gpu_hours_wasted",
                  "efficiency_pct", "util_source", "util_mean_pct", "per_gpu", "mem_peak_mib",
                  "mem_capacity_mib", "energy_j", "net_bytes", "nic_util_mean_pct",
                  "nic_util_peak_pct", "nvlink_util_mean_pct", "nvlink_util_peak_pct",
                  "cpu_cores_mean", "cpus_allocated", "per_node"]

    @extend_schema_field(PerNodeSerializer(many=True))
    def get_per_node(self, obj) -> list[dict]:
        return per_node(obj)


class AllocationSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="gpu.id")
    uuid = serializers.CharField(source="gpu.uuid")
    node = serializers.CharField(source="gpu.node.name")
    index = serializers.IntegerField(source="gpu.index")
    model = serializers.CharField(source="gpu.model")
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()


class JobFindingSerializer(serializers.ModelSerializer):
    class Meta:
        model = Finding
        fields = ["id", "kind", "severity", "state", "title", "explanation", "suggestion",
                  "wasted_gpu_hours", "first_seen", "last_seen", "acknowledged_at"]


class JobDetailSerializer(JobSerializer):
    efficiency = serializers.SerializerMethodField(
        help_text="Null until the detector pass has computed it")
    gpus = AllocationSerializer(source="allocations", many=True, read_only=True)
    findings = JobFindingSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "first_seen", "last_seen", "efficiency", "gpus",
                  "findings"]

    @extend_schema_field(EfficiencySerializer(allow_null=True))
    def get_efficiency(self, obj):
        efficiency = getattr(obj, "efficiency", None)
        return None if efficiency is None else EfficiencySerializer(efficiency).data
