"""What this worker process last wrote of each node's inventory, so that an unchanged
inventory (the usual case: the same GPUs, NICs and jobs in every batch) costs no upsert.

An entry is keyed by its owner's database id (a node or cluster row: re-created rows get new
ids, so a stale entry can never match) and the inventory's content. An entry is upserted
again at least every ``REFRESH_S`` of wall time. Its ``last_seen`` (data time) must also
keep moving with the data: a node back-filling its history or replaying its spool sends an
hour of data in seconds, and its GPUs' ``last_seen`` must keep up with the node's, or they
would look gone (``clusterui.inventory.counting``) and their jobs stale. So an entry whose
data moved on by ``REFRESH_S`` is ``behind``: the writer then only touches its rows'
``last_seen`` (one statement per table per flush, not the whole upsert per batch) and
``advance``-s the entry.
"""

import time

import orjson

REFRESH_S = 60.0
_MAX_ENTRIES = 50_000

_entries: dict[tuple[str, int], tuple[bytes, float, object, dict]] = {}


def _fingerprint(content) -> bytes:
    return orjson.dumps(content, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
                        default=str)


def lookup(kind: str, owner_id: int, content) -> dict | None:
    """The ids written for this content, unless it changed or is due a whole upsert again
    (written over ``REFRESH_S`` of wall time ago)."""
    entry = _entries.get((kind, owner_id))
    if entry is None:
        return None
    fingerprint, stamp, _written_for, ids = entry
    if time.monotonic() - stamp > REFRESH_S or fingerprint != _fingerprint(content):
        return None
    return ids


def behind(kind: str, owner_id: int, seen) -> bool:
    """Whether the ``last_seen`` written for this entry is over ``REFRESH_S`` older than
    ``seen`` (a datetime: a batch's data time)."""
    entry = _entries.get((kind, owner_id))
    written_for = entry[2] if entry is not None else None
    return (seen is not None and written_for is not None
            and (seen - written_for).total_seconds() > REFRESH_S)


def advance(kind: str, owner_id: int, seen) -> None:
    """The entry's rows' ``last_seen`` was written for ``seen`` (the wall-time refresh stays
    due when it was)."""
    entry = _entries.get((kind, owner_id))
    if entry is not None:
        _entries[(kind, owner_id)] = (entry[0], entry[1], seen, entry[3])


def remember(kind: str, owner_id: int, content, ids: dict, seen=None) -> None:
    if len(_entries) >= _MAX_ENTRIES:
        _entries.clear()
    _entries[(kind, owner_id)] = (_fingerprint(content), time.monotonic(), seen, ids)


def forget() -> None:
    """Drop every entry: after a rolled-back transaction the ids it remembered may not exist,
    and a test may stand in for the minutes that pass between a node's reports."""
    _entries.clear()
