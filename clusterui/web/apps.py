from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "clusterui.web"
    label = "web"
    verbose_name = "Web UI"
