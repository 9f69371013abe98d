"""What the cluster is made of: clusters, nodes, their GPUs and network interfaces.

Rows are created and refreshed by ingest (``clusterui.ingest.writer``) from the inventory
that every batch carries; nothing here is edited by hand.
"""

from django.db import models
from django.db.models.functions import Coalesce

from clusterui.inventory.choices import NicKind


class Cluster(models.Model):
    name = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Node(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=128)
    agent_version = models.CharField(max_length=32, blank=True)
    # Set when the node's collector runs on the NVML simulator: the UI labels it.
    simulated = models.BooleanField(default=False)
    # The collector's sampling interval: charts never bucket finer than this.
    sample_interval_s = models.FloatField(null=True)
    # When the admins were told this node went silent (cleared by its next batch's data).
    silent_alerted_at = models.DateTimeField(null=True, blank=True)
    first_seen = models.DateTimeField()
    # Data time: the newest sample the node has sent (a back-fill moves it into the past).
    last_seen = models.DateTimeField()
    # Arrival time: when its newest batch reached the server. "Silent" and "still
    # delivering" are judged on this, never on data time (a node replaying its spool sends
    # old data and is anything but silent).
    reported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            # Ingest upserts nodes by (cluster, name).
            models.UniqueConstraint(fields=["cluster", "name"], name="node_cluster_name_uniq"),
        ]

    def __str__(self):
        return self.name

    @property
    def heard_at(self):
        """When the node was last heard from: its newest batch's arrival (its data time
        for rows from before arrival times were kept). "Silent" is judged on this."""
        return self.reported_at or self.last_seen


def heard_at(prefix: str = ""):
    """``Node.heard_at`` in a query; ``prefix`` reaches the node through a relation
    (``"node__"``)."""
    return Coalesce(f"{prefix}reported_at", f"{prefix}last_seen")


class GpuQuerySet(models.QuerySet):
    def physical(self):
        """Physical GPUs, without MIG instances: what every "GPUs" figure counts
        (``clusterui.inventory.counting``)."""
        return self.filter(parent__isnull=True)


class Gpu(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    # A GPU is identified by its UUID: it keeps its history if it moves to another node.
    uuid = models.CharField(max_length=96, unique=True)
    index = models.PositiveSmallIntegerField()
    model = models.CharField(max_length=96, blank=True)
    memory_total_mib = models.IntegerField(null=True)
    power_limit_w = models.FloatField(null=True)
    pci_bus_id = models.CharField(max_length=32, blank=True)
    nvlink_bytes_per_s = models.FloatField(null=True, help_text="Total NVLink capacity, bytes/s")
    mig_mode = models.BooleanField(null=True)
    # A MIG instance is a GPU of its own (its uuid is "MIG-..."), under its parent GPU.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="mig_instances")
    mig_profile = models.CharField(max_length=32, blank=True, help_text="e.g. 1g.10gb")
    mig_gi_id = models.PositiveSmallIntegerField(null=True, help_text="GPU instance id")
    mig_ci_id = models.PositiveSmallIntegerField(null=True, help_text="Compute instance id")
    mig_share = models.FloatField(
        null=True, help_text="The instance's share of its GPU: its GPU-instance slices over "
                             "the GPU's (job efficiency counts it as this much of a GPU)")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    objects = GpuQuerySet.as_manager()

    class Meta:
        ordering = ["node__name", "index"]
        indexes = [
            # The node page and the home grid list a node's GPUs in index order.
            models.Index(fields=["node", "index"], name="gpu_node_index_idx"),
        ]

    def __str__(self):
        return f"{self.node.name}/gpu{self.index}"

    @property
    def label(self) -> str:
        """'GPU 0', or for a MIG instance 'GPU 0 · MIG 1g.10gb (GI 3)'."""
        return gpu_label(self.index, self.parent_id, self.mig_profile, self.mig_gi_id)


def gpu_label(index: int, parent_id: int | None, profile: str, gi_id: int | None) -> str:
    if parent_id is None:
        return f"GPU {index}"
    gi = f" (GI {gi_id})" if gi_id is not None else ""
    return f"GPU {index} · MIG {profile or '?'}{gi}"


class Nic(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="nics")
    name = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=NicKind.choices)
    link_bytes_per_s = models.FloatField(null=True, help_text="Link capacity, bytes/s")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["node__name", "name"]
        constraints = [
            # Ingest upserts NICs by (node, name).
            models.UniqueConstraint(fields=["node", "name"], name="nic_node_name_uniq"),
        ]

    def __str__(self):
        return f"{self.node.name}/{self.name}"
