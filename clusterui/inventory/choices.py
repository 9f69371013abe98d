from django.db import models


class NicKind(models.TextChoices):
    INFINIBAND = "infiniband", "InfiniBand"
    ROCE = "roce", "RoCE"
    ETHERNET = "ethernet", "Ethernet"
