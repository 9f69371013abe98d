from django.apps import AppConfig


class FabricConfig(AppConfig):
    name = "clusterui.fabric"
    label = "fabric"
    verbose_name = "Fabric health"
