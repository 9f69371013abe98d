"""Time-series charts for the node and job pages, from ``clusterui.telemetry.series``
data. Each function returns a figure, or None when there is nothing to draw (the page
then says why instead of showing an empty frame).

Traces and layout are assembled as plain dicts and handed to ``go.Figure`` in one go:
adding traces and lines one by one costs Plotly several times more. Plotly's validation
of them is skipped (``_validate=False``, as Plotly Express does): they are built here, and
checking 64 traces of a 64-GPU job's chart cost more than building them (60 ms a chart
against 26 ms, measured by ``benchmarks/query_latency.py``).
"""

import datetime as dt
from html import escape
from itertools import groupby

import plotly.graph_objects as go

from clusterui.fabric import history
from clusterui.web.figures.common import (
    CAPACITY,
    GRID,
    MUTED,
    color,
    has_values,
    layout,
    local_time,
    time_axis,
    values_array,
)

PCT_RANGE = (0, 102)
GIB_PER_MIB = 1 / 1024
GBIT_PER_BYTE = 8 / 1e9
GB_PER_BYTE = 1e-9


def _figure(*, data, layout) -> go.Figure:
    return go.Figure(data=data, layout=layout, _validate=False)


def capacity_lines(lines: list[tuple[float, str]]) -> dict:
    """Dashed, labelled horizontal lines at capacities or limits: layout shapes and
    annotations."""
    return {
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": y,
                    "y1": y, "line": {"color": CAPACITY, "width": 1.2, "dash": "dash"}}
                   for y, _ in lines],
        "annotations": [{"text": text, "xref": "paper", "x": 0, "xanchor": "left", "yref": "y",
                         "y": y, "yanchor": "bottom", "showarrow": False,
                         "font": {"size": 10, "color": CAPACITY}} for y, text in lines],
    }


def _line(axis: dict, values, name: str, colour: str, *, width=1.6, dash="solid",
          hover="%{y:.0f}", **extra) -> dict:
    return {"type": "scatter", "mode": "lines", **axis, "y": values_array(values), "name": name,
            "line": {"width": width, "color": colour, "dash": dash}, "hovertemplate": hover,
            **extra}


def per_gpu_chart(series, metric: str | tuple[tuple[str, str], ...], labels: dict[int, str], *,
                  y_title: str, scale: float = 1.0, y_range=None,
                  capacities: dict[int, float] | None = None,
                  capacity_label: str = "capacity {:,.0f}", hover_format: str = ".0f",
                  band: tuple[list, list] | None = None,
                  say_unreported: bool = False) -> go.Figure | None:
    """One trace per GPU (``labels``: gpu id -> name, in display order); optional dashed
    lines at the GPUs' capacity (memory size, power limit), one per distinct value,
    labelled by ``capacity_label`` (a format string). ``band``: (lowest, highest) sample of
    any of the GPUs per bucket, shaded behind the lines (``band_traces``).

    ``metric`` may be several (metric, word) pairs, e.g. a link's transmit and receive:
    each GPU then draws one line per metric in its colour, solid then dotted, one legend
    entry per GPU, the hover naming each line "<GPU> <word>". ``say_unreported``: GPUs that
    sent samples (some metric of ``series`` has values) but none of this one, e.g. SM
    activity on a GPU without GPM, are named in a note on the chart instead of drawing
    nothing silently."""
    pairs = [(metric, "")] if isinstance(metric, str) else list(metric)
    axis = time_axis(series)
    traces = []
    if band is not None:
        traces += band_traces(axis, band[0], band[1], "any GPU", "#555555", scale=scale,
                              hover_format=hover_format)
    unreported = []
    for i, (gpu_id, label) in enumerate(labels.items()):
        row = series.values.get(gpu_id, {})
        drawn = False
        for (name, word), dash in zip(pairs, ("solid", "dot", "dash"), strict=False):
            values = row.get(name, [])
            if not has_values(values):
                continue
            hover = f"%{{y:{hover_format}}}"
            group = {}
            if word:
                # One legend entry per GPU (its lines toggle together); the hover names
                # each line. Plotly reads tags in these texts: escaped.
                hover += f"<extra>{escape(label)} {escape(word)}</extra>"
                group = {"legendgroup": label, "showlegend": not drawn}
            trace = _line(axis, values, label, color(i), dash=dash, hover=hover, **group)
            trace["y"] = trace["y"] * scale
            traces.append(trace)
            drawn = True
        if not drawn and any(has_values(v) for v in row.values()):
            unreported.append(label)
    if not traces:
        return None
    lines = [(v, capacity_label.format(v))
             for v in sorted({c * scale for c in (capacities or {}).values() if c})]
    extra = capacity_lines(lines)
    if say_unreported and unreported:
        extra["annotations"].append(unreported_note(unreported, len(labels)))
    base = layout(y_title=y_title, y_range=y_range,
                  show_legend=len(labels) > 1 or len(pairs) > 1, **extra)
    # Each GPU's lines are a legend group: no gap between groups, or 8 GPUs overflow.
    base["legend"]["tracegroupgap"] = 0
    return _figure(data=traces, layout=base)


