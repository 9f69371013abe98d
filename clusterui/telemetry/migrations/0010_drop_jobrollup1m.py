"""``telemetry_jobrollup1m`` dropped: no page, API or detector reads it (the trends page
reads the hourly job rollups, job charts the GPU rollups), and it cost 12.5 B per raw GPU
sample kept 60 days (issue 17, ``benchmarks/storage.py``). The hourly job rollups are
computed from the 1-minute GPU rollups as before. The reverse migration does not recreate
it (compaction would not fill it).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0009_packed_gpu_rollups")]

    operations = [migrations.RunSQL("DROP TABLE IF EXISTS telemetry_jobrollup1m;",
                                    migrations.RunSQL.noop)]
