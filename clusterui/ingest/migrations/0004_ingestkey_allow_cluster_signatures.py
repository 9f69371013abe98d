"""Node keys: a key accepts cluster-wide signatures only when allowed. The keys that exist
already were used cluster-wide, so they keep allowing it (the column is added with True for
them); new keys default to node keys only."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0003_ingestbatch_key_id'),
    ]

    operations = [
        migrations.AddField(
            model_name='ingestkey',
            name='allow_cluster_signatures',
            field=models.BooleanField(default=True),
        ),
        migrations.AlterField(
            model_name='ingestkey',
            name='allow_cluster_signatures',
            field=models.BooleanField(default=False, help_text='Accept batches signed with the cluster secret itself (any node\'s name), not only with each node\'s derived key'),
        ),
    ]
