"""The "latest" tables leave half of each page free (fillfactor 50).

Every flush updates each reporting GPU's and NIC's row. With full pages (the default, 100)
an update cannot stay on its row's page: the new version goes to another page and every
index gets an entry for it. With room on the page PostgreSQL updates in place of a
heap-only tuple (HOT: no index entry, the dead version pruned on the page itself), which
the tables' one row per device can afford. Measured (issue 17, the bulk consumer under
cProfile over 500 node batches per flush of 8 GPUs and 4 NICs each, two alternating runs
on a fresh database, quiet machine): the upserts' time per flush 49 and 64 ms at 100, 31
and 33 ms at 50. At 100 not one of 320 GPUs' updates was HOT once their rows filled three
pages; at 50 all were (``tests/ingest/test_latest.py``).

Rows already stored keep their pages until they move; the setting applies to every page
written from now on.
"""

from django.db import migrations

from clusterui.migration_ops import fillfactor

TABLES = ("telemetry_gpulatest", "telemetry_niclatest")


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0011_packed_gpu_rollup1h")]

    operations = [fillfactor(TABLES, 50)]
