"""The ``clusterui.ingest`` task (contract 1): validate, then store, one batch per message.

Acks are late and a message whose worker died is requeued (see the CELERY_* settings), so a
worker killed mid-batch loses nothing; the ingest log's batch key makes the redelivery
store nothing twice. Database outages are retried with backoff; a message that still fails
after ``INGEST_MAX_RETRIES`` is set aside in the dead-letter list with its reason.
"""

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError

from clusterui.ingest import deadletter
from clusterui.ingest.auth import check_signature
from clusterui.ingest.models import RejectedBatch
from clusterui.ingest.validate import BatchRejected, validate_batch
from clusterui.ingest.writer import store_batch

log = logging.getLogger(__name__)
INGEST_TASK = "clusterui.ingest"


def ingest_envelope(envelope):
    """Validate and store one envelope; refusals are recorded, not raised."""
    if isinstance(envelope, dict):
        refusal = check_signature(envelope)
        if refusal:
            record_rejection(envelope, refusal)
            return None
    try:
        batch = validate_batch(
            envelope,
            max_rows=settings.INGEST_MAX_ROWS,
            max_future_s=settings.INGEST_MAX_FUTURE_S,
        )
    except BatchRejected as exc:
        record_rejection(envelope, exc.reason)
        return None
    signature = envelope.get("signature")
    if isinstance(signature, dict) and isinstance(signature.get("key_id"), str):
        batch.key_id = signature["key_id"][:64]  # verified above when the cluster has keys
    return store_batch(batch)


def record_rejection(envelope, reason: str) -> None:
    cluster = node = ""
    if isinstance(envelope, dict):
        cluster = envelope.get("cluster") if isinstance(envelope.get("cluster"), str) else ""
        node = envelope.get("node") if isinstance(envelope.get("node"), str) else ""
        cluster, node = cluster[:64], node[:128]
    log.warning("batch refused (cluster=%r node=%r): %s", cluster, node, reason)
    RejectedBatch.objects.create(
        cluster=_printable(cluster), node=_printable(node), reason=_printable(reason)[:512],
        excerpt=_printable(deadletter.excerpt(envelope)),
    )


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


class IngestTask(deadletter.DeadLetterOnFailure):
    pass


@shared_task(
    base=IngestTask,
    name=INGEST_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    # Transient: the database is away or slow (a lock wait past the soft time limit).
    autoretry_for=(OperationalError, InterfaceError, SoftTimeLimitExceeded),
    retry_backoff=1,
    retry_backoff_max=settings.INGEST_RETRY_BACKOFF_MAX,
    retry_jitter=True,
    max_retries=settings.INGEST_MAX_RETRIES,
)
def ingest(self, envelope):
    result = ingest_envelope(envelope)
    if result is not None and result.duplicate:
        log.info("batch already stored, skipped: %s/%s seq %s", envelope.get("cluster"),
                 envelope.get("node"), envelope.get("agent", {}).get("seq"))


@shared_task(name="clusterui.ingest.alert_silent_nodes", ignore_result=True,
             autoretry_for=(OSError,), retry_backoff=30, retry_backoff_max=600, max_retries=10)
def alert_silent_nodes():
    """Tell the admins about nodes that went silent (SMTP failures are retried)."""
    from clusterui.ingest.silence import alert_silent_nodes as alert

    alert()
