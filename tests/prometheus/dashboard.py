"""The Grafana dashboard in ``docs/grafana/clusterui.json``, read as Grafana would: its
panels' PromQL with the dashboard's variables put in, for the tests to run."""

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "clusterui.json"
SERIES_NAME = re.compile(r"\bclusterui_[a-z0-9_]+\b")


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict) -> list[dict]:
    """Every panel that is not a row, those inside collapsed rows too."""
    out = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            out += panel.get("panels", [])
        else:
            out.append(panel)
    return out


def variables(dashboard: dict) -> dict[str, dict]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def resolve(expr: str, dashboard: dict) -> str:
    """``expr`` as Grafana sends it with every query variable at "All": its ``allValue``."""
    for name, var in variables(dashboard).items():
        if var["type"] == "query":
            expr = expr.replace("${" + name + "}", var["allValue"])
            expr = expr.replace("$" + name, var["allValue"])
    assert "$" not in expr, f"a variable the tests do not know in {expr!r}"
    return expr


def queries(dashboard: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL as sent) for every target of every panel."""
    return [(p["title"], resolve(t["expr"], dashboard))
            for p in panels(dashboard) for t in p["targets"]]
