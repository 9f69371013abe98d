"""A job's origin node (only its reports may change the job's user, account and name) and
the log of such changes. Existing jobs get as origin the node of their first allocated GPU;
a job without any keeps none: its user, account and name can then only be filled in while
empty, never changed."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0003_node_silent_alerted_at'),
        ('jobs', '0002_list_and_overview_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='origin_node',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='inventory.node'),
        ),
        migrations.CreateModel(
            name='JobMetadataChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('field', models.CharField(max_length=16)),
                ('old', models.CharField(blank=True, max_length=256)),
                ('new', models.CharField(blank=True, max_length=256)),
                ('accepted', models.BooleanField()),
                ('at', models.DateTimeField()),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='metadata_changes', to='jobs.job')),
                ('node', models.ForeignKey(help_text='The node whose report it was', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='inventory.node')),
            ],
            options={
                'ordering': ['-at', '-id'],
                'indexes': [models.Index(fields=['job', '-at'], name='jobmetachange_job_at_idx')],
            },
        ),
        migrations.RunSQL(
            """
            UPDATE jobs_job j SET origin_node_id = first.node_id
            FROM (SELECT DISTINCT ON (a.job_id) a.job_id, g.node_id
                  FROM jobs_jobgpu a JOIN inventory_gpu g ON g.id = a.gpu_id
                  ORDER BY a.job_id, a.first_seen, a.id) AS first
            WHERE j.id = first.job_id
            """,
            migrations.RunSQL.noop,
        ),
    ]
