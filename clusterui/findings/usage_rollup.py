"""GPU-hours per user and account over a recent range from hourly sums, not from every job.

``clusterui.jobs.usage.usage_summary`` counts each job active in [start, end) with its
whole-job figures (``JobEfficiency``, 0 without one). A job is active when it started
before ``end`` (or its start is unknown) and has not ended, or ended at or after ``start``.
Over a day of a 1,000-node cluster that is 160,000 jobs to join and add up. The same sums
come from three small parts here:

- ``UsageHour``: per (user, account) the jobs that ended in each clock hour (UTC), and
  those that have not ended (hour = infinity). Rows from the first whole hour after
  ``start`` on: every job that ended at or after that hour, or has not ended.
- The jobs that ended in [start, that hour), read directly (an hour of jobs at most).
- Less the jobs counted above that started at or after ``end`` (none for a range that ends
  now, the overview's).

``UsageHour`` is the sum of ``UsageJob``, one row per job as last counted. Triggers mark
every job whose user, account, end or figures change (``UsageDirty``, migration
``0004``); the detector pass (``fold``) rewrites the marked jobs' rows and sums the groups
they left or joined again. Until then a reader takes each marked job's counted row away
and adds its current state in its own query, so the figures are the direct sum's at every
moment, whoever changed the jobs (ingest, the pass, ``close_stale_jobs``).
"""

import datetime as dt

from django.db import connection

from clusterui.findings import bulk
from clusterui.findings.measured import measured_share_sql

_CURRENT = f"""
SELECT j.id AS job_id, j."user", j.account,
       COALESCE(date_trunc('hour', j.ended_at, 'UTC'), 'infinity') AS hour,
       COALESCE(e.gpu_hours_allocated, 0) AS gpu_hours_allocated,
       COALESCE(e.gpu_hours_used, 0) AS gpu_hours_used,
       COALESCE(e.gpu_hours_wasted, 0) AS gpu_hours_wasted,
       COALESCE(e.gpu_hours_allocated * {measured_share_sql("e")}, 0) AS gpu_hours_measured
FROM jobs_job j LEFT JOIN findings_jobefficiency e ON e.job_id = j.id
"""

# The marked jobs' rows rewritten (or removed, for a deleted job); returns the groups they
# were counted in and are counted in now (``hour`` as text: Python has no infinity).
_REWRITE = f"""
WITH cur AS ({_CURRENT} WHERE j.id = ANY(%(ids)s)),
old AS (SELECT "user", account, hour FROM findings_usagejob WHERE job_id = ANY(%(ids)s)),
put AS (
    INSERT INTO findings_usagejob (job_id, "user", account, hour, gpu_hours_allocated,
                                   gpu_hours_used, gpu_hours_wasted, gpu_hours_measured)
    SELECT * FROM cur
    ON CONFLICT (job_id) DO UPDATE SET "user" = EXCLUDED."user", account = EXCLUDED.account,
        hour = EXCLUDED.hour, gpu_hours_allocated = EXCLUDED.gpu_hours_allocated,
        gpu_hours_used = EXCLUDED.gpu_hours_used, gpu_hours_wasted = EXCLUDED.gpu_hours_wasted,
        gpu_hours_measured = EXCLUDED.gpu_hours_measured
),
gone AS (
    DELETE FROM findings_usagejob
    WHERE job_id = ANY(%(ids)s) AND job_id NOT IN (SELECT job_id FROM cur)
)
SELECT "user", account, hour::text FROM cur
UNION
SELECT "user", account, hour::text FROM old
"""

# Those groups' sums again from their jobs' rows (after their old rows are deleted, in a
# statement of its own): a group no job is left in goes.
_KEYS = """
WITH keys AS (
    SELECT * FROM unnest(%(users)s::text[], %(accounts)s::text[],
                         %(hours)s::text[]::timestamptz[]) AS k("user", account, hour)
)
"""
_DROP = _KEYS + """
DELETE FROM findings_usagehour h USING keys k
WHERE h."user" = k."user" AND h.account = k.account AND h.hour = k.hour
"""
_READD = _KEYS + """
INSERT INTO findings_usagehour ("user", account, hour, jobs, gpu_hours_allocated,
                                gpu_hours_used, gpu_hours_wasted, gpu_hours_measured)
SELECT u."user", u.account, u.hour, count(*), sum(u.gpu_hours_allocated),
       sum(u.gpu_hours_used), sum(u.gpu_hours_wasted), sum(u.gpu_hours_measured)
FROM keys k JOIN findings_usagejob u
     ON u."user" = k."user" AND u.account = k.account AND u.hour = k.hour
GROUP BY 1, 2, 3
"""


