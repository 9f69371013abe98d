"""How much of a job's run its samples cover, in SQL: the share ``JobEfficiency.measured_pct``
gives in Python (and ``jobs.usage._measured_gpu_hours`` in the ORM), for the raw queries that
sum it (the hourly usage sums, ``/metrics``)."""


def measured_share_sql(e: str) -> str:
    """The share (0-1) of the window of the ``findings_jobefficiency`` row aliased ``e`` its
    samples cover: from ``measured_from`` to the window's end. 1 where ``measured_from`` is
    unknown (an efficiency computed before ClusterUI recorded it) or the window is empty."""
    return f"""CASE
        WHEN {e}.measured_from IS NULL OR {e}.window_end <= {e}.window_start THEN 1.0
        ELSE LEAST(1.0, GREATEST(0.0,
            extract(epoch FROM {e}.window_end - GREATEST({e}.measured_from, {e}.window_start))
            / extract(epoch FROM {e}.window_end - {e}.window_start)))::float8
    END"""
