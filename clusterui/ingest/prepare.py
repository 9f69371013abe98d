"""What the writer needs of a batch that the batch alone decides: its time span, the days its
samples fall on, and its sample rows as columns (times as PostgreSQL's microseconds, real
metrics as float64 arrays), before any database id is known.

The bulk consumer prepares each batch where it validates it (the flush's thread), so that
the storing thread, which holds the flush's transaction open, only maps batch positions to
database ids and sends (``docs/scaling.md``, "Preparing batches on the validating side").
A batch stored without it (the Celery task, tests) is prepared by the writer itself, and so
is one whose rows changed after it was prepared (``writer._refuse_outside``,
``writer._without_refused_gpus``): ``of`` checks the rows it was made from are still the
batch's.
"""

import datetime as dt
from itertools import chain

import numpy as np

from clusterui.ingest.validate import Batch
from clusterui.telemetry.metrics import GPU_METRICS, JOB_METRICS, NIC_METRICS
from clusterui.telemetry.timebounds import UNIX_EPOCH

UTC = dt.UTC
_EPOCH = UNIX_EPOCH
_PG_EPOCH_UNIX = 946_684_800.0
_DAY_S = 86_400
_NUMPY_FROM = 64  # rows from which a column goes through numpy (its fixed cost pays)
SECTIONS = (("gpu_samples", "gpu_rows"), ("nic_samples", "nic_rows"),
            ("job_samples", "job_rows"))
# Which metric columns are real (float4/float8 in the table): those become float64 arrays.
_REAL = {
    "gpu_rows": tuple(not m.integer for m in GPU_METRICS),
    "nic_rows": tuple(not m.integer for m in NIC_METRICS),
    "job_rows": tuple(not m.integer for m in JOB_METRICS),
}
_REFS = {"gpu_rows": 3, "nic_rows": 2, "job_rows": 2}  # leading columns: ts, refs


def dt_of(ts: float | None) -> dt.datetime | None:
    # Adding a timedelta is several times faster than fromtimestamp(ts, UTC).
    return None if ts is None else _EPOCH + dt.timedelta(seconds=ts)


def pg_micros(stamps) -> list[int]:
    """Unix seconds -> microseconds since 2000-01-01 UTC (a binary timestamptz), rounded
    half to even like a datetime. The same float64 arithmetic either way (``round`` of a
    float rounds half to even, as ``rint`` does); numpy only where its fixed cost per call
    pays (a node-sized batch's 8 rows took three times as long through it, measured)."""
    if len(stamps) < _NUMPY_FROM:
        return [round((float(t) - _PG_EPOCH_UNIX) * 1e6) for t in stamps]
    micros = np.rint((np.asarray(stamps, dtype=np.float64) - _PG_EPOCH_UNIX) * 1e6)
    return micros.astype(np.int64).tolist()


def span(batch: Batch) -> tuple[float | None, float | None]:
    """The batch's first and last data time (samples and events)."""
    return Prepared.of(batch).span


def _days(lo: float, hi: float, stamps) -> frozenset[dt.date]:
    """The days samples from ``lo`` to ``hi`` fall on (events are not partitioned). A batch
    spanning at most two days takes its span's days; a wider one (a back-fill) the days
    its rows are actually on (``stamps``, read only then), never every day in between."""
    if hi - lo <= 2 * _DAY_S:
        number = int(lo // _DAY_S)
        if number == int(hi // _DAY_S) and lo - number * _DAY_S >= 1 \
                and hi - number * _DAY_S <= _DAY_S - 1:
            return _day(number)  # one day, a second or more from either midnight
        # Through a datetime, which rounds to the microsecond as the stored time does (a
        # sample 0.4 us before midnight is stored on the next day).
        day, last = dt_of(lo).date(), dt_of(hi).date()
        if day == last:
            return frozenset((day,))
        out = set()
        while day <= last:
            out.add(day)
            day += dt.timedelta(days=1)
        return frozenset(out)
    return frozenset((_EPOCH + dt.timedelta(days=int(n))).date() for n in np.unique(
        np.floor_divide(np.fromiter(stamps(), np.float64), _DAY_S)))


_DAYS: dict[int, frozenset[dt.date]] = {}


def _day(number: int) -> frozenset[dt.date]:
    """{the date of day ``number`` since the Unix epoch}, remembered (batches share days)."""
    day = _DAYS.get(number)
    if day is None:
        if len(_DAYS) >= 1000:
            _DAYS.clear()
        day = _DAYS[number] = frozenset(((_EPOCH + dt.timedelta(days=number)).date(),))
    return day


class Prepared:
    """A batch's span, days and sample columns: for each section [] without rows, else
    [micros, *the batch's references (gpu position and job id; nic position; job id),
    *the metrics in the metrics module's order]; a real metric of a large section as a
    float64 array (null as NaN, which the COPY sends as NULL)."""

    __slots__ = ("span", "days", "gpu", "nic", "job", "sources")

    @classmethod
    def of(cls, batch: Batch) -> "Prepared":
        """The batch's preparation: the one made before if its rows are unchanged."""
        made = batch.prepared
        if made is not None:
            held = made.sources
            if (held[0] is batch.gpu_rows and held[1] is batch.nic_rows
                    and held[2] is batch.job_rows and held[3] is batch.events):
                return made
        made = cls()
        # The row lists it was made from, held, so that ``is`` above is reliable.
        made.sources = (batch.gpu_rows, batch.nic_rows, batch.job_rows, batch.events)
        lo = hi = None
        times = []
        for attr in ("gpu_rows", "nic_rows", "job_rows"):
            rows = getattr(batch, attr)
            columns = []
            if rows:
                ts, *rest = zip(*rows, strict=True)
                a, b = min(ts), max(ts)
                lo = a if lo is None or a < lo else lo
                hi = b if hi is None or b > hi else hi
                times.append(ts)
                refs, metrics = rest[:_REFS[attr] - 1], rest[_REFS[attr] - 1:]
                if len(rows) >= _NUMPY_FROM:
                    metrics = [np.array(c, dtype=np.float64) if real else c
                               for c, real in zip(metrics, _REAL[attr], strict=True)]
                columns = [pg_micros(ts), *refs, *metrics]
            setattr(made, attr[:3], columns)
        made.days = (frozenset() if lo is None
                     else _days(lo, hi, lambda: chain.from_iterable(times)))
        if batch.events:
            stamps = [e["ts"] for e in batch.events]
            a, b = min(stamps), max(stamps)
            lo = a if lo is None or a < lo else lo
            hi = b if hi is None or b > hi else hi
        made.span = (lo, hi)
        batch.prepared = made
        return made


def prepare(batch: Batch) -> None:
    """Prepare the batch now (in the caller's thread), for the writer to find later."""
    Prepared.of(batch)
