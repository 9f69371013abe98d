from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "clusterui.api"
    label = "api"
    verbose_name = "JSON API"

    def ready(self):
        from clusterui.api import schema  # noqa: F401  (registers the schema extension)
