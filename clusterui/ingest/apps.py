from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "clusterui.ingest"
    label = "ingest"
    verbose_name = "Ingest"
