"""Collector runs (node, boot id) with their sequence range and count: the gaps without a
scan of the ingest log."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0005_dedupe_and_bounded_log'),
        ('inventory', '0003_node_silent_alerted_at'),
    ]

    operations = [
        migrations.CreateModel(
            name='IngestRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('boot_id', models.CharField(max_length=64)),
                ('first_seq', models.BigIntegerField()),
                ('last_seq', models.BigIntegerField()),
                ('batches', models.BigIntegerField()),
                ('first_received', models.DateTimeField()),
                ('last_received', models.DateTimeField()),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='inventory.node')),
            ],
            options={
                'indexes': [models.Index(fields=['last_received'], name='ingestrun_last_received_idx')],
                'constraints': [models.UniqueConstraint(fields=('node', 'boot_id'), name='ingestrun_node_boot_uniq')],
            },
        ),
        # The runs the log already holds.
        migrations.RunSQL(
            """
            INSERT INTO ingest_ingestrun (node_id, boot_id, first_seq, last_seq, batches,
                                          first_received, last_received)
            SELECT node_id, boot_id, min(seq), max(seq), count(*), min(received_at),
                   max(received_at)
            FROM ingest_ingestbatch WHERE seq >= 1 GROUP BY node_id, boot_id
            """,
            migrations.RunSQL.noop,
        ),
    ]
