"""The allocations table leaves half of each page free (fillfactor 50), for the same
per-flush ``last_seen`` touch as the GPU and NIC tables: why, and what it measured, in
inventory 0006. ``jobs_job``, wide and kept for years, is left full.
"""

from django.db import migrations

from clusterui.migration_ops import fillfactor

TABLES = ("jobs_jobgpu",)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0007_job_account_started_idx")]

    operations = [fillfactor(TABLES, 50)]
