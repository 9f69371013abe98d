from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "clusterui.jobs"
    label = "jobs"
    verbose_name = "Jobs"
