from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "clusterui.inventory"
    label = "inventory"
    verbose_name = "Inventory"
