"""Range partitions of the time-series tables: by day, or by month for the 1-hour rollups.

Raw partitions are created ahead of time by the beat task, and on demand by ingest for any
day a batch carries that has none yet (history back-filled by a collector, an old
spool being replayed); the packed and rollup tables' partitions are created on demand by
compaction. Retention drops whole partitions: no giant DELETE.

Ingest only ever creates partitions inside ``ingest_window``: from the oldest day raw
retention keeps to the latest day a sample may carry (``INGEST_MAX_FUTURE_S``). A sample
outside it is refused per item (validation, and the writer again), and
``ensure_partitions(..., window=...)`` skips such days even if one got through: one sample
five years old cannot create 1,800 partitions and stall ingest while it does.
"""

import datetime as dt
import logging
import zlib

from django.conf import settings
from django.db import connection
from django.utils import timezone

from clusterui.telemetry.metrics import MONTHLY_TABLES, SAMPLE_TABLES

log = logging.getLogger(__name__)

_known: set[tuple[str, dt.date]] = set()


def _first(table: str, day: dt.date) -> dt.date:
    """The first day of the partition holding ``day``."""
    return day.replace(day=1) if table in MONTHLY_TABLES else day


def _next(table: str, first: dt.date) -> dt.date:
    if table in MONTHLY_TABLES:
        return (first + dt.timedelta(days=32)).replace(day=1)
    return first + dt.timedelta(days=1)


def partition_name(table: str, day: dt.date) -> str:
    if table in MONTHLY_TABLES:
        return f"{table}_p{day:%Y%m}"
    return f"{table}_p{day:%Y%m%d}"


def _bounds(table: str, day: dt.date) -> tuple[str, str]:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    end = dt.datetime.combine(_next(table, day), dt.time(), tzinfo=dt.UTC)
    return start.isoformat(), end.isoformat()


def ingest_window(now: dt.datetime | None = None) -> tuple[dt.date, dt.date]:
    """The first and last day (UTC) whose raw partitions ingest may create: the oldest day
    ``RAW_RETENTION_DAYS`` keeps (``maintain_partitions`` drops the ones before it) and the
    day of the latest time a sample may carry (``INGEST_MAX_FUTURE_S`` from now)."""
    now = now or timezone.now()
    today = now.astimezone(dt.UTC).date()
    last = (now + dt.timedelta(seconds=settings.INGEST_MAX_FUTURE_S)).astimezone(dt.UTC).date()
    return today - dt.timedelta(days=settings.RAW_RETENTION_DAYS), last


def ensure_partitions(days, tables=SAMPLE_TABLES, *,
                      window: tuple[dt.date, dt.date] | None = None) -> int:
    """Create the partitions for these days that do not exist yet; return how many.

    Safe to run from many workers at once: creation is serialised by an advisory lock
    and uses IF NOT EXISTS. Each creation commits on its own, outside any ingest
    transaction, so a long ingest never holds the parent's lock while it waits.

    ``window`` (first, last day): days outside it are never created (ingest passes
    ``ingest_window()``; the rows for them were refused before they got here).
    """
    created = 0
    days = set(days)
    if window is not None:
        outside = {d for d in days if not window[0] <= d <= window[1]}
        if outside:
            log.warning("not creating partitions for %d day(s) outside the ingest window "
                        "%s..%s (%s..%s)", len(outside), window[0], window[1], min(outside),
                        max(outside))
            days -= outside
    for table in tables:
        for day in sorted({_first(table, d) for d in days}):
            if (table, day) in _known:
                continue
            name = partition_name(table, day)
            lo, hi = _bounds(table, day)
            with connection.cursor() as cur:
                cur.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
                if not cur.fetchone()[0]:
                    lock = zlib.crc32(name.encode())
                    cur.execute("SELECT pg_advisory_lock(%s)", [lock])
                    try:
                        cur.execute(
                            f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" '
                            f"FOR VALUES FROM ('{lo}') TO ('{hi}')"
                        )
                        created += 1
                    finally:
                        cur.execute("SELECT pg_advisory_unlock(%s)", [lock])
            _known.add((table, day))
    if created:
        log.info("created %d sample partitions", created)
    return created


def forget_known() -> None:
    """Clear the in-process cache (after partitions were dropped)."""
    _known.clear()


def existing_partitions(table: str) -> list[tuple[str, dt.date]]:
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT c.relname FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent
            WHERE p.relname = %s ORDER BY c.relname
            """,
            [table],
        )
        names = [row[0] for row in cur.fetchall()]
    prefix = f"{table}_p"
    pattern = "%Y%m" if table in MONTHLY_TABLES else "%Y%m%d"
    return [
        (n, dt.datetime.strptime(n[len(prefix):], pattern).date())
        for n in names if n.startswith(prefix)
    ]


def create_ahead(today: dt.date, days_ahead: int) -> int:
    return ensure_partitions([today + dt.timedelta(days=i) for i in range(-1, days_ahead + 1)])


def drop_older_than(cutoff: dt.date, tables=SAMPLE_TABLES) -> list[str]:
    """Drop every partition of these tables that ends on or before ``cutoff``."""
    dropped = []
    for table in tables:
        for name, day in existing_partitions(table):
            if _next(table, day) <= cutoff:
                with connection.cursor() as cur:
                    cur.execute(f'DROP TABLE IF EXISTS "{name}"')
                dropped.append(name)
    forget_known()
    return dropped
