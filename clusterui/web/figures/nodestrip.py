"""A multi-node job's nodes x time strip: one row per node, one column per time bucket,
coloured by a 0-100 % quantity (its GPUs' mean SM activity, or its fabric traffic against
capacity). Nodes that wait for each other in lockstep make near-identical rows; a straggler
is the row that differs (busier while the others wait, or a link carrying less).

Rows come already reduced to one value per node and bucket (``clusterui.web.derived``), on
the job page's aligned time axis, so the strip lines up with the job's other charts.
"""

from html import escape

import numpy as np
import plotly.graph_objects as go

from clusterui.web.colors import PLOTLY_SCALE
from clusterui.web.figures.common import INK, MUTED, has_values, layout, time_axis

ROW_PX = 22  # per node, until MAX_HEIGHT: a larger job's rows get thinner (a 256-node
MAX_HEIGHT = 640  # job's are 2 px: the odd row still shows as a line of another colour)


def node_strip(series, rows: list[tuple[str, list]], *, quantity: str) -> go.Figure | None:
    """``rows``: (node name, per-bucket values, None where the node reported nothing) in
    display order, top to bottom; ``quantity`` names the value ("SM activity (GPM)")."""
    rows = [(name, values) for name, values in rows if has_values(values)]
    if len(rows) < 2:
        return None  # one node: nothing to compare
    z = np.array([[np.nan if v is None else v for v in values] for _, values in rows],
                 dtype=np.float32)
    names = [escape(name) for name, _ in rows]  # Plotly reads tags in labels
    trace = {
        "type": "heatmap", "z": z, "y": names, **time_axis(series),
        "colorscale": PLOTLY_SCALE, "zmin": 0, "zmax": 100, "hoverongaps": False,
        "name": quantity, "ygap": 1 if len(rows) <= 64 else 0,
        "hovertemplate": f"%{{y}} · %{{x}}<br>{escape(quantity)} <b>%{{z:.0f}} %</b>"
                         "<extra></extra>",
        "colorbar": {"thickness": 10, "len": 1, "outlinewidth": 0,
                     "tickfont": {"size": 10, "color": MUTED}, "ticksuffix": " %"},
    }
    base = layout(height=min(MAX_HEIGHT, max(120, ROW_PX * len(rows) + 60)), show_legend=False,
                  hovermode="closest")
    base["yaxis"] = {"autorange": "reversed", "type": "category", "fixedrange": True,
                     "showgrid": False, "zeroline": False,
                     "tickfont": {"size": 10 if len(rows) > 16 else 11, "color": INK},
                     "showticklabels": len(rows) <= 64}
    base["margin"] = {"l": 110, "r": 10, "t": 10, "b": 36}
    base["plot_bgcolor"] = "#d5d9e0"  # gaps (no sample) read as grey
    return go.Figure(data=[trace], layout=base, _validate=False)
