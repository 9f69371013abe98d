"""Getting batches to the server: a Redis sender, a bounded disk spool, and the shipper.

Nothing is lost while the spool has room; when it is full the oldest batches go first and
are counted, and that count travels in the next batch that reaches the server
(``agent.spool_dropped``).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable

from collectors import signing, wire
from collectors.config import BROKER_SCHEMES

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0


class RedisSender:
    """Queues ``clusterui.ingest(batch)`` on the broker's Redis list (``collectors.wire``);
    raises fast (no retry loop) when it cannot: the shipper spools the batch instead."""

    def __init__(self, broker_url: str, queue: str = "ingest",
                 signing_key: tuple[str, str] | Callable[[dict], dict] | None = None
                 ) -> None:
        import redis  # imported here: --once --stdout never needs it
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        scheme = broker_url.split("://", 1)[0].lower()
        if scheme not in BROKER_SCHEMES:
            raise ValueError(f"broker_url: the collector speaks Redis only "
                             f"({', '.join(s + '://' for s in BROKER_SCHEMES)}), "
                             f"got {scheme}://")
        self.queue = queue
        # (key id, secret), the secret a node key or a cluster secret (``signing.seal``
        # picks the scheme), or a function that seals an envelope (the simulator's
        # ``signing.node_signer``): every batch is signed (version 2: the HMAC of the bytes
        # sent) just before it is published, after anything else (the spool's drop count)
        # has been added to it.
        self.signing_key = signing_key
        self.broker_url = broker_url
        self._redis = redis.Redis.from_url(
            broker_url,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=CONNECT_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )

    def send(self, batch: dict) -> None:
        arg = batch
        if callable(self.signing_key):
            arg = self.signing_key(batch)
        elif self.signing_key:
            arg = signing.seal(batch, *self.signing_key)
        try:
            self._redis.lpush(self.queue, wire.task_message(arg, self.queue, about=batch))
        except BaseException:
            # A broken connection is not reused: the next send opens a fresh one.
            self._redis.connection_pool.disconnect()
            raise

    def close(self) -> None:
        self._redis.close()


class Spool:
    """A durable FIFO of batches: one JSON file per batch, bounded by total bytes.

    File names sort by (time, seq). Writes go to a temp file, are fsynced, then renamed,
    so a crash leaves either the whole batch or nothing.
    """

    DROPPED_FILE = ".dropped"

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise OSError(f"spool_dir: cannot create {directory!r}: {exc.strerror}") from exc
        if not os.access(directory, os.W_OK):
            raise OSError(f"spool_dir: {directory!r} is not writable")
        self.dropped = self._read_dropped()

    # -- contents -------------------------------------------------------------------
    def files(self) -> list[str]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.endswith(".json") and not n.startswith("."))

    def __len__(self) -> int:
        return len(self.files())

    def total_bytes(self) -> int:
        total = 0
        for name in self.files():
            try:
                total += os.path.getsize(os.path.join(self.directory, name))
            except FileNotFoundError:
                pass
        return total

    @staticmethod
    def name_for(batch: dict) -> str:
        agent = batch.get("agent") or {}
        sent_us = int(float(batch.get("sent_at") or 0) * 1_000_000)
        boot = str(agent.get("boot_id") or "x")[:12]
        return f"{sent_us:020d}-{int(agent.get('seq') or 0):012d}-{boot}.json"

    # -- writing --------------------------------------------------------------------
    def put(self, batch: dict) -> None:
        data = json.dumps(batch, separators=(",", ":")).encode()
        if len(data) > self.max_bytes:
            log.error("spool: a %d-byte batch exceeds spool_max_bytes; dropped", len(data))
            self._count_dropped(1)
            return
        self._make_room(len(data))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.rename(tmp, os.path.join(self.directory, self.name_for(batch)))
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        self._fsync_dir()

    def _make_room(self, incoming: int) -> None:
        sizes = []
        for name in self.files():
            try:
                sizes.append((name, os.path.getsize(os.path.join(self.directory, name))))
            except FileNotFoundError:
                pass
        total = sum(size for _, size in sizes)
        dropped = 0
        for name, size in sizes:
            if total + incoming <= self.max_bytes:
                break
            self._remove(name)
            total -= size
            dropped += 1
        if dropped:
            log.warning("spool full: dropped the %d oldest batch(es)", dropped)
            self._count_dropped(dropped)

    def _remove(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.directory, name))
        except FileNotFoundError:
            pass

    def _fsync_dir(self) -> None:
        try:
            fd = os.open(self.directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    # -- the drop count, kept on disk so a restart still reports it ----------------------
    def _read_dropped(self) -> int:
        try:
            with open(os.path.join(self.directory, self.DROPPED_FILE)) as fh:
                return max(0, int(fh.read().strip() or 0))
        except (OSError, ValueError):
            return 0

    def _write_dropped(self) -> None:
        path = os.path.join(self.directory, self.DROPPED_FILE)
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(str(self.dropped))
        os.replace(tmp, path)

    def _count_dropped(self, n: int) -> None:
        self.dropped += n
        self._write_dropped()

    def take_dropped(self) -> int:
        """The drops not yet reported; the count restarts at 0 (see ``restore_dropped``)."""
        n, self.dropped = self.dropped, 0
        if n:
            self._write_dropped()
        return n

    def restore_dropped(self, n: int) -> None:
        if n:
            self._count_dropped(n)

    # -- reading --------------------------------------------------------------------
    def replay(self, sender) -> int:
        """Send spooled batches oldest first, deleting each after it is sent.

        Stops at the first failure (that batch stays at the head). Returns how many were
        sent.
        """
        sent = 0
        for name in self.files():
            path = os.path.join(self.directory, name)
            try:
                with open(path, "rb") as fh:
                    batch = json.loads(fh.read())
            except FileNotFoundError:
                continue
            except ValueError:
                log.error("spool: %s is not valid JSON; dropped", name)
                self._remove(name)
                self._count_dropped(1)
                continue
            try:
                sender.send(batch)
            except Exception as exc:  # noqa: BLE001 - any send failure means "try later"
                log.warning("spool replay stopped (%d sent, %d left): %s", sent,
                            len(self.files()), exc)  # fmt: skip
                return sent
            self._remove(name)
            sent += 1
        return sent


class _ReportingSender:
    """Adds the spool's unreported drops to a batch as it is sent."""

    def __init__(self, sender, spool: Spool) -> None:
        self.sender = sender
        self.spool = spool

    def send(self, batch: dict) -> None:
        pending = self.spool.take_dropped()
        agent = batch.setdefault("agent", {})
        agent["spool_dropped"] = int(agent.get("spool_dropped") or 0) + pending
        try:
            self.sender.send(batch)
        except BaseException:
            agent["spool_dropped"] -= pending
            self.spool.restore_dropped(pending)
            raise


class Shipper:
    """``ship(batch)``: replay the spool oldest-first, then send; on failure, spool it."""

    def __init__(self, sender, spool: Spool) -> None:
        self.sender = sender
        self.spool = spool
        self._reporting = _ReportingSender(sender, spool)

    def ship(self, batch: dict) -> bool:
        """True when ``batch`` (and everything spooled before it) reached the broker."""
        if len(self.spool):
            # Keep order: the new batch queues behind the spooled ones, then drain.
            self.spool.put(batch)
            self.spool.replay(self._reporting)
            return len(self.spool) == 0
        try:
            self._reporting.send(batch)
        except Exception as exc:  # noqa: BLE001
            log.warning("send failed (%s); batch %s spooled", exc, batch.get("agent", {}))
            self.spool.put(batch)
            return False
        return True
