"""Fewer index entries per batch stored: the ingest log's redundant indexes go, and the
per-run row (``ingest_ingestrun``) and the node row (``inventory_node``), which every flush
updates for each node, are updated in place (heap-only tuples).

- ``ingest_ingestbatch`` and ``ingest_ingestrun`` lose the index Django gives a foreign key:
  their unique keys, (node, boot_id, seq) and (node, boot_id), lead with the node and serve
  every lookup by node (the cascade from a deleted node included).
- ``ingest_ingestrun`` loses its index on ``last_received``: each flush sets that column for
  every node it stores, and an indexed column changed makes every such update a new entry in
  every index of the table (none of the runs' updates was a heap-only tuple, measured with
  ``benchmarks/ingest_steady.py``). The health page and pruning read the table whole: a row
  per collector run (node and boot), pruned with the ingest log.
- Both tables leave half of each page free (fillfactor 50), as the GPU, NIC and "latest"
  tables do (inventory 0006), so the updated row finds room on its own page.
"""

from django.db import migrations, models
from django.db.models import deletion

from clusterui.migration_ops import fillfactor

TABLES = ("ingest_ingestrun", "inventory_node")


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0007_ingestbatch_signature_version"),
        ("inventory", "0006_touch_fillfactor"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="ingestrun", name="ingestrun_last_received_idx"),
        migrations.AlterField(
            model_name="ingestbatch",
            name="node",
            field=models.ForeignKey(db_index=False, on_delete=deletion.CASCADE,
                                    related_name="batches", to="inventory.node"),
        ),
        migrations.AlterField(
            model_name="ingestrun",
            name="node",
            field=models.ForeignKey(db_index=False, on_delete=deletion.CASCADE,
                                    related_name="+", to="inventory.node"),
        ),
        fillfactor(TABLES, 50),
    ]