def unreported_note(names: list[str], of: int) -> dict:
    """A note in the chart's top right corner naming the GPUs that do not report it."""
    who = ", ".join(names) if len(names) <= 4 else f"{len(names)} of {of} GPUs"
    return {"text": f"not reported by {who}", "xref": "paper", "x": 1, "xanchor": "right",
            "yref": "paper", "y": 1, "yanchor": "top", "showarrow": False,
            "font": {"size": 10, "color": MUTED}, "bgcolor": "rgba(255,255,255,0.85)"}


def nic_throughput_chart(series, nics) -> go.Figure | None:
    """Receive (solid) and transmit (dotted) per NIC in Gb/s, against each link's
    capacity (dashed)."""
    axis = time_axis(series)
    traces = []
    for i, nic in enumerate(nics):
        row = series.values.get(nic.id, {})
        for metric, dash, word in (("rx_bytes_per_s", "solid", "rx"),
                                   ("tx_bytes_per_s", "dot", "tx")):
            values = row.get(metric, [])
            if has_values(values):
                trace = _line(axis, values, f"{nic.name} {word}", color(i), width=1.5, dash=dash,
                              hover="%{y:.1f} Gb/s", legendgroup=nic.name)
                trace["y"] = trace["y"] * GBIT_PER_BYTE
                traces.append(trace)
    if not traces:
        return None
    lines = []
    for cap in sorted({n.link_bytes_per_s for n in nics if n.link_bytes_per_s}):
        names = [n.name for n in nics if n.link_bytes_per_s == cap]
        who = names[0] if len(names) == 1 else f"{len(names)} links"
        lines.append((cap * GBIT_PER_BYTE,
                      f"capacity {cap * GBIT_PER_BYTE:,.0f} Gb/s ({who})"))
    return _figure(data=traces, layout=layout(y_title="Gb/s", **capacity_lines(lines)))


def port_errors_chart(series, buckets: dict[tuple[int, str], list[int]],
                      names: dict[int, str]) -> go.Figure | None:
    """Fabric error counters' increases per bucket of ``series``' axis (the node's NIC
    series), stacked bars per port and counter (``fabric.history.error_buckets``): when a
    link began to err, and which counter. Only rises are stored, so a bucket without one is
    0 where the port has a sample in ``series``, and a gap where it has none (it did not
    report: nothing is known)."""
    if not buckets or not series.ts:
        return None
    axis = time_axis(series)

    def reported(nic: int) -> list[bool]:
        row = series.values.get(nic, {})
        return history.reported(row.get("rx_bytes_per_s") or [None] * len(series.ts),
                                row.get("tx_bytes_per_s") or [None] * len(series.ts))

    seen = {nic: reported(nic) for nic, _counter in buckets}
    traces = [{"type": "bar", **axis, "name": f"{names.get(nic, nic)} {counter}",
               "y": values_array(history.known(values, seen[nic])),
               "marker": {"color": color(i)}, "width": series.step * 1000, "offset": 0,
               "hovertemplate": "%{y:,}"}
              for i, ((nic, counter), values) in enumerate(buckets.items())]
    # Where no port of the node reported, shaded and said: a blank there is not "no error".
    silent = [not any(seen[nic][k] for nic in seen) for k in range(len(series.ts))]
    shapes, notes = [], []
    for quiet, run in groupby(range(len(silent)), key=silent.__getitem__):
        if not quiet:
            continue
        run = list(run)
        lo = local_time(series.ts[run[0]])
        hi = local_time(series.ts[run[-1]] + dt.timedelta(seconds=series.step))
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": lo, "x1": hi,
                       "y0": 0, "y1": 1, "fillcolor": GRID, "opacity": 0.7, "line":
                       {"width": 0}, "layer": "below"})
        if len(run) >= 3:  # wide enough to label
            notes.append({"text": "no sample", "xref": "x", "x": lo, "xanchor": "left",
                          "yref": "paper", "y": 1, "yanchor": "top", "showarrow": False,
                          "font": {"size": 10, "color": MUTED}})
    return _figure(data=traces, layout=layout(y_title="increases", barmode="stack",
                                              bargap=0, shapes=shapes, annotations=notes))


