from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "clusterui.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"
