"""The straggler detector as a plain function of a multi-node window: it names the node
that holds the others back, with the evidence and the GPU-hours lost, and stays quiet on
jobs whose nodes run alike."""

import dataclasses

import pytest

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.detectors import straggler
from clusterui.findings.thresholds import HW_THERMAL, SW_POWER_CAP, SW_THERMAL
from tests.findings.test_detectors import T, gpu, window

NODES = ("n1", "n2", "n3", "n4")


def job(busy=None, fabric=None, gpus=4, errors=None, **per_node):
    """Four nodes of ``gpus`` GPUs at SM activity ``busy[node]`` (default 60 %), with
    ``per_node[node]`` as extra GPU-window fields and ``errors[node]`` as the node's port
    error counter increases."""
    busy = busy or {}
    gs = [gpu(i, node=n, sm=busy.get(n, 60.0), util=95.0, **per_node.get(n, {}))
          for n in NODES for i in range(gpus)]
    for g in gs:
        g.node_id = NODES.index(g.node) + 1
    return window(gs, nodes=len(NODES), node_fabric=fabric or {},
                  node_port_errors=errors or {})


def test_a_busy_node_that_its_lockstep_peers_wait_for_is_named_with_the_lost_gpu_hours():
    w = job({"n3": 90.0, "n1": 61.0, "n2": 59.5, "n4": 60.0})
    d = straggler.detect(w, T)
    assert d.kind == FindingKind.STRAGGLER and d.node_id == 3
    assert d.evidence["node"] == "n3" and d.evidence["reasons"] == ["busy"]
    assert d.evidence["busy_gap_pct"] == 30.0
    # Each of the 12 peer GPUs waits 1 - busy/90 of the hour.
    assert d.wasted_gpu_hours == pytest.approx(4 * sum(1 - b / 90 for b in (61, 59.5, 60)))
    assert "node n3 stood out" in d.explanation and "90 %" in d.explanation
    assert "sbatch --exclude=n3" in d.suggestion
    assert 'scontrol update nodename=n3 state=drain reason="straggler: slow GPUs' in d.suggestion
    assert d.severity == Severity.WARNING  # 4 GPU-hours: above the warning floor anyway


def test_nodes_that_run_alike_or_differ_too_little_are_not_stragglers():
    assert straggler.detect(job(), T) is None
    assert straggler.detect(job({"n2": 72.0}), T) is None  # 12 points: under the 15-point gap
    # Peers that do not agree with each other: no lockstep, no single odd node.
    assert straggler.detect(job({"n1": 90.0, "n2": 40.0, "n3": 75.0, "n4": 60.0}), T) is None
    # A peer whose mean is low because one GPU is idle (idle_gpu's finding) is not waiting
    # in lockstep: two nodes, one with all GPUs at 70 %, the other with one GPU idle.
    gs = [gpu(i, node=n, sm=0.0 if (n, i) == ("n2", 1) else 70.0, util=90.0)
          for n in ("n1", "n2") for i in range(2)]
    for g in gs:
        g.node_id = 1 if g.node == "n1" else 2
    assert straggler.detect(window(gs, nodes=2), T) is None
    single = window([gpu(i, sm=90.0 if i == 0 else 40.0) for i in range(8)])
    assert straggler.detect(single, T) is None  # one node: other detectors' business


def test_a_throttled_node_that_the_others_wait_for_is_named_with_its_clock():
    held = {"throttled_share": 0.9, "throttle_bits": SW_THERMAL | HW_THERMAL,
            "throttled_clock_mhz": 1310.0}
    free = {"free_clock_max_mhz": 1980.0}
    w = job({"n2": 70.0}, n1=free, n2=held, n3=free, n4=free)
    d = straggler.detect(w, T)
    assert d.evidence["node"] == "n2" and d.evidence["reasons"] == ["throttled"]
    assert "software thermal slowdown, hardware thermal slowdown in 90 %" in d.explanation
    assert "1310 MHz against 1980 MHz" in d.explanation
    assert "nvidia-smi -q -d PERFORMANCE" in d.suggestion
    # Throttled the same way but nobody waits for it (an independent job per node): quiet.
    assert straggler.detect(job({"n2": 62.0}, n1=free, n2=held, n3=free, n4=free), T) is None
    # Every node at its power cap (heavy, uniform load): not one node's fault.
    capped = {"throttled_share": 0.8, "throttle_bits": SW_POWER_CAP,
              "throttled_clock_mhz": 1600.0}
    assert straggler.detect(job({"n2": 70.0}, n1=capped, n2=capped, n3=capped, n4=capped),
                            T) is None


