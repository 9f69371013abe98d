"""A node's fabric error counters over time, for its page: each port's increases summed per
bucket of the page's time axis. ``PortErrors`` holds only the samples where a counter rose,
so a bucket without a row is 0 here; whether the port reported then is the NIC samples' to
say (``web.figures.timeseries.port_errors_chart`` draws a gap where it did not)."""

import datetime as dt

from django.db import connection

from clusterui.fabric.metrics import ERROR_FIELDS

_SQL = f"""
SELECT nic_id, floor(extract(epoch FROM ts - %(t0)s) / %(step)s)::int AS k,
       {", ".join(f"sum({f})" for f in ERROR_FIELDS)}
FROM fabric_porterrors
WHERE nic_id = ANY(%(nics)s) AND ts >= %(t0)s AND ts < %(t1)s
GROUP BY 1, 2
"""


def error_buckets(nic_ids, first: dt.datetime, step: int, count: int
                  ) -> dict[tuple[int, str], list[int]]:
    """{(NIC id, error counter): its increases in each of ``count`` buckets of ``step``
    seconds from ``first``}, for the counters that rose at all; {} when none did."""
    nic_ids = list(nic_ids)
    if not nic_ids or count <= 0:
        return {}
    params = {"nics": nic_ids, "t0": first, "step": step,
              "t1": first + dt.timedelta(seconds=step * count)}
    out: dict[tuple[int, str], list[int]] = {}
    with connection.cursor() as cur:
        cur.execute(_SQL, params)
        for nic_id, k, *sums in cur.fetchall():
            for name, value in zip(ERROR_FIELDS, sums, strict=True):
                if value:
                    out.setdefault((nic_id, name), [0] * count)[k] += int(value)
    return dict(sorted(out.items()))


def reported(rx, tx) -> list[bool]:
    """Per bucket, whether the port sent a sample in it: a receive or transmit rate there
    (its NIC series)."""
    return [a is not None or b is not None for a, b in zip(rx, tx, strict=True)]


def known(increases: list[int], seen: list[bool]) -> list[int | None]:
    """A counter's increases per bucket (``error_buckets``), None where the port sent no
    sample and nothing rose: only rises are stored, so a 0 there would claim a healthy
    link nobody measured."""
    return [v if v or s else None for v, s in zip(increases, seen, strict=True)]
