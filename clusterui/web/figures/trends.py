"""The trends page's chart: one metric per bucket (day, week or month), stacked by group."""

import plotly.graph_objects as go

from clusterui.web.figures.common import MUTED, color, layout

OTHERS = "#b8bec9"


def trend_bars(trends, metric: str, label: str, *, top: int = 8) -> go.Figure | None:
    """Stacked bars: the ``top`` groups by GPU-hours, the rest as one "others" bar."""
    if not trends.groups or not trends.total(metric):
        return None
    x = [trends.label(p) for p in trends.periods]
    traces = []
    shown, rest = trends.groups[:top], trends.groups[top:]
    for i, g in enumerate(shown):
        traces.append({"type": "bar", "name": g.name, "x": x,
                       "y": [g.by_period.get(p, {}).get(metric, 0.0) for p in trends.periods],
                       "marker": {"color": color(i)},
                       "hovertemplate": f"{g.name}: %{{y:,.1f}}<extra></extra>"})
    if rest:
        traces.append({"type": "bar", "name": f"{len(rest)} others", "x": x,
                       "y": [sum(g.by_period.get(p, {}).get(metric, 0.0) for g in rest)
                             for p in trends.periods],
                       "marker": {"color": OTHERS},
                       "hovertemplate": "others: %{y:,.1f}<extra></extra>"})
    return go.Figure(data=traces, layout=layout(
        height=300, barmode="stack", y_title=label,
        # Weeks are named by their Monday ("Nov 16"), days by their date, months "2026-11".
        xaxis={"type": "category", "tickangle": -45 if len(x) > 14 else 0,
               "tickfont": {"size": 11, "color": MUTED}},
        margin={"l": 56, "r": 16, "t": 10, "b": 60},
    ))