def activity_chart(series, *, gpu_util, gpu_sm, nic_pct, nvlink_pct,
                   band: tuple[list, list, str] | None = None) -> go.Figure | None:
    """GPU activity and link traffic on one time axis and one 0-100 % scale: a
    communication-bound run shows its GPUs low while its links run near capacity.

    ``band``: (lowest, highest, what) per bucket, drawn as a shaded band behind the means,
    so the dips a bucket's mean hides (a 4 s training step averaged into a minute) stay
    visible: a communication- or input-bound run's GPUs touch zero between steps."""
    axis = time_axis(series)
    traces = []
    if band is not None:
        low, high, what = band
        traces += band_traces(axis, low, high, what, "#009E73", hover_format=".0f", unit=" %")
    for values, name, colour, fill, dash in (
        (nic_pct, "NIC traffic, % of link capacity", "#D55E00", True, "solid"),
        (nvlink_pct, "NVLink traffic, % of capacity", "#CC79A7", True, "solid"),
        (gpu_util, "GPU utilization (NVML), mean over GPUs", "#0072B2", False, "solid"),
        (gpu_sm, "SM activity (GPM), mean over GPUs", "#009E73", False, "dot"),
    ):
        if not has_values(values):
            continue
        extra = {"fill": "tozeroy", "opacity": 0.5} if fill else {}
        traces.append(_line(axis, values, name, colour, width=1.2 if fill else 2, dash=dash,
                            hover="%{y:.0f} %", **extra))
    if not traces:
        return None
    return _figure(data=traces, layout=layout(height=300, y_title="% (busy or of capacity)",
                                                y_range=PCT_RANGE))


def host_cpu_chart(series, job_id: int, *, cpus_per_node: float | None) -> go.Figure | None:
    """The job's host CPU use per node against its allocation: a GPU job with its cores
    saturated and its GPUs waiting is starved by its data loader."""
    values = series.values.get(job_id, {}).get("cpu_cores_used", [])
    if not has_values(values):
        return None
    trace = _line(time_axis(series), values, "cores used (mean per node)", "#0072B2", width=1.8,
                  hover="%{y:.1f} cores", fill="tozeroy", fillcolor="rgba(0,114,178,.12)")
    lines = [(cpus_per_node, f"allocated {cpus_per_node:g} cores per node")] if cpus_per_node \
        else []
    return _figure(data=[trace], layout=layout(y_title="CPU cores", show_legend=False,
                                                 **capacity_lines(lines)))


