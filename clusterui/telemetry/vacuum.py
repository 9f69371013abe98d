"""Vacuum, when PostgreSQL's own autovacuum is off.

Every flush updates the "latest" tables, the nodes' and jobs' times and the ingest runs;
compaction deletes the hot rows it packs and rewrites chunks and rollups; pruning deletes
the ingest log. Each leaves dead row versions behind, and a table whose dead rows are never
vacuumed grows without end: the next insert cannot reuse their space. PostgreSQL's
autovacuum normally reclaims it. Some servers run with it off (this project's development
machine does), so the product does that part of the job itself, with autovacuum's own
rule: a table is due when its dead rows exceed ``VACUUM_THRESHOLD_ROWS`` plus
``VACUUM_SCALE_FACTOR`` of its live rows (PostgreSQL's ``autovacuum_vacuum_threshold`` and
``autovacuum_vacuum_scale_factor``, 50 and 0.2 by default). Where autovacuum is on, this
does nothing: it is PostgreSQL's job.

``VACUUM (SKIP_LOCKED)`` never waits for a table in use: a table skipped is due on the next
run. A packed day's hot partition is truncated by compaction instead (``compaction``): a
vacuum would keep its pages and its index.
"""

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)

# Every table in the project's schema, each partition on its own (a partitioned parent has
# no row counts of its own).
_DUE_SQL = """
SELECT s.relid::regclass::text, s.n_dead_tup, s.n_live_tup
FROM pg_stat_user_tables s
WHERE s.schemaname = current_schema()
  AND s.n_dead_tup > %s + %s * s.n_live_tup
ORDER BY s.n_dead_tup DESC
"""


@dataclass
class VacuumResult:
    skipped_autovacuum_on: bool = False
    tables: list[tuple[str, int]] = field(default_factory=list)  # (table, dead rows before)
    unfinished: bool = False  # stopped by the time budget: the next run goes on
    seconds: float = 0.0


def autovacuum_on() -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT current_setting('autovacuum')::bool")
        return cur.fetchone()[0]


def due_tables() -> list[tuple[str, int]]:
    """The tables whose dead rows are over the threshold, most dead rows first."""
    with connection.cursor() as cur:
        cur.execute(_DUE_SQL, [settings.VACUUM_THRESHOLD_ROWS, settings.VACUUM_SCALE_FACTOR])
        return [(name, dead) for name, dead, _live in cur.fetchall()]


def vacuum_due(*, budget_s: float = 120.0) -> VacuumResult:
    """Vacuum every due table, if autovacuum is off; outside any transaction."""
    began = time.monotonic()
    result = VacuumResult()
    if autovacuum_on():
        result.skipped_autovacuum_on = True
        return result
    for name, dead in due_tables():
        if time.monotonic() - began > budget_s:
            result.unfinished = True
            break
        with connection.cursor() as cur:
            cur.execute(f"VACUUM (SKIP_LOCKED, ANALYZE) {name}")
        result.tables.append((name, dead))
    result.seconds = time.monotonic() - began
    if result.tables:
        log.info("vacuum (autovacuum is off): %d tables, %d dead rows, %.1f s",
                 len(result.tables), sum(d for _t, d in result.tables), result.seconds)
    return result
