"""The bulk ingest consumer: many queued batches per transaction, one COPY per table.

Celery's worker pays about a millisecond per message in decoding, bookkeeping and
acknowledgement before our task even runs, and one transaction per node-sized batch pays
several round trips to PostgreSQL. This consumer takes up to ``INGEST_BULK_MAX_MESSAGES``
messages from the ``ingest`` list at once (``queue.ReliableQueue``), validates each, stores
them all in one transaction (``writer.store_batches``) and only then acknowledges them.

No loss: the messages stay in Redis (in this consumer's in-flight list) until the commit.
PostgreSQL away: the same messages are retried with capped backoff until it returns.
This process killed: another consumer's sweep requeues its in-flight messages, and the
batch keys make the redelivery store nothing twice. A bad batch: refused with its reason
(validation), or, if the database refuses it, the flush is retried one batch at a time and
only that batch is dead-lettered; the good batches around it land.
"""

import gc
import logging
import signal
import time
from dataclasses import dataclass, field

import redis
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from clusterui.ingest import deadletter, messages
from clusterui.ingest.auth import check_signature
from clusterui.ingest.queue import ReliableQueue
from clusterui.ingest.tasks import INGEST_TASK, record_rejection
from clusterui.ingest.validate import Batch, BatchRejected, validate_batch
from clusterui.ingest.writer import store_batches

log = logging.getLogger(__name__)

TRANSIENT = (OperationalError, InterfaceError)


@dataclass
class FlushResult:
    messages: int = 0
    stored: int = 0
    duplicates: int = 0
    refused: int = 0
    dead_lettered: int = 0
    gpu_samples: int = 0


@dataclass
class _Item:
    raw: bytes
    envelope: object = None
    batch: Batch | None = None
    rows: int = 0


