"""The cluster history heatmap: nodes down, time across, one colour per cell.

Rows are numbered (not named) so that 1,000 nodes draw as a dense image; the y labels are
node names at most every ``LABEL_PX`` pixels, so they never overlap. Each cell's
``customdata`` is its node's id: a click opens the node page (charts.js)."""

from html import escape

import numpy as np
import plotly.graph_objects as go

from clusterui.web.colors import PLOTLY_SCALE
from clusterui.web.figures.common import INK, MUTED, local_time

ROW_PX_MAX = 22  # a small cluster: a readable row per node
HEIGHT_MAX = 1400  # a large one: rows shrink to fit (1,000 nodes: 1.4 px each)
LABEL_PX = 14  # at least this many pixels between two y labels


def row_px(nodes: int) -> float:
    return min(ROW_PX_MAX, HEIGHT_MAX / max(nodes, 1))


def y_labels(names: list[str], px: float) -> list[str]:
    """Which rows get a label: every row when rows are tall enough, else every k-th."""
    every = max(1, int(np.ceil(LABEL_PX / px)))
    return [names[r] for r in range(0, len(names), every)]


def history_heatmap(h) -> go.Figure | None:
    """``h``: ``clusterui.web.history.History``."""
    if not h.nodes or not h.ts or np.all(np.isnan(h.z)):
        return None
    info = h.info
    zmax = info.zmax if info.zmax is not None else float(np.nanmax(h.z)) or 1.0
    # Rows are categories named after their node (its cluster too where there are several):
    # the hover reads the name from the axis, not from a string per cell.
    several = len({c for _i, _n, c in h.nodes}) > 1
    names = [escape(f"{c}/{n}" if several else n) for _i, n, c in h.nodes]
    top = max(node_id for node_id, _n, _c in h.nodes)
    ids = np.repeat(np.array([[node_id] for node_id, _n, _c in h.nodes],
                             dtype=np.uint16 if top < 65536 else np.int32), len(h.ts), axis=1)
    px = row_px(len(names))
    x = [local_time(t) for t in h.ts]
    trace = {
        "type": "heatmap", "z": h.z.astype(np.float32), "x": x, "y": names,
        # x holds each bucket's start: the cell spans the bucket (centred on its middle).
        "xperiod": h.step * 1000, "xperiod0": x[0], "xperiodalignment": "middle",
        "customdata": ids, "colorscale": PLOTLY_SCALE, "zmin": 0, "zmax": zmax,
        "hoverongaps": False,
        "hovertemplate": f"%{{y}}<br>%{{x}}<br>{escape(info.label)} "
                         f"<b>%{{z:.1f}} {info.unit}</b><extra></extra>",
        "colorbar": {"title": {"text": info.unit, "side": "right"}, "thickness": 12,
                     "len": min(1.0, 300 / max(200, px * len(names)))},
    }
    height = int(max(180, px * len(names) + 70))
    labels = y_labels(names, px)
    return go.Figure(data=[trace], layout=dict(
        height=height,
        margin={"l": 110, "r": 20, "t": 6, "b": 50},
        paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="#d5d9e0",  # no data: grey
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12,
              "color": INK},
        xaxis={"type": "date", "showgrid": False, "zeroline": False, "ticks": "outside",
               "tickcolor": "#c9ced8"},
        yaxis={"type": "category", "showgrid": False, "zeroline": False,
               "autorange": "reversed", "tickmode": "array", "tickvals": labels,
               "ticktext": labels, "tickfont": {"size": 11, "color": MUTED},
               "fixedrange": True},
        uirevision="keep",
        template="none",
    ))
