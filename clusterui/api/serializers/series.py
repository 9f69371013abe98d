"""The time-series answers' shapes, for the schema (the answers themselves are built by
``clusterui.api.timeseries.read`` and ``clusterui.api.fabric_ports.error_series``)."""

from rest_framework import serializers


class SeriesLineSerializer(serializers.Serializer):
    metric = serializers.CharField()
    unit = serializers.CharField()
    label = serializers.CharField(help_text="The metric's human name")
    source = serializers.ChoiceField(choices=["gpu", "nic", "job"])
    id = serializers.IntegerField(help_text="The GPU, NIC or job id")
    name = serializers.CharField(help_text="node/gpu<index>, node/<nic> or job <id>")
    node = serializers.CharField()
    values = serializers.ListField(child=serializers.FloatField(allow_null=True),
                                   help_text="One value per entry of ts; null: no sample")


class AxisSerializer(serializers.Serializer):
    """The time axis every series answer has: ``from`` and ``to`` (Python keywords, hence
    added in ``get_fields``), the bucket width and each bucket's start."""

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.DateTimeField()
        fields["to"] = serializers.DateTimeField()
        return fields

    step_s = serializers.IntegerField(help_text="Bucket width, seconds")
    ts = serializers.ListField(child=serializers.DateTimeField(),
                               help_text="Each bucket's start")


class SeriesSerializer(AxisSerializer):
    agg = serializers.CharField()
    series = SeriesLineSerializer(many=True)


class PortCounterSerializer(serializers.Serializer):
    counter = serializers.CharField(help_text="The error counter (IBA PortCounters name)")
    label = serializers.CharField()
    total = serializers.IntegerField(help_text="Its increases over the whole range")
    values = serializers.ListField(
        child=serializers.IntegerField(allow_null=True),
        help_text="Its increase in each bucket of ts; null: the port sent no sample then")


class PortErrorsSerializer(AxisSerializer):
    reported = serializers.ListField(
        child=serializers.BooleanField(),
        help_text="Whether the port sent a sample in each bucket of ts")
    counters = PortCounterSerializer(many=True)
