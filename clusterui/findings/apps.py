from django.apps import AppConfig


class FindingsConfig(AppConfig):
    name = "clusterui.findings"
    label = "findings"
    verbose_name = "Findings"
