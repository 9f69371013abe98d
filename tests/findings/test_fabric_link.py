"""A degraded fabric link end to end: the simulator's port retrains at 1X, the real collector
reads its sysfs tree, the real validation and writer store the batches, the detector pass
opens a node finding, the alert tasks mail it to the admins over SMTP, and it closes once
the link is back at 4X."""

import datetime as dt
import os
import time

import pytest

from clusterui.alerts.tasks import send_alerts
from clusterui.fabric.models import PortLink
from clusterui.findings.choices import FindingKind, FindingState, Severity
from clusterui.findings.detectors import fabric_link
from clusterui.findings.models import Finding
from clusterui.findings.runner import run_pass
from clusterui.ingest.tasks import ingest_envelope
from collectors.agent import Agent
from collectors.sim.fabric import LinkFault, rate_text
from collectors.sim.node import SimNode
from collectors.sim.nvml import SimNVML
from tests.fabric_factories import fabric_batch, port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def smtp(settings):
    from tests.alerts.conftest import smtp as alerts_smtp

    yield from alerts_smtp.__wrapped__(settings)


def _at(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def _run(node: SimNode, agent: Agent, start: float, end: float, flush_every: int = 6) -> None:
    t, ticks = start, 0
    while t <= end:
        node.advance(t)
        agent.sample()
        ticks += 1
        if ticks % flush_every == 0:
            ingest_envelope(agent.build_batch())
        t += 10.0
    ingest_envelope(agent.build_batch())


def test_a_link_that_retrains_at_1x_is_mailed_to_admins_and_closes(tmp_path, smtp, settings):
    settings.ADMINS = [("Ops", "ops@example.org")]
    t0 = float(int(time.time()) - 1500)
    node = SimNode(str(tmp_path / "gpu-f001"), "gpu-f001", gpus=2, ib_ports=2, seed=5)
    node.link_faults.append(LinkFault(port=1, start=t0 + 120, kind="width"))
    node.advance(t0)
    clock = {"t": t0}
    agent = Agent(node.collector_config(interval=10, flush=60), nvml=SimNVML(node),
                  clock=lambda: node.now or clock["t"])
    _run(node, agent, t0, t0 + 600)

    link = PortLink.objects.get(nic__name="mlx5_1:1")
    assert (link.link_width, link.link_gbps, link.nominal_gbps) == (1, 100.0, 400.0)
    run_pass(now=_at(t0 + 700))
    finding = Finding.objects.get(kind=FindingKind.FABRIC_LINK)
    assert finding.job is None and finding.node.name == "gpu-f001"
    assert finding.state == FindingState.OPEN and finding.severity == Severity.WARNING
    assert "100 Gb/s (1X) instead of 400 Gb/s (4X)" in finding.explanation
    assert [p["name"] for p in finding.evidence["ports"]] == ["mlx5_1:1"]  # not the healthy one

    send_alerts()
    [mail] = smtp.received
    assert mail.envelope_to == ["ops@example.org"]
    assert "gpu-f001" in mail.subject
    assert "mlx5_1:1" in mail.text
    # The evidence names the port as the fabric page does (it used to be left out).
    assert "mlx5_1:1 (infiniband): ACTIVE / LinkUp, 100 Gb/s (1X) of 400 Gb/s (4X), degraded" \
        in " ".join(mail.text.split())

    # The link is repaired: back at 4X; once healthy for DETECTOR_CLOSE_AFTER_S it closes.
    node.link_faults.clear()
    pdir = os.path.join(node.sysfs_root, "class", "infiniband", "mlx5_1", "ports", "1")
    with open(os.path.join(pdir, "rate"), "w") as fh:
        fh.write(rate_text(4))
    _run(node, agent, t0 + 610, time.time() - 40)
    run_pass()
    finding.refresh_from_db()
    assert finding.state == FindingState.CLOSED
    assert len(smtp.received) == 1  # no second email


def test_errors_over_the_threshold_raise_a_down_link_is_critical(settings):
    settings.DETECTOR_FABRIC_ERRORS = 50
    start = time.time() - 300
    ports = [[port(), port()],
             [port(symbol_error=30), port()],
             [port(symbol_error=25), port(link_state=1, phys_state=2)]]
    ingest_envelope(fabric_batch("gpu-e001", ports=ports, start=start, job=None, gpus=1))
    run_pass()
    finding = Finding.objects.get(kind=FindingKind.FABRIC_LINK)
    assert finding.severity == Severity.CRITICAL  # mlx5_1:1 went down after being up
    names = [p["name"] for p in finding.evidence["ports"]]
    assert names == ["mlx5_0:1", "mlx5_1:1"]
    assert finding.evidence["ports"][0]["errors"]["symbol_error"] == 55
    # On the node's page each port reads as the fabric page says it, not as its raw fields.
    from clusterui.web.templatetags.web_format import evidence_items

    shown = dict(evidence_items(finding.evidence))["Ports"]
    assert shown[0].startswith("mlx5_0:1 (infiniband): ACTIVE / LinkUp, ")
    assert shown[0].endswith("; errors: symbol_error 55")
    assert shown[1].startswith("mlx5_1:1 (infiniband): DOWN / Polling")
    assert ", down" in shown[1] and "errors" not in shown[1]


def test_below_the_threshold_and_never_up_raise_nothing(settings):
    settings.DETECTOR_FABRIC_ERRORS = 50
    start = time.time() - 300
    # An unused port never ACTIVE (no cable) is not a fault; a few errors are not either.
    ports = [[port(symbol_error=3), port(link_state=1, phys_state=2, link_gbps=10.0)],
             [port(symbol_error=4), port(link_state=1, phys_state=2, link_gbps=10.0)]]
    ingest_envelope(fabric_batch("gpu-e002", ports=ports, start=start, job=None, gpus=1))
    run_pass()
    assert not Finding.objects.filter(kind=FindingKind.FABRIC_LINK).exists()
    assert fabric_link.KIND == FindingKind.FABRIC_LINK


def test_a_pause_storm_is_evidence_on_an_unhealthy_port_and_opens_nothing_alone(settings):
    settings.DETECTOR_FABRIC_ERRORS = 50
    start = time.time() - 300
    # Pause fields as the collector sends them (collectors/roce_pause.py), through ingest.
    storm = dict(tx_pause_storm_warning_events=2, tx_pause_storm_error_events=1,
                 rx_prio_pause=900)
    ports = [[port(), port()],
             [port(symbol_error=60), port()],
             [port(**storm), port()]]
    ingest_envelope(fabric_batch("gpu-p001", ports=ports, start=start, job=None, gpus=1))
    quiet = [[port(), port()], [port(), port(**storm)]]
    ingest_envelope(fabric_batch("gpu-p002", ports=quiet, start=start, job=None, gpus=1))
    run_pass()
    finding = Finding.objects.get(kind=FindingKind.FABRIC_LINK)
    assert finding.node.name == "gpu-p001"  # a storm alone (gpu-p002) opens no finding
    evidence = finding.evidence["ports"][0]
    assert evidence["pause_storm"] == {"tx_pause_storm_warning_events": 2,
                                       "tx_pause_storm_error_events": 1}
    assert "pause storm in the last interval" in finding.explanation
