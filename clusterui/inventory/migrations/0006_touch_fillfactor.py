"""The GPU and NIC tables leave half of each page free (fillfactor 50), as the "latest"
tables do (telemetry 0012); the allocations table too (jobs 0008).

A flush touches the ``last_seen`` of every GPU, NIC and allocation whose data moved on by a
minute (``writer._Touch``). With full pages each such update puts the new version on another
page and an entry in every index (six on ``inventory_gpu``); with room on the page it is a
heap-only tuple. Measured with ``benchmarks/ingest_steady.py`` (1,000 nodes): the flushes
that touch went from 0.54-0.60 to 0.41-0.45 ms per batch. These tables hold a row per
device or allocation, which can afford it (``jobs_job``, wide and kept for years, is left
full). ``tests/ingest/test_inventory_touch.py``. Rows already stored keep their pages until
they move; the setting applies to every page written from now on.
"""

from django.db import migrations

from clusterui.migration_ops import fillfactor

TABLES = ("inventory_gpu", "inventory_nic")


class Migration(migrations.Migration):
    dependencies = [("inventory", "0005_gpu_mig_instances")]

    operations = [fillfactor(TABLES, 50)]