def test_a_node_whose_fabric_runs_well_below_its_peers_is_named():
    w = job(fabric={"n1": 45.0, "n2": 43.0, "n3": 44.0, "n4": 12.0})
    d = straggler.detect(w, T)
    assert d.evidence["node"] == "n4" and d.evidence["reasons"] == ["fabric"]
    assert d.evidence["node_fabric_pct"] == 12.0 and d.evidence["peers_fabric_pct"] == 44.0
    # Every GPU was 40 % not busy; a link as fast as the peers' saves 1 - 12/44 of that.
    assert d.wasted_gpu_hours == pytest.approx(16 * 0.4 * (1 - 12 / 44), abs=0.02)
    assert "ibstat" in d.suggestion
    # Within the ratio, a quiet network, or two slow nodes: quiet.
    assert straggler.detect(job(fabric={"n1": 45.0, "n2": 43.0, "n3": 44.0, "n4": 25.0}),
                            T) is None
    assert straggler.detect(job(fabric={"n1": 4.0, "n2": 5.0, "n3": 4.0, "n4": 0.5}), T) is None
    assert straggler.detect(job(fabric={"n1": 45.0, "n2": 43.0, "n3": 10.0, "n4": 12.0}),
                            T) is None


def test_a_node_whose_port_errors_rise_and_whose_traffic_drops_is_named_with_the_counters():
    fabric = {"n1": 45.0, "n2": 43.0, "n3": 31.0, "n4": 44.0}
    errors = {"n3": {"symbol_error": 1800, "port_rcv_errors": 240, "link_error_recovery": 6},
              "n1": {"symbol_error": 2}}
    d = straggler.detect(job(fabric=fabric, errors=errors), T)
    assert d.kind == FindingKind.STRAGGLER and d.node_id == 3
    assert d.evidence["node"] == "n3" and d.evidence["reasons"] == ["errors"]
    assert d.evidence["node_port_errors"] == errors["n3"]
    assert d.evidence["node_port_errors_total"] == 2046
    assert d.evidence["peers_port_errors_max"] == 2
    assert d.evidence["node_fabric_pct"] == 31.0 and d.evidence["peers_fabric_pct"] == 44.0
    assert "error counters rose by 2,046 (1,800 symbol error, 240 port rcv errors, " \
           "6 link error recovery)" in d.explanation
    assert "no peer's rose by more than 2" in d.explanation
    # The time the GPUs were not busy (40 %) times the share of the traffic the node lost.
    assert d.wasted_gpu_hours == pytest.approx(16 * 0.4 * (1 - 31 / 44), abs=0.02)
    assert 'reason="straggler: erroring fabric port' in d.suggestion
    assert "sbatch --exclude=n3" in d.suggestion and "perfquery" in d.suggestion
    assert d.title.endswith("(erroring fabric port)")
    assert {n["node"]: n["port_errors"] for n in d.evidence["per_node"]} == {
        "n1": 2, "n2": 0, "n3": 2046, "n4": 0}


def test_port_errors_alone_or_on_several_nodes_do_not_make_a_straggler():
    fabric = {"n1": 45.0, "n2": 43.0, "n3": 31.0, "n4": 44.0}
    # Errors, but the link keeps up with its peers: the fabric_link node finding says it.
    assert straggler.detect(job(fabric={**fabric, "n3": 42.0},
                                errors={"n3": {"symbol_error": 900}}), T) is None
    # Under the error threshold (10): a few corrected symbols.
    assert straggler.detect(job(fabric=fabric, errors={"n3": {"symbol_error": 9}}), T) is None
    # Two erroring nodes (a switch, not one node's port): no single node to name.
    two = {"n3": {"symbol_error": 900}, "n2": {"port_rcv_errors": 50}}
    assert straggler.detect(job(fabric=fabric, errors=two), T) is None
    # A quiet network: its traffic ratio means nothing.
    quiet = {"n1": 4.0, "n2": 5.0, "n3": 2.0, "n4": 4.0}
    assert straggler.detect(job(fabric=quiet, errors={"n3": {"symbol_error": 900}}), T) is None
    # Errors on a node whose traffic is also below half its peers': both reasons, the
    # errors (the cause) first.
    d = straggler.detect(job(fabric={**fabric, "n3": 12.0},
                             errors={"n3": {"symbol_error": 900}}), T)
    assert d.evidence["reasons"] == ["errors", "fabric"] and d.evidence["node"] == "n3"
    assert straggler.detect(job(fabric=fabric, errors={"n3": {"symbol_error": 900}}),
                            dataclasses.replace(T, fabric_errors=1000)) is None


def test_the_thresholds_are_the_settings():
    strict = dataclasses.replace(T, straggler_busy_gap_pct=35.0)
    assert straggler.detect(job({"n3": 90.0}), strict) is None
    assert straggler.detect(job({"n3": 90.0}), T) is not None


def test_the_erroring_port_evidence_reads_as_the_counters_and_their_rise():
    from clusterui.web.templatetags.web_format import evidence_items

    errors = {"n3": {"symbol_error": 1800, "port_rcv_errors": 240, "link_error_recovery": 6}}
    d = straggler.detect(job(fabric={"n1": 45.0, "n2": 43.0, "n3": 31.0, "n4": 44.0},
                             errors=errors), T)
    shown = dict(evidence_items(d.evidence))
    assert shown["Its port error counters' rise"] == (
        "link error recovery 6, port rcv errors 240, symbol error 1,800")
    assert shown["Its port errors, total"] == "2,046"
    assert shown["Most port errors on a peer"] == "0"
