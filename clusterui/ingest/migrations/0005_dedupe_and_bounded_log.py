"""Duplicate counts on the ingest log, and its indexes for a health page that reads a
recent window only (covering index by received_at; partial ones for the few batches with
refusals, spool drops or duplicates)."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # The log can be large when this runs: its indexes are built without blocking ingest.
    atomic = False

    dependencies = [
        ('ingest', '0004_ingestkey_allow_cluster_signatures'),
        ('inventory', '0003_node_silent_alerted_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='ingestbatch',
            name='duplicate_reasons',
            field=models.JSONField(blank=True, db_default=models.Value({}, models.JSONField()), default=dict),
        ),
        migrations.AddField(
            model_name='ingestbatch',
            name='duplicates',
            field=models.IntegerField(db_default=0, default=0),
        ),
        AddIndexConcurrently(
            model_name='ingestbatch',
            index=models.Index(fields=['received_at'], include=('node', 'boot_id', 'seq', 'key_id'), name='ingestbatch_recv_cover_idx'),
        ),
        AddIndexConcurrently(
            model_name='ingestbatch',
            index=models.Index(condition=models.Q(('rejected__gt', 0)), fields=['received_at'], name='ingestbatch_rejected_idx'),
        ),
        AddIndexConcurrently(
            model_name='ingestbatch',
            index=models.Index(condition=models.Q(('spool_dropped__gt', 0)), fields=['received_at'], name='ingestbatch_spool_idx'),
        ),
        AddIndexConcurrently(
            model_name='ingestbatch',
            index=models.Index(condition=models.Q(('duplicates__gt', 0)), fields=['received_at'], name='ingestbatch_duplicates_idx'),
        ),
        # Last: the covering index above replaces it.
        RemoveIndexConcurrently(
            model_name='ingestbatch',
            name='ingestbatch_received_idx',
        ),
    ]
