"""What every chart shares: colours, layout, the time axis."""

import datetime as dt

from django.utils import timezone

# Okabe-Ito, colour-blind safe; its yellow is replaced by a dark grey that reads on white.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#555555",
           "#000000")
INK = "#1d2330"
MUTED = "#6b7385"
GRID = "#e9ecf1"
CAPACITY = "#b3261e"  # capacity and limit lines: dashed, labelled


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
    }
    if y_range is not None:
        base["yaxis"]["range"] = list(y_range)
    base.update(extra)
    return base


def local_times(ts: list[dt.datetime]) -> list[str]:
    """Bucket times as the server's local wall time (plotly.js has no time zones)."""
    tz = timezone.get_current_timezone()
    return [t.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S") for t in ts]


def local_time(t: dt.datetime) -> str:
    return local_times([t])[0]


def has_values(values) -> bool:
    return any(v is not None for v in values)


def scaled(values, factor: float) -> list[float | None]:
    return [None if v is None else v * factor for v in values]


def to_json(fig) -> dict:
    """The figure as plain JSON for ``json_script`` (and ``Plotly.newPlot`` in charts.js)."""
    return fig.to_plotly_json()
