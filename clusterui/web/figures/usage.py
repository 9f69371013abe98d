"""The users page's chart: GPU-hours used and wasted per user or account."""

import plotly.graph_objects as go

from clusterui.web.figures.common import MUTED, layout

USED = "#0072B2"
WASTED = "#E69F00"


def usage_bars(rows, *, top: int = 15) -> go.Figure | None:
    """Stacked horizontal bars, most wasteful first. ``rows``: ``usage_summary`` rows."""
    rows = [r for r in rows if r["gpu_hours"] > 0][:top]
    if not rows:
        return None
    names = [r["name"] for r in rows]
    used = {"type": "bar", "y": names, "x": [r["used_gpu_hours"] for r in rows], "name": "used",
            "orientation": "h", "marker": {"color": USED},
            "hovertemplate": "%{y}: %{x:,.1f} GPU-h used<extra></extra>"}
    wasted = {"type": "bar", "y": names, "x": [r["wasted_gpu_hours"] for r in rows],
              "name": "wasted", "orientation": "h",
              "marker": {"color": WASTED, "pattern": {"shape": "/", "fgcolor": "#8a5a00",
                                                      "size": 6}},
              "hovertemplate": "%{y}: %{x:,.1f} GPU-h wasted<extra></extra>"}
    return go.Figure(data=[used, wasted], layout=layout(
        height=max(160, 26 * len(rows) + 70), barmode="stack", hovermode="closest",
        legend={"orientation": "h", "x": 0, "y": -0.2, "traceorder": "normal"},
        xaxis={"title": {"text": "GPU-hours", "font": {"size": 11, "color": MUTED}},
               "gridcolor": "#e9ecf1", "rangemode": "tozero"},
        yaxis={"autorange": "reversed", "tickfont": {"size": 12}},
        margin={"l": 90, "r": 16, "t": 10, "b": 60},
    ))
