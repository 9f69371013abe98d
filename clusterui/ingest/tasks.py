"""The ``clusterui.ingest`` task (contract 1): validate, then store, one batch per message.

Acks are late and a message whose worker died is requeued (see the CELERY_* settings), so a
worker killed mid-batch loses nothing; the ingest log's batch key makes the redelivery
store nothing twice. Database outages are retried with backoff; a message that still fails
after ``INGEST_MAX_RETRIES`` is set aside in the dead-letter list with its reason. Any other
exception (the database refusing the batch, a value the writer cannot encode, a bug) sets
that batch aside at once with its type and message; the worker goes on with the next.
"""

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError

from clusterui.ingest import deadletter, inventory_cache
from clusterui.ingest.auth import open_batch
from clusterui.ingest.models import RejectedBatch
from clusterui.ingest.validate import BatchRejected, validate_batch
from clusterui.ingest.writer import store_batch
from collectors import signing

log = logging.getLogger(__name__)
INGEST_TASK = "clusterui.ingest"
TRANSIENT = (OperationalError, InterfaceError, SoftTimeLimitExceeded)


def ingest_envelope(arg):
    """Validate and store one batch (the task's argument: an envelope, or a version 2
    sealed batch); refusals are recorded, not raised."""
    envelope, refusal, key_id = open_batch(arg)
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
    batch.key_id = key_id  # verified above when the cluster has keys
    batch.signature_version = signing.version_of(arg) or 0
    return store_batch(batch)


def record_rejection(envelope, reason: str) -> None:
    cluster = node = ""
    # A version 2 batch refused before its text was read: its signature names them.
    named = (envelope[signing.FIELD] if signing.version_of(envelope) not in (None, 1)
             else envelope)
    if isinstance(named, dict):
        cluster = named.get("cluster") if isinstance(named.get("cluster"), str) else ""
        node = named.get("node") if isinstance(named.get("node"), str) else ""
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
    autoretry_for=TRANSIENT,
    retry_backoff=1,
    retry_backoff_max=settings.INGEST_RETRY_BACKOFF_MAX,
    retry_jitter=True,
    max_retries=settings.INGEST_MAX_RETRIES,
)
def ingest(self, envelope):
    try:
        result = ingest_envelope(envelope)
    except TRANSIENT:
        raise  # retried with backoff (autoretry_for)
    except Exception as exc:  # noqa: BLE001 - one batch must not fail the worker: set it aside
        reason = f"{type(exc).__name__}: {exc}"
        log.exception("batch could not be stored; dead-lettered: %s", reason)
        # Inventory ids remembered inside the rolled-back transaction may not exist.
        inventory_cache.forget()
        deadletter.push(self.name, [envelope], reason)
        return
    if result is not None and result.duplicate:
        log.info("batch already stored, skipped: %s/%s seq %s", envelope.get("cluster"),
                 envelope.get("node"), envelope.get("agent", {}).get("seq"))


@shared_task(name="clusterui.ingest.alert_silent_nodes", ignore_result=True,
             autoretry_for=(OSError,), retry_backoff=30, retry_backoff_max=600, max_retries=10)
def alert_silent_nodes():
    """Tell the admins about nodes that went silent (SMTP failures are retried)."""
    from clusterui.ingest.silence import alert_silent_nodes as alert

    alert()
