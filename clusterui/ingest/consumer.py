"""The bulk ingest consumer: many queued batches per transaction, one COPY per table.

Celery's worker pays about a millisecond per message in decoding, bookkeeping and
acknowledgement before our task even runs, and one transaction per node-sized batch pays
several round trips to PostgreSQL. This consumer takes up to ``INGEST_BULK_MAX_MESSAGES``
messages from the ``ingest`` list at once (``queue.ReliableQueue``), validates each, stores
them all in one transaction (``writer.store_batches``) and only then acknowledges them.

No loss: the messages stay in Redis (in this consumer's in-flight list) until the commit.
PostgreSQL away: the same messages are retried with capped backoff until it returns.
This process killed: a sweep (another consumer's, or this host's next one, at start and
every ``sweep_every_s``) requeues its in-flight messages once its liveness key has expired,
and the batch keys make the redelivery store nothing twice. Those messages come back as
*suspects* (``queue.py``): taken one at a time, each with a count of the consumers that died
holding it; one that took down ``INGEST_MAX_DELIVERIES`` consumers is dead-lettered.
A bad batch: refused with its reason (validation); if anything else fails while validating
or storing it (the database refuses it, or any exception at all), the flush is retried one
batch at a time and only the failing one is dead-lettered with the exception's type and
message; the good batches around it land. No message ends this loop.
"""

import gc
import logging
import signal
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields

import redis
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from clusterui.ingest import deadletter, inventory_cache, messages
from clusterui.ingest.auth import check_signature, key_id_of, open_batch
from clusterui.ingest.prepare import prepare
from clusterui.ingest.queue import ReliableQueue
from clusterui.ingest.tasks import INGEST_TASK, record_rejection
from clusterui.ingest.validate import Batch, BatchRejected, validate_batch
from clusterui.ingest.writer import store_batches
from collectors import signing

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

    def add(self, other: "FlushResult") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class _Item:
    raw: bytes
    envelope: object = None  # the task's argument as received (what a dead letter keeps)
    batch: Batch | None = None
    rows: int = 0


class _Groups:
    """A flush's batches, stored in order in transactions of up to ``max_rows`` rows.

    A flush that fits one transaction (node-sized batches: 500 of them are 6,500 rows) is
    stored by the calling thread once validated. A larger one (a back-fill's 1,000-row
    batches) hands each full group to a storing thread as soon as it is full, so that
    PostgreSQL writes one group while this thread validates the next; the storing thread
    has its own database connection, closed when the flush ends. ``finish`` waits for
    every group handed over before the flush returns (and its messages are acknowledged).
    Measured (``docs/scaling.md``, "a storing thread for flushes of several transactions"):
    about a seventh less time per 1,000-row batch; smaller groups, to overlap node-sized
    flushes too, cost more in statements than they gain, hence one transaction for those.

    While both threads run, the interpreter's switch interval is ``SWITCH_INTERVAL_S``
    instead of Python's 5 ms: the storing thread gives the GIL up at every round trip to
    PostgreSQL and, back from it, waited up to a whole interval for the validating thread
    to let go, several times per statement (measured: ``docs/scaling.md``, "the storing
    thread's wait for the GIL").
    """

    SWITCH_INTERVAL_S = 0.0002

    def __init__(self, consumer: "Consumer", result: FlushResult):
        self.consumer, self.result = consumer, result
        self.group: list[_Item] = []
        self.rows = 0
        self.thread: ThreadPoolExecutor | None = None
        self.handed: list[Future] = []
        self.thread_result = FlushResult()  # the storing thread's counts, merged at the end
        self.switch_interval: float | None = None  # Python's, while the thread runs

    def add(self, item: _Item) -> None:
        if self.group and self.rows + item.rows > self.consumer.max_rows:
            self._hand_over()
        self.group.append(item)
        self.rows += item.rows

    def _hand_over(self) -> None:
        if self.thread is None:
            self.thread = ThreadPoolExecutor(1, thread_name_prefix="ingest-store")
            self.switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self.switch_interval, self.SWITCH_INTERVAL_S))
        self.handed.append(self.thread.submit(self.consumer._store_group, self.group,
                                              self.thread_result))
        self.group, self.rows = [], 0

    def finish(self, *, store_rest: bool = True) -> None:
        """Store what is left and wait for the storing thread; raise what it raised."""
        if self.thread is None:
            if store_rest and self.group:
                self.consumer._store_group(self.group, self.result)
            return
        if store_rest and self.group:
            self._hand_over()
        failure = None
        try:
            for handed in self.handed:
                try:
                    handed.result()
                except BaseException as exc:  # noqa: BLE001 - the first is raised below
                    failure = failure or exc
        finally:
            try:
                self.thread.submit(lambda: connection.close()).result()  # its own
            finally:
                self.thread.shutdown()
                sys.setswitchinterval(self.switch_interval)
                self.result.add(self.thread_result)
        if failure is not None:
            raise failure