@dataclass
class Consumer:
    queue: ReliableQueue
    max_messages: int = 500
    max_rows: int = 50_000
    backoff_max_s: float = 60.0
    sweep_every_s: float = 10.0
    stopping: bool = False
    totals: FlushResult = field(default_factory=FlushResult)
    _last_sweep: float = 0.0
    _last_beat: float = 0.0

    @classmethod
    def from_settings(cls, client=None) -> "Consumer":
        client = client or deadletter.client(timeout=10)
        queue = ReliableQueue(client, settings.INGEST_QUEUE, ttl_s=settings.INGEST_CONSUMER_TTL_S,
                              max_bytes=settings.INGEST_BULK_MAX_BYTES)
        return cls(queue=queue, max_messages=settings.INGEST_BULK_MAX_MESSAGES,
                   max_rows=settings.INGEST_BULK_MAX_ROWS,
                   backoff_max_s=settings.INGEST_RETRY_BACKOFF_MAX,
                   sweep_every_s=max(1.0, min(10.0, settings.INGEST_CONSUMER_TTL_S / 2)))

    # --- the loop ------------------------------------------------------------------------

    def run(self, *, until=None) -> FlushResult:
        """Consume until SIGTERM/SIGINT (or ``until()`` is true); then finish the flush in
        hand and stop.
        """
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        log.info("bulk ingest consumer %s on queue %r (up to %d messages per flush)",
                 self.queue.id, self.queue.queue, self.max_messages)
        while not self.stopping and not (until and until()):
            self._redis(self._housekeeping)
            items = self._redis(lambda: self.queue.take(self.max_messages, block_s=1.0))
            if items:
                self.flush(items)
                self._redis(self.queue.ack)
        self._redis(self.queue.release)
        return self.totals

    def _stop(self, *_):
        self.stopping = True

    def _housekeeping(self) -> None:
        now = time.monotonic()
        if now - self._last_beat >= min(5.0, self.queue.ttl_s / 4):
            self.queue.heartbeat()
            self._last_beat = now
        if now - self._last_sweep >= self.sweep_every_s:
            self.queue.sweep()
            self._last_sweep = now

    def _redis(self, call):
        """Run a Redis call, waiting out an outage of the broker (nothing is lost meanwhile:
        unacknowledged messages sit in Redis, and collectors spool)."""
        delay = 0.5
        while True:
            try:
                return call()
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                if self.stopping:
                    # Whatever is in flight stays in Redis; a sweep requeues it.
                    log.warning("Redis unreachable while stopping (%s)", exc)
                    return []
                self._wait(f"Redis unreachable ({exc})", delay)
            delay = min(delay * 2, self.backoff_max_s)

    def _wait(self, why: str, delay: float) -> None:
        log.warning("%s; retrying in %.1f s", why, delay)
        time.sleep(delay)

    # --- one flush -----------------------------------------------------------------------

    def flush(self, raws: list[bytes]) -> FlushResult:
        """Validate and store these messages; return what happened to them."""
        result = FlushResult(messages=len(raws))
        # Decoding a flush builds hundreds of thousands of lists (a sample row is one), and
        # the cyclic garbage collector would walk them over and over while they are built:
        # five times the cost of the decoding itself (measured). They hold no cycles:
        # reference counting frees them when the flush is done; collection resumes after.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._store(self._validate(raws, result), result)
        finally:
            if collecting:
                gc.enable()
        self._count(result)
        return result

    def _count(self, result: FlushResult) -> None:
        for name in ("messages", "stored", "duplicates", "refused", "dead_lettered",
                     "gpu_samples"):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(result, name))

    def _store(self, items: list[_Item], result: FlushResult) -> None:
        group: list[_Item] = []
        rows = 0
        for item in items:
            if group and rows + item.rows > self.max_rows:
                self._store_group(group, result)
                group, rows = [], 0
            group.append(item)
            rows += item.rows
        if group:
            self._store_group(group, result)

    def _validate(self, raws: list[bytes], result: FlushResult) -> list[_Item]:
        items = []
        for raw in raws:
            try:
                envelope = messages.envelope_of(raw)
            except messages.NotIngestMessage as exc:
                self._dead_letter(messages.excerpt(raw, 1_000_000), str(exc), result)
                continue
            item = _Item(raw=raw, envelope=envelope)
            # The key lookup may need the database: it waits out an outage like a store.
            refusal = (self._with_database(lambda e=envelope: check_signature(e))
                       if isinstance(envelope, dict) else None)
            if refusal is None:
                try:
                    item.batch = validate_batch(envelope, max_rows=settings.INGEST_MAX_ROWS,
                                                max_future_s=settings.INGEST_MAX_FUTURE_S)
                except BatchRejected as exc:
                    refusal = exc.reason
            if refusal is not None:
                self._refuse(envelope, refusal, result)
                continue
            signature = envelope.get("signature")
            if isinstance(signature, dict) and isinstance(signature.get("key_id"), str):
                item.batch.key_id = signature["key_id"][:64]
            b = item.batch
            item.rows = len(b.gpu_rows) + len(b.nic_rows) + len(b.job_rows)
            items.append(item)
        return items

    def _refuse(self, envelope, reason: str, result: FlushResult) -> None:
        self._with_database(lambda: record_rejection(envelope, reason))
        result.refused += 1

    def _dead_letter(self, args, reason: str, result: FlushResult) -> None:
        log.error("message set aside (dead letter): %s", reason)
        self._redis(lambda: deadletter.push(INGEST_TASK, [args], reason))
        result.dead_lettered += 1

    def _store_group(self, group: list[_Item], result: FlushResult) -> None:
        try:
            outcomes = self._with_database(lambda: store_batches([i.batch for i in group]))
        except DatabaseError as exc:
            if len(group) == 1:
                self._dead_letter(group[0].envelope, f"{type(exc).__name__}: {exc}", result)
                return
            # Something in the group is refused by the database itself: find it.
            log.warning("a flush of %d batches failed (%s); storing them one by one",
                        len(group), exc)
            for item in group:
                self._store_group([item], result)
            return
        for outcome in outcomes:
            if outcome.duplicate:
                result.duplicates += 1
            else:
                result.stored += 1
                result.gpu_samples += outcome.gpu_samples

    def _with_database(self, call):
        """Run a database call, retrying through an outage or a deadlock with capped
        backoff; other database errors are raised."""
        delay = 0.5
        while True:
            try:
                return call()
            except TRANSIENT as exc:
                log.warning("database unavailable (%s); retrying in %.1f s",
                            str(exc).strip().splitlines()[0] if str(exc) else type(exc).__name__,
                            delay)
                connection.close()
                # Stay alive for the sweepers while waiting: these messages are ours.
                try:
                    self.queue.heartbeat()
                except Exception:  # noqa: BLE001 - Redis away too: nothing to do about it here
                    pass
                time.sleep(delay)
                delay = min(delay * 2, self.backoff_max_s)
