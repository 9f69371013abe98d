"""What several pages share: the time-range picker's context and chart plumbing."""

from django.utils import timezone

from clusterui.web import timerange
from clusterui.web.figures.common import to_json

# Live pages re-read themselves this often (charts.js swaps the new data in place).
REFRESH_S = 30


def range_context(request, tr: timerange.TimeRange, error: str | None, *,
                  presets=tuple(timerange.PRESETS), whole: str | None = None) -> dict:
    """Context for ``web/_range_picker.html``. ``whole``: a label for the page's own
    default range (e.g. "Whole job"), chosen when no range parameter is given."""
    local = timezone.localtime
    custom = tr.preset is None and ("from" in request.GET or "to" in request.GET)
    return {
        "range": tr,
        "range_error": error,
        "range_presets": [(p, timerange.PRESET_LABELS[p]) for p in presets],
        "range_keep": timerange.without_range(request.GET),
        "range_query": timerange.as_query(tr, request.GET),  # the range alone, for links
        "range_keep_items": [(k, v) for k in request.GET for v in request.GET.getlist(k)
                             if k not in (*timerange.PARAMS, "page")],
        "range_whole": whole,
        "range_custom": custom,
        "range_from": local(tr.start).strftime("%Y-%m-%dT%H:%M"),
        "range_to": "" if tr.live else local(tr.end).strftime("%Y-%m-%dT%H:%M"),
        "tz_name": timezone.get_current_timezone_name(),
    }


def charts(**figures) -> dict:
    """``{name: figure JSON or None}`` for the template's ``{% include "web/_chart.html" %}``."""
    return {name: (None if fig is None else to_json(fig)) for name, fig in figures.items()}


def sort_header(key: str, sort: str, *, ascending_first: bool = False) -> dict:
    """A sortable column's header link: ``ordering`` is where a click goes (names A-Z
    (``ascending_first``), figures largest first; the current column reversed), ``sort`` is
    the column's ``aria-sort`` (None when the table is sorted by another)."""
    current = sort.lstrip("-") == key
    descending = sort.startswith("-")
    if current:
        return {"ordering": key if descending else f"-{key}",
                "sort": "descending" if descending else "ascending"}
    return {"ordering": key if ascending_first else f"-{key}", "sort": None}


def csv_filters_refused(filters):
    """A CSV asked for under filters that do not read: 400, naming each one, as the page."""
    from django.http import HttpResponse

    problems = "; ".join(f"{name}: {' '.join(errors)}"
                         for name, errors in filters.form.errors.items())
    return HttpResponse(f"Fix the filters first ({problems}).\n", status=400,
                        content_type="text/plain")
