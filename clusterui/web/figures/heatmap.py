"""The overview's node x GPU utilization heatmap.

Nodes run along x and GPU indexes down y. A large cluster wraps into bands of
``BAND`` nodes, one under the other, so 1,000 nodes stay readable on one screen. Each
cell's ``customdata`` is ``[node id, hover text]``: a click opens the node page
(charts.js). A small cluster's cells also show their utilization, or "free" for a GPU
no job holds.
"""

import plotly.graph_objects as go

from clusterui.web.colors import PLOTLY_SCALE
from clusterui.web.figures.common import INK, MUTED

BAND = 100  # nodes per band once a cluster has more than SINGLE_BAND_MAX
SINGLE_BAND_MAX = 48
NO_DATA = "#d5d9e0"


def _label(cell) -> str:
    if cell.util is None:
        return ""
    return f"{cell.util:.0f}" if cell.allocated else "free"


def _hover(cell) -> str:
    head = f"<b>{cell.node}</b> · GPU {cell.index}"
    if cell.util is None:
        return f"{head}<br>no current sample"
    sm = "" if cell.sm_active is None else f" · SM {cell.sm_active:.0f} %"
    if cell.job_label:
        job = f"<br>job {cell.job_label}"
    elif cell.allocated:
        job = "<br>allocated"
    else:
        job = "<br>free"
    return f"{head}<br>util {cell.util:.0f} %{sm}{job}"


def utilization_heatmap(cells, *, band: int = BAND) -> go.Figure | None:
    """``cells``: ``snapshot.GpuCell`` in node order, then GPU index."""
    if not cells:
        return None
    nodes: list[tuple[int, str]] = []
    by_node: dict[int, dict[int, object]] = {}
    for cell in cells:
        if cell.node_id not in by_node:
            by_node[cell.node_id] = {}
            nodes.append((cell.node_id, cell.node))
        by_node[cell.node_id][cell.index] = cell
    gpus = max(c.index for c in cells) + 1
    width = len(nodes) if len(nodes) <= SINGLE_BAND_MAX else band
    bands = [nodes[i:i + width] for i in range(0, len(nodes), width)]
    rows_per_band = gpus + (1 if len(bands) > 1 else 0)  # a blank row between bands

    z, missing, text, custom = [], [], [], []
    tickvals, ticktext = [], []
    for b, members in enumerate(bands):
        for g in range(gpus):
            zr, mr, tr, cr = [], [], [], []
            for col in range(width):
                cell = by_node[members[col][0]].get(g) if col < len(members) else None
                if cell is None:  # the last band's unused columns
                    zr.append(None)
                    mr.append(None)
                    tr.append("")
                    cr.append(None)
                    continue
                zr.append(None if cell.util is None else round(cell.util, 1))
                mr.append(1 if cell.util is None else None)
                tr.append(_label(cell))
                cr.append([cell.node_id, _hover(cell)])
            z.append(zr)
            missing.append(mr)
            text.append(tr)
            custom.append(cr)
        if len(bands) > 1:
            tickvals.append(b * rows_per_band + (gpus - 1) / 2)
            ticktext.append(f"{members[0][1]} –<br>{members[-1][1]}")
            if b < len(bands) - 1:
                z.append([None] * width)
                missing.append([None] * width)
                text.append([""] * width)
                custom.append([None] * width)
    if len(bands) == 1:
        tickvals = list(range(gpus))
        ticktext = [f"GPU {g}" for g in range(gpus)]

    single = len(bands) == 1
    common = {"customdata": custom, "hovertemplate": "%{customdata[1]}<extra></extra>",
              "xgap": 2 if single else 1, "ygap": 2 if single else 1}
    if single:
        common.update(text=text, texttemplate="%{text}", textfont={"size": 11})
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=missing, colorscale=[[0, NO_DATA], [1, NO_DATA]], showscale=False, zmin=0, zmax=1,
        name="no data", **common))
    fig.add_trace(go.Heatmap(
        z=z, colorscale=PLOTLY_SCALE, zmin=0, zmax=100, name="utilization",
        showscale=False,  # the card's legend explains the scale and "no data"
        **common))
    row_px = 30 if single else 11
    height = max(160, row_px * len(z) + (90 if single else 30))
    fig.update_layout(
        height=height,
        margin={"l": 92 if not single else 56, "r": 10, "t": 6, "b": 70 if single else 10},
        paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12,
              "color": INK},
        xaxis={"showgrid": False, "zeroline": False, "fixedrange": True,
               "tickvals": list(range(width)) if single else [],
               "ticktext": [name for _, name in bands[0]] if single else [],
               "tickangle": -45 if width > 12 else 0, "tickfont": {"size": 11}},
        yaxis={"showgrid": False, "zeroline": False, "autorange": "reversed",
               "fixedrange": True, "tickvals": tickvals, "ticktext": ticktext,
               "tickfont": {"size": 11, "color": MUTED}},
        uirevision="keep",
    )
    return fig
