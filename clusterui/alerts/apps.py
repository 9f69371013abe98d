from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "clusterui.alerts"
    label = "alerts"
    verbose_name = "Alert emails"

    def ready(self):
        from clusterui.alerts import checks  # noqa: F401  (registers the system checks)
