from django.apps import AppConfig


class GpuHealthConfig(AppConfig):
    name = "clusterui.gpuhealth"
    label = "gpuhealth"
    verbose_name = "GPU health"
