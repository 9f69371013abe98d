"""The text of a job's report (``clusterui jobstats JOBID``), drawn from the JSON API's
answers: the job detail (``/api/v1/jobs/<id>/``) and its GPU series (``.../metrics/``).

The standard library only, and nothing that talks to a server: the ``clusterui`` command
renders what it fetched, and the server renders the same report for its job-end email
(``clusterui.alerts.jobreport``) from the same serializers, so both print the same lines.
"""

from __future__ import annotations

import datetime as dt
import re

SPARK = "▁▂▃▄▅▆▇█"
SPARK_ASCII = "_.-=+*#@"
WIDTH = 60
RULE = "=" * 80
# What a terminal or a text email acts on instead of showing: C0 and C1 controls (newlines,
# escape sequences), line and paragraph separators, and the bidirectional overrides and
# isolates that reorder the text after them (CVE-2021-42574, "Trojan Source").
NOT_SHOWN_CLASS = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
_NOT_SHOWN = re.compile(NOT_SHOWN_CLASS + "+")
SOURCES = {"sm_active": "SM activity (GPM)", "nvml_util": "GPU utilization (NVML)",
           "mixed": "busy (SM activity where reported, else NVML)"}


def rebin(values: list, width: int) -> list:
    """``values`` (None: a gap) averaged down to at most ``width`` points."""
    n = len(values)
    if n <= width:
        return list(values)
    out = []
    for k in range(width):
        group = [v for v in values[k * n // width:(k + 1) * n // width] if v is not None]
        out.append(sum(group) / len(group) if group else None)
    return out


def sparkline(values: list, *, width: int = WIDTH, ascii_only: bool = False) -> str:
    """0-100 % on a fixed scale (a low line is a low figure); a gap is a space."""
    chars = SPARK_ASCII if ascii_only else SPARK
    top = len(chars) - 1
    return "".join(" " if v is None else chars[min(top, max(0, int(v / 100.0 * len(chars))))]
                   for v in rebin(values, width))


def pct(value) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def hours(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def mib(value) -> str:
    return "n/a" if value is None else f"{value:,.0f} MiB"


def energy(joules) -> str:
    return "n/a" if joules is None else f"{joules / 3.6e6:.3f} kWh ({joules / 1e3:,.1f} kJ)"


def _time(text: str | None) -> dt.datetime | None:
    return None if not text else dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _duration(job: dict) -> str:
    start = _time(job["started_at"]) or _time(job["first_seen"])
    end = _time(job["ended_at"]) or _time(job["last_seen"])
    if start is None or end is None:
        return "n/a"
    return slurm_duration(max(0, (end - start).total_seconds()))


def slurm_duration(seconds: float) -> str:
    """[days-]hours:minutes:seconds, as Slurm prints RunTime, TimeLimit and Elapsed."""
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _bar(value, width: int = 40) -> str:
    filled = 0 if value is None else round(min(100.0, max(0.0, value)) / 100 * width)
    return "[" + "|" * filled + " " * (width - filled) + "]"


def one_line(value) -> str:
    """A name a node reported (a job's name, user, account, ...) as one line of plain text:
    each run of characters a terminal or a text email would act on becomes one space, so
    that a job named "x\\nACTION REQUIRED: ..." or carrying escape sequences cannot write
    lines or colours of its own into the report or an email."""
    return _NOT_SHOWN.sub(" ", str(value))


def render(report: dict, *, width: int = WIDTH, ascii_only: bool = False) -> str:
    job, metrics = report["job"], report["metrics"]
    job = {**job, **{k: one_line(job[k]) for k in ("external_id", "cluster", "user", "account",
                                                    "name", "partition") if job.get(k)}}
    eff = job["efficiency"]
    nodes = sorted({g["node"] for g in job["gpus"]})
    lines = [RULE, "ClusterUI job report".center(80).rstrip(), RULE]
    facts = [
        ("Job ID", job["external_id"]),
        ("Cluster", f"{job['cluster']} ({job['scheduler']})"),
        ("User/Account", f"{job['user']}/{job['account'] or '-'}"),
        ("Job Name", job["name"] or "-"),
        ("State", job["state"].upper()),
        ("Partition", job["partition"] or "-"),
        ("Nodes", str(len(nodes))),
        ("GPUs", str(len(job["gpus"]))),
        ("CPU Cores", "n/a" if job["cpus"] is None else f"{job['cpus']} per node"),
        ("Started", job["started_at"] or "n/a"),
        ("Ended", job["ended_at"] or "-"),
        ("Run Time", _duration(job)),
    ]
    lines += [f"{k:>14}: {v}" for k, v in facts]

    lines += ["", "Overall Utilization".center(80).rstrip(), RULE]
    if eff is None:
        lines.append("  Not computed yet: the detector pass computes a job's figures once it "
                     "has its samples (every minute).")
    else:
        lines += [
            f"  GPU efficiency {_bar(eff['efficiency_pct'])} {pct(eff['efficiency_pct'])}",
            f"  GPU-hours: {hours(eff['gpu_hours_allocated'])} allocated, "
            f"{hours(eff['gpu_hours_used'])} used, {hours(eff['gpu_hours_wasted'])} wasted",
            *_coverage(eff),
            f"  Used time weighted by: {SOURCES.get(eff['util_source'], eff['util_source'])}",
            f"  Mean {SOURCES.get(eff['util_source'], 'busy')} over GPUs: "
            f"{pct(eff['util_mean_pct'])}",
            f"  GPU memory high-water: {mib(eff['mem_peak_mib'])} of "
            f"{mib(eff['mem_capacity_mib'])} on one GPU",
            f"  GPU energy: {energy(eff['energy_j'])}",
            f"  Host CPU: {_cores(eff)}",
            f"  Figures through: {eff['through'] or 'n/a'}"
            + (" (final)" if eff["finalized_at"] else " (running: refreshed every minute)"),
        ]

    lines += ["", "Detailed Utilization".center(80).rstrip(), RULE]
    series = {(s["id"], s["metric"]): s["values"] for s in metrics["series"]
              if s["source"] == "gpu"}
    per_gpu = (eff or {}).get("per_gpu") or {}
    per_node = {n["node"]: n for n in (eff or {}).get("per_node") or []}
    for node in nodes:
        n = per_node.get(node)
        if n:
            lines.append(f"  {one_line(node)}: {n['gpus']} GPUs, "
                         f"efficiency {pct(n['efficiency_pct'])}, "
                         f"NVML utilization {pct(n['nvml_util_mean_pct'])}, "
                         f"memory high-water {mib(n['mem_peak_mib'])}, "
                         f"energy {energy(n['energy_j'])}, "
                         f"{hours(n['gpu_hours_wasted'])} GPU-hours wasted")
        else:
            lines.append(f"  {one_line(node)}")
        for gpu in (g for g in job["gpus"] if g["node"] == node):
            lines += _gpu_lines(gpu, per_gpu.get(gpu["uuid"]), series, width, ascii_only)
    scale = SPARK_ASCII if ascii_only else SPARK
    lines.append(f"  Sparklines: 0 to 100 % as {scale[0]} to {scale[-1]}, "
                 f"{metrics['step_s']:g} s per bucket before fitting {width} columns; "
                 "a blank is no data.")

    lines += ["", "Findings".center(80).rstrip(), RULE]
    if job["findings"]:
        for f in job["findings"]:
            lines.append(f"  [{f['severity'].upper()}] {f['title']} ({f['state']}, "
                         f"{hours(f['wasted_gpu_hours'])} GPU-hours wasted)")
            if f["explanation"]:
                lines.append(f"    {f['explanation']}")
            if f["suggestion"]:
                lines.append(f"    What to do: {f['suggestion']}")
    elif job["judged_at"] is None:
        lines.append("  Not judged yet: the detectors judge a job after its first minutes, "
                     "once they have enough of its samples.")
    else:
        lines.append(f"  None: the detectors found nothing wrong (judged through "
                     f"{job['judged_at']}).")
    lines.append(RULE)
    return "\n".join(lines) + "\n"


def _coverage(eff: dict) -> list[str]:
    """A line when the server says the samples cover too little of the run to go unsaid
    (``partly_measured``; servers before it send none: nothing is said)."""
    if not eff.get("partly_measured"):
        return []
    return [f"  Measured from: {eff['measured_from']} ({eff['measured_pct']:.0f} % of the run; "
            "the rest assumed alike)"]


def _cores(eff: dict) -> str:
    used, held = eff["cpu_cores_mean"], eff["cpus_allocated"]
    if used is None:
        return "n/a"
    return f"{used:.1f} cores busy on average" + (f" of {held} allocated" if held else "")


def _gpu_lines(gpu: dict, figures: dict | None, series: dict, width: int,
               ascii_only: bool) -> list[str]:
    head = f"    GPU {gpu['index']} ({one_line(gpu['uuid'])}, {one_line(gpu['model'])})"
    if not figures or figures.get("mean") is None:
        out = [f"{head}: no samples"]
    else:
        busy = SOURCES.get(figures["source"], figures["source"])
        out = [f"{head}:",
               f"      {busy} {pct(figures['mean'])} (p10 {pct(figures['p10'])}, "
               f"p90 {pct(figures['p90'])}), NVML utilization {pct(figures['nvml_mean'])}, "
               f"memory high-water {mib(figures['mem_peak_mib'])}, "
               f"energy {energy(figures['energy_j'])}, "
               f"{hours(figures['wasted_gpu_hours'])} GPU-hours wasted"]
    for metric, label in (("util_pct", "NVML util"), ("sm_active_pct", "SM active")):
        values = series.get((gpu["id"], metric))
        if values and any(v is not None for v in values):
            out.append(f"      {label:>9} |{sparkline(values, width=width, ascii_only=ascii_only)}|")
    return out
