"""Pages of the jobs list that stay fast over a million jobs (the UI and the API share it).

Sorting by an efficiency figure (waste, efficiency, GPU-hours) lists the jobs that have no
efficiency row yet last. Written as one query (jobs LEFT JOIN efficiency ORDER BY the figure
NULLS LAST) PostgreSQL joins and sorts every job before it can return the first page: 17 s
over 1.1 million jobs (``benchmarks/query_latency.py``). The same order, split in two:

1. the jobs that have the figure, an INNER JOIN that walks the efficiency table's index in
   the page's order (``jobeff_wasted_page_idx``) and stops once the page is full;
2. then the jobs without it, newest first; read only by the page where the first part runs
   out, and the pages after it.

The count a page shows ("page 3 of 22,356") is exact up to ``EXACT_COUNT_UP_TO`` rows and
PostgreSQL's estimate beyond that (counting a million rows costs more than the page): the UI
says "about". The API keeps its exact ``count`` (``exact=True``).
"""

import json

from django.core.paginator import Paginator
from django.db.models import F
from django.utils.functional import cached_property

EXACT_COUNT_UP_TO = 10_000
# Ordering names (JobFilterSet.ordering) that sort by a figure of the job's efficiency row.
FIGURES = {"wasted", "efficiency", "gpu_hours"}


class FiguresFirst:
    """A jobs queryset ordered by an efficiency figure (nulls last, then newest first), as
    two queries that each use an index; sliceable and countable like the queryset."""

    def __init__(self, queryset, figure: str):
        self.queryset = queryset
        self.figure = figure
        self.with_figures = queryset.filter(efficiency__isnull=False)
        self.without = queryset.filter(efficiency__isnull=True).order_by("-id")

    def _page_with_figures(self, start: int, stop: int | None) -> list:
        if self.figure == "-wasted" and not self.queryset.query.where:
            # Every job, most wasted first: the page's ids straight from the efficiency
            # index (an index-only walk, however deep the page), then those jobs.
            from clusterui.findings.models import JobEfficiency

            ids = list(JobEfficiency.objects.order_by(
                F("gpu_hours_wasted").desc(nulls_last=True), "-job_id",
            ).values_list("job_id", flat=True)[start:stop])
            rows = {job.pk: job for job in self.queryset.filter(pk__in=ids)}
            return [rows[pk] for pk in ids if pk in rows]
        return list(self.with_figures[start:stop])

    def count(self) -> int:
        return self.queryset.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, key):
        if not isinstance(key, slice):
            return self[key:key + 1][0]
        start, stop = key.start or 0, key.stop
        rows = self._page_with_figures(start, stop)
        if stop is not None and len(rows) == stop - start:
            return rows
        # The page runs past the jobs with figures: the rest come from those without.
        before = start + len(rows) if rows else self.with_figures.count()
        skip = max(0, start - before)
        rest = self.without[skip:None if stop is None else skip + stop - start - len(rows)]
        return rows + list(rest)


def ordered_for_pages(queryset, ordering: list[str] | None):
    """``queryset`` (already filtered and ordered by ``JobFilterSet``), split as above when
    its first sort key is an efficiency figure; as it is otherwise."""
    first = (ordering or [""])[0]
    return FiguresFirst(queryset, first) if first.lstrip("-") in FIGURES else queryset


def estimated_rows(queryset) -> int:
    """PostgreSQL's estimate of the rows ``queryset`` returns (a plan, not a scan)."""
    plan = json.loads(queryset.order_by().values("pk").explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])


class JobPaginator(Paginator):
    """A Paginator whose count is exact up to ``EXACT_COUNT_UP_TO`` and estimated beyond
    (``estimated`` says which), so page 1 of a million jobs never counts them all."""

    estimated = False

    @cached_property
    def count(self) -> int:
        base = getattr(self.object_list, "queryset", self.object_list)
        exact = base.order_by().values("pk")[:EXACT_COUNT_UP_TO + 1].count()
        if exact <= EXACT_COUNT_UP_TO:
            return exact
        self.estimated = True
        return max(exact, estimated_rows(base))
