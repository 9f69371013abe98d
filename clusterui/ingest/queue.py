"""A reliable bulk reader of the ``ingest`` Redis list, shared safely by any number of consumers.

kombu's Redis transport keeps the Celery queue as a list: producers ``LPUSH``, consumers
pop from the right. A bulk consumer takes up to N items at once with one Lua script that
*moves* them into its own in-flight list, so nothing popped exists only in a process's
memory. It deletes that list (acknowledges) only after the items are committed to
PostgreSQL. A consumer that dies leaves its in-flight list behind; once its liveness key
has expired, any other consumer's sweep pushes those items back onto the queue's consuming
end. Items may thus be delivered twice, never lost; the ingest log's batch key makes the
second delivery store nothing.

A message can also be what killed its consumer (a crash in a C extension, the kernel's OOM
killer, a bug that escapes every handler). So what a sweep restores from a *dead* consumer
is suspect: it goes to a list of its own, ``<queue>:suspect``, and a hash counts, per item
(by its SHA-1), how many consumers died with it in flight. Consumers take suspects first
and one at a time, so a poison message is alone in flight when it strikes again and the good
messages that were in flight with it are stored; once its count reaches
``INGEST_MAX_DELIVERIES`` the consumer dead-letters it instead of trying it again. A clean
release (SIGTERM) hands items back without counting: nothing died.

Celery workers consuming the same queue pop atomically too (``BRPOP``), so both kinds of
consumer can share it.
"""

import hashlib
import logging
import os
import socket
import uuid

import redis

log = logging.getLogger(__name__)

PREFIX = "clusterui:ingest:consumer"

# Move up to ARGV[1] items, and about ARGV[2] bytes (at least one item), from the consuming
# (right) end of KEYS[1] into KEYS[2]; return them oldest first.
_TAKE = """
local n = math.min(tonumber(ARGV[1]), redis.call('LLEN', KEYS[1]))
local budget = tonumber(ARGV[2])
local items = {}
for i = 1, n do
  local item = redis.call('LINDEX', KEYS[1], -i)
  items[i] = item
  budget = budget - #item
  if budget <= 0 then break end
end
if #items > 0 then
  redis.call('LTRIM', KEYS[1], 0, -#items - 1)
  redis.call('RPUSH', KEYS[2], unpack(items))
end
return items
"""

# A dead consumer's in-flight items (KEYS[2]; dead: its liveness key KEYS[3] has expired)
# become suspects (KEYS[1], consuming end, oldest first out), each with one more death
# counted in the hash KEYS[4] under its SHA-1.
_RESTORE = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local items = redis.call('LRANGE', KEYS[2], 0, -1)
for i = #items, 1, -1 do
  redis.call('HINCRBY', KEYS[4], redis.sha1hex(items[i]), 1)
  redis.call('RPUSH', KEYS[1], items[i])
end
redis.call('DEL', KEYS[2])
return #items
"""

# A clean release of this consumer's in-flight items (KEYS[2]), uncounted: suspects (items
# with a count in KEYS[4]) back to the suspect list KEYS[3], the others to the queue KEYS[1].
# The in-flight list is oldest first; pushed newest first, the oldest is next out (right).
_RELEASE = """
local items = redis.call('LRANGE', KEYS[2], 0, -1)
for i = #items, 1, -1 do
  if redis.call('HEXISTS', KEYS[4], redis.sha1hex(items[i])) == 1 then
    redis.call('RPUSH', KEYS[3], items[i])
  else
    redis.call('RPUSH', KEYS[1], items[i])
  end