def jobs_timeline(allocations, start, end) -> go.Figure | None:
    """The jobs on a node over time, one row per GPU (a Gantt chart). ``allocations``:
    dicts with job_id, label, user, name, gpu_index, start, end (datetimes), running."""
    by_job: dict[int, list[dict]] = {}
    for a in allocations:
        by_job.setdefault(a["job_id"], []).append(a)
    # A row per GPU; a MIG instance (it shares its GPU's index) is a row of its own.
    rows = [f"GPU {label}" for _, label in sorted(
        {(a["gpu_index"], a.get("gpu_label", str(a["gpu_index"]))) for a in allocations})]
    traces = []
    ordered = sorted(by_job.items(), key=lambda kv: min(a["start"] for a in kv[1]))
    for i, (job_id, items) in enumerate(ordered):
        bases, lengths, ys, hover = [], [], [], []
        for a in items:
            s, e = max(a["start"], start), min(a["end"], end)
            if e <= s:
                continue
            bases.append(local_time(s))
            lengths.append((e - s).total_seconds() * 1000)
            ys.append(f"GPU {a.get('gpu_label', a['gpu_index'])}")
            until = "running" if a["running"] else local_time(a["end"])[:16]
            # Names come from the scheduler: escaped, as Plotly reads tags in its texts.
            hover.append(f"<b>job {escape(a['label'])}</b> · {escape(a['user'])}<br>"
                         f"{escape(a['name'])}<br>{local_time(a['start'])[:16]} → {until}")
        if not bases:
            continue
        traces.append({
            "type": "bar", "orientation": "h", "base": bases, "x": lengths, "y": ys,
            "name": f"job {escape(items[0]['label'])}",
            "marker": {"color": color(i), "line": {"width": 0}},
            "text": [escape(items[0]["label"])] * len(ys), "textposition": "inside",
            "insidetextanchor": "start", "textfont": {"color": "#fff"},
            "customdata": [job_id] * len(ys), "hovertext": hover,
            "hovertemplate": "%{hovertext}<extra></extra>",
        })
    if not traces:
        return None
    base = layout(height=max(150, 34 * len(rows) + 60), show_legend=False, barmode="overlay",
                  bargap=0.25, hovermode="closest",
                  # automargin: a MIG instance's row is "GPU 0 · MIG 1g.10gb (GI 3)",
                  # wider than the margin the other charts keep for their numbers.
                  yaxis={"categoryorder": "array", "categoryarray": rows, "automargin": True,
                         "autorange": "reversed", "gridcolor": "rgba(0,0,0,0)",
                         "tickfont": {"color": MUTED}})
    base["xaxis"] = {**base["xaxis"], "range": [local_time(start), local_time(end)]}
    return _figure(data=traces, layout=base)


def band_traces(axis: dict, low, high, what: str, colour: str, *, scale: float = 1.0,
                hover_format: str = ".0f", unit: str = "") -> list[dict]:
    """A shaded band from each bucket's lowest to its highest sample, drawn behind the
    bucket means, so the dips a mean hides stay visible (a 4 s training step averaged into
    a minute touches zero between steps). Empty when there is nothing to draw."""
    if not has_values(low) or not has_values(high):
        return []
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    top = _line(axis, high, f"{what}, highest sample", f"rgba({r},{g},{b},0.35)", width=0.6,
                hover=f"max %{{y:{hover_format}}}{unit}", legendgroup=f"band {what}",
                showlegend=False)
    bottom = _line(axis, low, f"{what}, lowest to highest sample", f"rgba({r},{g},{b},0.35)",
                   width=0.6, hover=f"min %{{y:{hover_format}}}{unit}",
                   legendgroup=f"band {what}", fill="tonexty",
                   fillcolor=f"rgba({r},{g},{b},0.15)")
    for trace in (top, bottom):
        trace["y"] = trace["y"] * scale
    return [top, bottom]


def one_gpu_chart(series, gpu_id: int, metrics: list[tuple[str, str]], *, y_title: str,
                  scale: float = 1.0, y_range=None, hover_format: str = ".0f",
                  capacity: tuple[float, str] | None = None, low=None, high=None
                  ) -> go.Figure | None:
    """Several metrics of one GPU on one axis (``metrics``: (metric, trace name)), e.g. its
    NVML utilization beside its SM, tensor and DRAM activity. ``low``/``high``: the same
    GPU's series read with ``agg="min"``/``"max"``: each metric they hold gets its band."""
    axis = time_axis(series)
    row = series.values.get(gpu_id, {})
    traces = []
    for i, (metric, name) in enumerate(metrics):
        if low is not None and high is not None and metric in low.values.get(gpu_id, {}):
            traces += band_traces(axis, low.values[gpu_id][metric],
                                  high.values[gpu_id][metric], name, color(i), scale=scale,
                                  hover_format=hover_format)
    for i, (metric, name) in enumerate(metrics):
        values = row.get(metric, [])
        if has_values(values):
            trace = _line(axis, values, name, color(i), hover=f"%{{y:{hover_format}}}")
            trace["y"] = trace["y"] * scale
            traces.append(trace)
    if not traces:
        return None
    lines = [(capacity[0] * scale, capacity[1])] if capacity and capacity[0] else []
    return _figure(data=traces, layout=layout(y_title=y_title, y_range=y_range,
                                              show_legend=len(metrics) > 1,
                                              **capacity_lines(lines)))
