"""The simulator's own scenarios, and the negative cases, classified without error at 1 s and
at 10 s sampling: the real collector, ingest and detector pass end to end."""

import pytest
from django.core.management import CommandError, call_command

from clusterui.findings import scenarios
from clusterui.jobs.models import Job
from collectors.sim.scenarios import STRAGGLERS, Scenario


def test_every_simulator_scenario_has_a_case_and_negatives_are_included():
    covered = {c.scenario for c in scenarios.CASES if not c.negative}
    assert covered == set(Scenario)
    negatives = [c.name for c in scenarios.CASES if c.negative]
    assert any("healthy_multinode" in n for n in negatives)
    assert any("grace" in n for n in negatives)
    assert any("moderate" in n for n in negatives)
    # Multi-node jobs with one slow node, and healthy lockstep multi-node negatives.
    stragglers = [c for c in scenarios.CASES if "straggler" in c.expected]
    assert {c.scenario for c in stragglers} == STRAGGLERS
    assert all(c.nodes >= 2 for c in stragglers)
    assert any(c.nodes >= 3 and c.negative for c in scenarios.CASES)


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("interval", [1.0, 10.0])
def test_the_scenarios_are_classified_without_error(interval):
    suite = scenarios.run_suite(interval)
    print(scenarios.report([suite]))  # the confusion matrix, shown with -s
    assert len(suite.results) == len(scenarios.CASES)
    wrong = [(r.case.name, sorted(r.case.expected), sorted(r.raised)) for r in suite.wrong()]
    assert wrong == []
    matrix = scenarios.confusion(suite.results)
    assert all(c.fp == 0 and c.fn == 0 for c in matrix.values())
    # Every kind is exercised (but the node-health kinds, whose faults are tested apart).
    assert all(c.tp > 0 for k, c in matrix.items() if k not in scenarios.NODE_HEALTH_KINDS)
    assert set(scenarios.NODE_HEALTH_KINDS) < set(matrix)
    # Each straggler finding names the node the scenario slowed down, and only those cases
    # raise one.
    named = {r.case.name: (r.straggler_node, r.named_node) for r in suite.results
             if "straggler" in r.raised}
    assert set(named) == {c.name for c in scenarios.CASES if "straggler" in c.expected}
    for case, (slow, node) in named.items():
        assert slow is not None and node == slow, case
    # The erroring port's node also raises the fabric_link node finding, and no other node
    # of the suite raises a node finding.
    [erroring] = [r for r in suite.results if r.case.scenario == Scenario.STRAGGLER_ERRORING_PORT]
    assert erroring.node_raised == {erroring.straggler_node: {"fabric_link"}}
    assert [r.case.name for r in suite.results if r.node_raised] == [erroring.case.name]


def test_the_report_prints_precision_and_recall_per_kind():
    case = scenarios.CASES[0]
    suite = scenarios.SuiteResult(interval=10.0, results=[
        scenarios.CaseResult(case, 10.0, "j1", {"low_utilization"}),
        scenarios.CaseResult(scenarios.CASES[2], 10.0, "j2", {"low_utilization"}),
    ])
    text = scenarios.report([suite])
    assert "low_utilization    1   1   0   0       0.50    1.00" in text
    assert "WRONG  10 s  healthy" in text and "1 of 2 cases classified correctly." in text


@pytest.mark.slow
@pytest.mark.django_db
def test_scenario_report_command_prints_the_matrix_and_leaves_nothing(capsys):
    call_command("scenario_report", "--interval", "10", "--fail")
    out = capsys.readouterr().out
    assert "Confusion matrix per kind, 10 s sampling" in out
    assert "precision  recall" in out and "comm_bound" in out
    assert f"{len(scenarios.CASES)} of {len(scenarios.CASES)} cases classified correctly." in out
    assert not Job.objects.filter(cluster__name__startswith="scenarios-").exists()


def test_scenario_report_refuses_an_interval_out_of_range():
    with pytest.raises(CommandError, match="between 1 and 60 s, got 0.5"):
        call_command("scenario_report", "--interval", "0.5")


@pytest.mark.slow
@pytest.mark.django_db
def test_the_erroring_port_straggler_is_named_by_its_port_counters_from_sysfs():
    from clusterui.findings.models import Finding

    [case] = [c for c in scenarios.CASES if c.scenario == Scenario.STRAGGLER_ERRORING_PORT]
    [result] = scenarios.run_suite(10.0, cases=(case,)).results
    assert result.correct
    finding = Finding.objects.get(kind="straggler", job__external_id=result.job_id)
    evidence = finding.evidence
    assert finding.node.name == evidence["node"] == result.straggler_node
    # Named by its errors (its traffic is above the slow-link ratio), with the counters the
    # collector read from the simulated sysfs files and their rise over the window.
    assert evidence["reasons"] == ["errors"]
    assert set(evidence["node_port_errors"]) == {"symbol_error", "port_rcv_errors",
                                                 "link_error_recovery"}
    assert evidence["node_port_errors"]["symbol_error"] > 10 * evidence[
        "node_port_errors"]["port_rcv_errors"] * 0.9
    assert evidence["peers_port_errors_max"] == 0
    assert 0.5 < evidence["node_fabric_pct"] / evidence["peers_fabric_pct"] < 0.85
    assert evidence["lost_gpu_hours"] > 0
    assert "erroring fabric port" in finding.title and "drain" in finding.suggestion