end
redis.call('DEL', KEYS[2])
return #items
"""

# Move one suspect (KEYS[1]) into the in-flight list KEYS[2]; return it with its count of
# consumers that died with it in flight (KEYS[3]).
_TAKE_SUSPECT = """
local item = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'RIGHT')
if not item then return nil end
return {item, tonumber(redis.call('HGET', KEYS[3], redis.sha1hex(item)) or '0')}
"""


class ReliableQueue:
    """One consumer's view of the queue: take, acknowledge, stay alive, sweep the dead."""

    def __init__(self, client: redis.Redis, queue: str = "ingest", *, ttl_s: int = 60,
                 consumer_id: str | None = None, max_bytes: int = 32 << 20):
        self.client = client
        self.queue = queue
        self.ttl_s = ttl_s
        self.id = consumer_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.inflight_key = f"{PREFIX}:{queue}:inflight:{self.id}"
        self.alive_key = f"{PREFIX}:{queue}:alive:{self.id}"
        self.suspect_key = f"{queue}:suspect"
        self.deliveries_key = f"{PREFIX}:{queue}:deliveries"
        self.max_bytes = max_bytes  # per take: a flush of huge batches stays bounded
        self._take = client.register_script(_TAKE)
        self._restore = client.register_script(_RESTORE)
        self._release = client.register_script(_RELEASE)
        self._take_suspect = client.register_script(_TAKE_SUSPECT)
        self._suspect: bytes | None = None  # the suspect in flight here, if any

    def heartbeat(self) -> None:
        self.client.set(self.alive_key, "1", ex=self.ttl_s)

    def take(self, max_items: int, block_s: float = 1.0) -> list[bytes]:
        """Up to ``max_items`` items, oldest first; waits up to ``block_s`` for the first.

        The items stay in this consumer's in-flight list until ``ack``; items a previous
        take left there unacknowledged (a failed ack) come back first.
        """
        key = self.inflight_key
        pending = self.client.lrange(key, 0, -1)
        if pending:
            return pending
        self._suspect = None
        items = self._take(keys=[self.queue, key], args=[max_items, self.max_bytes])
        if not items and block_s > 0:
            first = self.client.blmove(self.queue, key, block_s, "RIGHT", "LEFT")
            if first is None:
                return []
            if max_items <= 1 or len(first) >= self.max_bytes:
                return [first]
            more = self._take(keys=[self.queue, key],
                              args=[max_items - 1, self.max_bytes - len(first)])
            return [first, *more]
        return items

    def take_suspect(self) -> tuple[bytes, int] | None:
        """One suspect (an item a dead consumer held), moved into this consumer's in-flight
        list, with the number of consumers that died holding it; None when there is none or
        this consumer still holds unacknowledged items (``take`` returns those first)."""
        if self.client.exists(self.inflight_key):
            return None
        taken = self._take_suspect(keys=[self.suspect_key, self.inflight_key,
                                         self.deliveries_key])
        if not taken:
            return None
        self._suspect = taken[0]
        return taken[0], int(taken[1])

    def ack(self) -> None:
        """The items in flight here are done with (stored, refused or dead-lettered)."""
        if self._suspect is not None:
            pipe = self.client.pipeline()
            pipe.delete(self.inflight_key)
            pipe.hdel(self.deliveries_key, hashlib.sha1(self._suspect).hexdigest())
            pipe.execute()
            self._suspect = None
            return
        self.client.delete(self.inflight_key)

    def release(self) -> int:
        """Hand this consumer's in-flight items back (a clean shutdown): not counted as a
        delivery; a suspect goes back among the suspects."""
        self.client.delete(self.alive_key)
        self._suspect = None
        return self._release(keys=[self.queue, self.inflight_key, self.suspect_key,
                                   self.deliveries_key])

    def restore_dead(self, owner: str) -> int:
        """Make suspects of the in-flight items of consumer ``owner`` if its liveness key is
        gone (it died, or its supervisor saw it die and deleted the key)."""
        return self._restore(keys=[self.suspect_key, f"{PREFIX}:{self.queue}:inflight:{owner}",
                                   f"{PREFIX}:{self.queue}:alive:{owner}",
                                   self.deliveries_key])

    def sweep(self) -> int:
        """Requeue, as suspects, the in-flight items of consumers whose liveness key has
        expired."""
        restored = 0
        prefix = f"{PREFIX}:{self.queue}:inflight:"
        for key in self.client.scan_iter(match=f"{prefix}*", count=500):
            key = key.decode() if isinstance(key, bytes) else key
            owner = key[len(prefix):]
            if owner == self.id:
                continue
            n = self.restore_dead(owner)
            if n:
                log.warning("requeued %d in-flight messages of dead consumer %s (as suspects: "
                            "taken one at a time, deaths counted)", n, owner)
                restored += n
        return restored

    def suspects(self) -> int:
        """Messages a dead consumer held, waiting to be retried one at a time."""
        return int(self.client.llen(self.suspect_key))

    def consumers(self) -> int:
        """Bulk consumers alive now."""
        return sum(1 for _ in self.client.scan_iter(
            match=f"{PREFIX}:{self.queue}:alive:*", count=500))

    def inflight(self) -> int:
        """Messages held by bulk consumers right now (popped, not yet committed), and those
        restored from dead consumers that wait their turn as suspects."""
        total = self.suspects()
        for key in self.client.scan_iter(match=f"{PREFIX}:{self.queue}:inflight:*", count=500):
            total += self.client.llen(key)
        return total