def fold() -> int:
    """Recount the jobs marked changed into ``UsageHour``; returns how many. Run by the
    detector pass inside its transaction and advisory lock (one fold at a time).

    The marks are taken first, the jobs read after: a change committed in between is read
    now and its mark stays for the next fold, which then finds nothing to move. Each group
    a change touched is summed again from its jobs' rows, not adjusted by the difference,
    so its figures are always a plain sum of its jobs' (no rounding builds up)."""
    with bulk.cursor() as cur:
        cur.execute("DELETE FROM findings_usagedirty RETURNING job_id")
        ids = sorted({row[0] for row in cur.fetchall()})
        if not ids:
            return 0
        cur.execute(_REWRITE, {"ids": ids})
        keys = sorted(cur.fetchall())
        params = {"users": [k[0] for k in keys], "accounts": [k[1] for k in keys],
                  "hours": [k[2] for k in keys]}
        cur.execute(_DROP, params)
        cur.execute(_READD, params)
    return len(ids)


def usable(start: dt.datetime, end: dt.datetime, now: dt.datetime) -> bool:
    """Whether the hourly sums answer [start, end) cheaply: a range that ends about now (the
    jobs started after its end, taken away one by one, are then a handful)."""
    return end >= now - dt.timedelta(hours=1) and end > start


def _hour_ceil(t: dt.datetime) -> dt.datetime:
    t = t.astimezone(dt.UTC)
    floor = t.replace(minute=0, second=0, microsecond=0)
    return floor if floor == t else floor + dt.timedelta(hours=1)


# Signed rows per (user, account): the hourly sums from the first whole hour on, the
# marked jobs' change since they were counted, the jobs that ended before that hour (in
# the range), less the jobs that had not started by the range's end.
_SUMMARY = f"""
WITH marked AS (SELECT DISTINCT job_id FROM findings_usagedirty),
parts AS (
    SELECT "user", account, jobs AS n, gpu_hours_allocated AS a, gpu_hours_used AS u,
           gpu_hours_wasted AS w, gpu_hours_measured AS m
    FROM findings_usagehour WHERE hour >= %(hour)s {{scope}}
    UNION ALL
    SELECT "user", account, -1, -gpu_hours_allocated, -gpu_hours_used, -gpu_hours_wasted,
           -gpu_hours_measured
    FROM findings_usagejob WHERE job_id IN (SELECT job_id FROM marked) AND hour >= %(hour)s
        {{scope}}
    UNION ALL
    SELECT "user", account, 1, gpu_hours_allocated, gpu_hours_used, gpu_hours_wasted,
           gpu_hours_measured
    FROM ({_CURRENT} WHERE j.id IN (SELECT job_id FROM marked)) c
    WHERE hour >= %(hour)s {{scope}}
    UNION ALL
    SELECT "user", account, 1, gpu_hours_allocated, gpu_hours_used, gpu_hours_wasted,
           gpu_hours_measured
    FROM ({_CURRENT} WHERE j.ended_at >= %(start)s AND j.ended_at < %(hour)s
          AND (j.started_at < %(end)s OR j.started_at IS NULL)) c
    WHERE true {{scope}}
    UNION ALL
    SELECT "user", account, -1, -gpu_hours_allocated, -gpu_hours_used, -gpu_hours_wasted,
           -gpu_hours_measured
    FROM ({_CURRENT} WHERE j.started_at >= %(end)s
          AND (j.ended_at IS NULL OR j.ended_at >= %(hour)s)) c
    WHERE true {{scope}}
)
SELECT {{group}}, sum(n), sum(a), sum(u), sum(w), sum(m) FROM parts
GROUP BY 1 HAVING sum(n) > 0
"""


def usage_rows(group: str, start: dt.datetime, end: dt.datetime, user_name: str | None
               ) -> list[tuple]:
    """``(name, jobs, allocated, used, wasted, measured)`` per user or account of the jobs
    active in [start, end); ``user_name``: only that user's jobs (None: every job).
    Unordered."""
    column = {"user": '"user"', "account": "account"}[group]
    scope = 'AND "user" = %(user)s' if user_name is not None else ""
    sql = _SUMMARY.format(scope=scope, group=column)
    with connection.cursor() as cur:
        cur.execute(sql, {"hour": _hour_ceil(start), "start": start, "end": end,
                          "user": user_name})
        return cur.fetchall()