@dataclass
class Consumer:
    queue: ReliableQueue
    max_messages: int = 500
    max_rows: int = 50_000
    backoff_max_s: float = 60.0
    sweep_every_s: float = 10.0
    max_deliveries: int = 3
    stopping: bool = False
    totals: FlushResult = field(default_factory=FlushResult)
    _last_sweep: float = 0.0
    _last_beat: float = 0.0

    @classmethod
    def from_settings(cls, client=None, consumer_id: str | None = None) -> "Consumer":
        client = client or deadletter.client(timeout=10)
        queue = ReliableQueue(client, settings.INGEST_QUEUE, ttl_s=settings.INGEST_CONSUMER_TTL_S,
                              max_bytes=settings.INGEST_BULK_MAX_BYTES, consumer_id=consumer_id)
        return cls(queue=queue, max_messages=settings.INGEST_BULK_MAX_MESSAGES,
                   max_rows=settings.INGEST_BULK_MAX_ROWS,
                   backoff_max_s=settings.INGEST_RETRY_BACKOFF_MAX,
                   sweep_every_s=max(1.0, min(10.0, settings.INGEST_CONSUMER_TTL_S / 2)),
                   max_deliveries=settings.INGEST_MAX_DELIVERIES)

    # --- the loop ------------------------------------------------------------------------

    def run(self, *, until=None) -> FlushResult:
        """Consume until SIGTERM/SIGINT (or ``until()`` is true); then finish the flush in
        hand and stop.
        """
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        log.info("bulk ingest consumer %s on queue %r (up to %d messages per flush)",
                 self.queue.id, self.queue.queue, self.max_messages)
        delay = 0.5
        while not self.stopping and not (until and until()):
            try:
                self._redis(self._housekeeping)
                self.step()
                delay = 0.5
            except Exception:  # noqa: BLE001 - a bug must not stop ingestion: log, go on
                # flush() isolates and dead-letters failing messages itself; this is only
                # for what is left (a Redis reply we did not expect, a bug in this loop).
                log.exception("unexpected error in the consumer loop; going on in %.1f s",
                              delay)
                time.sleep(delay)
                delay = min(delay * 2, self.backoff_max_s)
        self._redis(self.queue.release)
        return self.totals

    def step(self, block_s: float = 1.0) -> bool:
        """Take and flush once: a suspect alone if there is one, else a bulk take (waiting
        up to ``block_s`` for the first message). False when there was nothing to take."""
        suspect = self._redis(self.queue.take_suspect)
        if suspect:
            raw, deaths = suspect
            if deaths >= self.max_deliveries:
                result = FlushResult(messages=1)
                self._dead_letter(self._args_of(raw), f"took down a consumer {deaths} times",
                                  result)
                self._count(result)
            else:
                log.warning("retrying alone a message that was in flight in %d dead "
                            "consumer(s)", deaths)
                self.flush_isolated([raw])
            self._redis(self.queue.ack)
            return True
        items = self._redis(lambda: self.queue.take(self.max_messages, block_s=block_s))
        if items:
            self.flush_isolated(items)
            self._redis(self.queue.ack)
        return bool(items)

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

    def flush_isolated(self, raws: list[bytes]) -> FlushResult | None:
        """``flush``, and should it raise all the same (it isolates failures itself: this
        is the last line), flush the messages one by one and dead-letter any that still
        raises, so that whatever happens the messages in hand can be acknowledged."""
        try:
            return self.flush(raws)
        except Exception as exc:  # noqa: BLE001
            if len(raws) == 1:
                log.exception("a message could not be flushed; dead-lettering it")
                result = FlushResult(messages=1)
                self._dead_letter(self._args_of(raws[0]), self._reason(exc), result)
                self._count(result)
                return result
            log.exception("a flush of %d messages failed; flushing them one by one",
                          len(raws))
            for raw in raws:
                self.flush_isolated([raw])
            return None

    def flush(self, raws: list[bytes]) -> FlushResult:
        """Validate and store these messages; return what happened to them."""
        result = FlushResult(messages=len(raws))
        # Decoding a flush builds hundreds of thousands of lists (a sample row is one), and
        # the cyclic garbage collector would walk them over and over while they are built:
        # five times the cost of the decoding itself (measured). They hold no cycles:
        # reference counting frees them when the flush is done; collection resumes after,
        # once they are freed (``_flush`` has returned): re-enabled while they were still
        # held, the next allocation's collection walked them all once more (5-10 % of a
        # node-sized flush, measured).
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._flush(raws, result)
        finally:
            if collecting:
                gc.enable()
        self._count(result)
        return result

    def _flush(self, raws: list[bytes], result: FlushResult) -> None:
        groups = _Groups(self, result)
        try:
            for raw in raws:
                # One message at a time, so that any exception (not only a refusal) sets
                # aside that message alone.
                try:
                    items = self._validate([raw], result)
                except Exception as exc:  # noqa: BLE001
                    log.exception("validating a message failed unexpectedly")
                    self._dead_letter(self._args_of(raw), self._reason(exc), result)
                    continue
                for item in items:
                    groups.add(item)
        except BaseException:
            groups.finish(store_rest=False)  # what was handed over is stored; then raise
            raise
        groups.finish()

    def _count(self, result: FlushResult) -> None:
        self.totals.add(result)

    def _validate(self, raws: list[bytes], result: FlushResult) -> list[_Item]:
        items = []
        for raw in raws:
            try:
                arg = messages.envelope_of(raw)
            except messages.NotIngestMessage as exc:
                self._dead_letter(messages.excerpt(raw, 1_000_000), str(exc), result)
                continue
            # The key lookup may need the database: it waits out an outage like a store.
            if signing.version_of(arg) not in (None, 1):  # version 2 (or one unknown)
                envelope, refusal, key_id = self._with_database(lambda a=arg: open_batch(a))
            else:  # version 1 or unsigned
                envelope, refusal = messages.verified_envelope(
                    raw, arg, lambda e: self._with_database(lambda: check_signature(e)))
                key_id = key_id_of(envelope.get(signing.FIELD)) \
                    if isinstance(envelope, dict) else ""
            item = _Item(raw=raw, envelope=arg)
            if refusal is None:
                try:
                    item.batch = validate_batch(envelope, max_rows=settings.INGEST_MAX_ROWS,
                                                max_future_s=settings.INGEST_MAX_FUTURE_S)
                except BatchRejected as exc:
                    refusal = exc.reason
            if refusal is not None:
                self._refuse(envelope, refusal, result)
                continue
            # What the writer can compute of the batch alone is computed here, in the
            # flush's thread, not in the storing thread that holds the transaction open.
            prepare(item.batch)
            item.batch.key_id = key_id
            item.batch.signature_version = signing.version_of(arg) or 0  # 0: unsigned
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

    @staticmethod
    def _reason(exc: BaseException) -> str:
        return f"{type(exc).__name__}: {exc}"

    @staticmethod
    def _args_of(raw: bytes):
        """What a dead letter keeps of a queue item: its envelope (to be re-queued later),
        or the item's text when it has none."""
        try:
            return messages.envelope_of(raw)
        except Exception:  # noqa: BLE001
            return messages.excerpt(raw, 1_000_000)

    def _store_group(self, group: list[_Item], result: FlushResult) -> None:
        try:
            outcomes = self._with_database(lambda: store_batches([i.batch for i in group]))
        except Exception as exc:  # noqa: BLE001 - the database's refusal or any other failure
            # The transaction was rolled back: inventory ids this process remembered from
            # inside it may not exist. Forget them all (they are relearnt in one upsert).
            inventory_cache.forget()
            if len(group) == 1:
                log.error("a batch could not be stored (%s)", self._reason(exc),
                          exc_info=not isinstance(exc, DatabaseError))
                self._dead_letter(group[0].envelope, self._reason(exc), result)
                return
            # Something in the group fails (the database refuses it, or the writer raises):
            # find it.
            log.warning("a flush of %d batches failed (%s); storing them one by one",
                        len(group), self._reason(exc))
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
