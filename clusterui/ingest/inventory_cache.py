"""What this worker process last wrote of each node's inventory, so that an unchanged
inventory (the usual case: the same GPUs, NICs and jobs in every batch) costs no upsert.

An entry is keyed by its owner's database id (a node or cluster row: re-created rows get new
ids, so a stale entry can never match) and the inventory's content. It is trusted while its
node keeps reporting through this process: one unused for ``REFRESH_S`` of wall time (or
half ``JOB_STALE_AFTER_S``, if less: the node fell silent, or another consumer process took
its batches) is upserted again whole, so that what changed meanwhile (its job ended for
silence, then reported running again) is corrected. While it is in use, its rows'
``last_seen`` (data time) must still keep moving with the data: a node's GPUs would
otherwise look gone (``clusterui.inventory.counting``) and its allocations stale, and a
node back-filling its history or replaying its spool sends an hour of data in seconds. So
an entry whose data moved on by ``REFRESH_S`` is ``behind``: the writer then touches its
rows' ``last_seen`` alone (one statement per table per flush) and ``advance``-s the entry.
(Until then every entry was upserted whole every ``REFRESH_S``: at a 10 s flush one batch
in six paid 4 ms of upserts, more than the rest of its storing, measured:
``docs/scaling.md``.)
"""

import time

from django.conf import settings

REFRESH_S = 60.0
_MAX_ENTRIES = 50_000

# {(kind, owner id): (content, last used, data time written for, ids)}. The content is kept
# as validation built it (a fresh object per batch, never changed after: the writer copies
# a batch it alters) and compared with ``==``, in C, key order aside: serialising it
# for a fingerprint cost four times as much (2.6 against 0.6 us, docs/scaling.md).
_entries: dict[tuple[str, int], tuple[object, float, object, dict]] = {}


def lookup(kind: str, owner_id: int, content) -> dict | None:
    """The ids written for this content, unless it changed or the entry went unused for
    longer than ``_unused_for()`` (then it is due a whole upsert again)."""
    key = (kind, owner_id)
    entry = _entries.get(key)
    if entry is None:
        return None
    written, used, written_for, ids = entry
    now = time.monotonic()
    if now - used > _unused_for() or written != content:
        return None
    _entries[key] = (written, now, written_for, ids)
    return ids


def _unused_for() -> float:
    """How long an entry may go unused and still be trusted: ``REFRESH_S``, or less where
    jobs are ended for silence sooner (a node back after its job was ended must upsert it,
    which revives it)."""
    return min(REFRESH_S, settings.JOB_STALE_AFTER_S / 2)


def behind(kind: str, owner_id: int, seen) -> bool:
    """Whether the ``last_seen`` written for this entry is over ``REFRESH_S`` older than
    ``seen`` (a datetime: a batch's data time)."""
    entry = _entries.get((kind, owner_id))
    written_for = entry[2] if entry is not None else None
    return (seen is not None and written_for is not None
            and (seen - written_for).total_seconds() > REFRESH_S)


def advance(kind: str, owner_id: int, seen) -> None:
    """The entry's rows' ``last_seen`` was written for ``seen``."""
    entry = _entries.get((kind, owner_id))
    if entry is not None:
        _entries[(kind, owner_id)] = (entry[0], entry[1], seen, entry[3])


def remember(kind: str, owner_id: int, content, ids: dict, seen=None) -> None:
    if len(_entries) >= _MAX_ENTRIES:
        _entries.clear()
    _entries[(kind, owner_id)] = (content, time.monotonic(), seen, ids)


def forget() -> None:
    """Drop every entry: after a rolled-back transaction the ids it remembered may not exist,
    and a test may stand in for the minutes that pass between a node's reports."""
    _entries.clear()
