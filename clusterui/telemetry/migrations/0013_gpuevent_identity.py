"""One stored copy of each GPU event (an Xid, a lost GPU, a move).

A collector restarted with a new boot id resends its spool; the samples in it were already
stored once (``ingest/dedupe.py``), the events were stored again: one Xid showed as two on
the pages and in the findings' counts. Copies stored before this migration are deleted
(the oldest row of each is kept), then the constraint the writer's ``ON CONFLICT DO
NOTHING`` names is added.
"""

from django.db import migrations, models

DELETE_COPIES = """
DELETE FROM telemetry_gpuevent e USING telemetry_gpuevent k
WHERE k.gpu_id = e.gpu_id AND k.ts = e.ts AND k.kind = e.kind
  AND k.code IS NOT DISTINCT FROM e.code AND k.message = e.message AND k.id < e.id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0007_ingestbatch_signature_version"),
        ("inventory", "0005_gpu_mig_instances"),
        ("telemetry", "0012_latest_fillfactor"),
    ]

    operations = [
        # The copies deleted are not restored by a reversal.
        migrations.RunSQL(DELETE_COPIES, migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name="gpuevent",
            constraint=models.UniqueConstraint(
                fields=("gpu", "ts", "kind", "code", "message"), nulls_distinct=False,
                name="gpuevent_identity_uniq"),
        ),
    ]
