"""What every chart shares: colours, layout, the time axis."""

import datetime as dt
import json
import re
from functools import cached_property

import numpy as np
from django.utils import timezone

from clusterui.telemetry.series import MAX_POINTS
from collectors.client.report import NOT_SHOWN_CLASS

# Okabe-Ito, colour-blind safe; its yellow is replaced by a dark grey that reads on white.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#555555",
           "#000000")
INK = "#1d2330"
MUTED = "#6b7385"
GRID = "#e9ecf1"
CAPACITY = "#b3261e"  # capacity and limit lines: dashed, labelled
# A chart's points, all traces together: a 32-GPU job's per-GPU charts get coarser buckets
# than a single node's, so that no page ships 100k points.
POINTS_PER_CHART = 9_600


def points_per_series(traces: int) -> int:
    """How many buckets each of ``traces`` series may have in one chart."""
    return max(60, min(MAX_POINTS, POINTS_PER_CHART // max(1, traces)))


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def layout(*, height: int = 260, y_title: str = "", y_range=None, show_legend: bool = True,
           **extra) -> dict:
    """A compact layout for a card: no title (the card has one), hover across traces."""
    base = {
        "height": height,
        "margin": {"l": 56, "r": 16, "t": 10, "b": 36},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
                 "size": 12, "color": INK},
        "hovermode": "x unified",
        "hoverlabel": {"namelength": -1},
        "showlegend": show_legend,
        "legend": {"orientation": "v", "x": 1.01, "y": 1, "yanchor": "top",
                   "font": {"size": 11}, "itemwidth": 30},
        "xaxis": {"type": "date", "gridcolor": GRID, "linecolor": "#c9ced8", "ticks": "outside",
                  "tickcolor": "#c9ced8"},
        "yaxis": {"title": {"text": y_title, "font": {"size": 11, "color": MUTED}},
                  "gridcolor": GRID, "zeroline": False, "rangemode": "tozero"},
        # Live refreshes redraw with Plotly.react: a user's zoom survives them.
        "uirevision": "keep",
        # Everything is styled here: no 7 KB default template in every chart's JSON.
        "template": "none",
    }
    if y_range is not None:
        base["yaxis"]["range"] = list(y_range)
    base.update(extra)
    return base


def local_time(t: dt.datetime) -> str:
    """A time as the server's local wall time (plotly.js has no time zones)."""
    return t.astimezone(timezone.get_current_timezone()).strftime("%Y-%m-%d %H:%M:%S")


def time_axis(series) -> dict:
    """An aligned series' x: its first bucket and the step, not one date per point (the
    buckets are evenly spaced; a local-time change such as DST inside the range shifts
    the labels after it by that hour, never the data)."""
    if not series.ts:
        return {"x": []}
    return {"x0": local_time(series.ts[0]), "dx": series.step * 1000}


def has_values(values) -> bool:
    return any(v is not None for v in values)


def values_array(values, factor: float = 1.0):
    """A series as a float32 array, gaps as NaN: Plotly ships it as compact binary
    (``bdata``) instead of a list of numbers, and draws NaN as a gap."""
    return np.array([np.nan if v is None else v for v in values], dtype=np.float32) * factor


class Chart:
    """A figure as the JSON text Plotly's own encoder wrote (numeric arrays as typed-array
    ``bdata``), embedded as is by the ``figure_script`` tag; ``chart["data"]`` reads it
    back (tests do)."""

    def __init__(self, text: str):
        self.text = text

    @cached_property
    def figure(self) -> dict:
        return json.loads(self.text)

    def __getitem__(self, key):
        return self.figure[key]


# The characters ``collectors.client.report.one_line`` keeps out of a name a node reported
# (``NOT_SHOWN_CLASS``: controls, line separators, bidirectional overrides and isolates),
# raw or as the JSON escape Plotly's encoder writes (the same set, spelt as escapes), each
# run as one space: a chart labels nodes, NICs, jobs and users by those names, in legends,
# ticks, hover text and annotations, and shows them as the pages' ``oneline`` filter does,
# whichever label they came in by. An escape counts only after an even run of backslashes
# (``\\u2028`` is a backslash and "u2028").
_NOT_SHOWN = re.compile(
    r"(?<!\\)((?:\\\\)*)"
    r"(?:\\u(?:00[01][0-9a-fA-F]|007[fF]|00[89][0-9a-fA-F]|202[89a-eA-E]|206[6-9])"
    "|" + NOT_SHOWN_CLASS + ")+")


def to_json(fig) -> Chart:
    return Chart(_NOT_SHOWN.sub(r"\1 ", fig.to_json(validate=False)))
