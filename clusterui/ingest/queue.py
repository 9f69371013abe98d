"""A reliable bulk reader of the ``ingest`` Redis list, shared safely by any number of consumers.

kombu's Redis transport keeps the Celery queue as a list: producers ``LPUSH``, consumers
pop from the right. A bulk consumer takes up to N items at once with one Lua script that
*moves* them into its own in-flight list, so nothing popped exists only in a process's
memory. It deletes that list (acknowledges) only after the items are committed to
PostgreSQL. A consumer that dies leaves its in-flight list behind; once its liveness key
has expired, any other consumer's sweep pushes those items back onto the queue's consuming
end. Items may thus be delivered twice, never lost; the ingest log's batch key makes the
second delivery store nothing.

Celery workers consuming the same queue pop atomically too (``BRPOP``), so both kinds of
consumer can share it.
"""

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

# Give a dead consumer's in-flight items back: onto the consuming end, oldest first out.
_RESTORE = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local items = redis.call('LRANGE', KEYS[2], 0, -1)
for i = 1, #items do redis.call('RPUSH', KEYS[1], items[i]) end
redis.call('DEL', KEYS[2])
return #items
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
        self.max_bytes = max_bytes  # per take: a flush of huge batches stays bounded
        self._take = client.register_script(_TAKE)
        self._restore = client.register_script(_RESTORE)

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

    def ack(self) -> None:
        self.client.delete(self.inflight_key)

    def release(self) -> int:
        """Hand this consumer's in-flight items back to the queue (a clean shutdown)."""
        self.client.delete(self.alive_key)
        return self._restore(keys=[self.queue, self.inflight_key, self.alive_key])

    def sweep(self) -> int:
        """Requeue the in-flight items of consumers whose liveness key has expired."""
        restored = 0
        prefix = f"{PREFIX}:{self.queue}:inflight:"
        for key in self.client.scan_iter(match=f"{prefix}*", count=500):
            key = key.decode() if isinstance(key, bytes) else key
            owner = key[len(prefix):]
            if owner == self.id:
                continue
            alive = f"{PREFIX}:{self.queue}:alive:{owner}"
            n = self._restore(keys=[self.queue, key, alive])
            if n:
                log.warning("requeued %d in-flight messages of dead consumer %s", n, owner)
                restored += n
        return restored

    def consumers(self) -> int:
        """Bulk consumers alive now."""
        return sum(1 for _ in self.client.scan_iter(
            match=f"{PREFIX}:{self.queue}:alive:*", count=500))

    def inflight(self) -> int:
        """Messages held by bulk consumers right now (popped, not yet committed)."""
        total = 0
        for key in self.client.scan_iter(match=f"{PREFIX}:{self.queue}:inflight:*", count=500):
            total += self.client.llen(key)
        return total
