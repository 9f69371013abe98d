"""ClusterSim end to end through the real agents, and the clusterui-simcluster command."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from collectors.sim.cluster import ClusterSim
from collectors.sim.scenarios import Scenario

T0 = 1_763_800_000.0


def _run(tmp_path, name, seed=1, nodes=2, steps=4, interval=10):
    sim = ClusterSim(nodes=nodes, seed=seed, start=T0, root_dir=str(tmp_path / name),
                     interval=interval)  # fmt: skip
    try:
        for k in range(steps):
            sim.step(T0 + k * interval)
        return sim, sim.flush()
    finally:
        sim.close()


def test_two_nodes_make_contract1_batches(tmp_path):
    sim, batches = _run(tmp_path, "a")
    assert [b["node"] for b in batches] == ["gpu-a001", "gpu-a002"]
    for batch in batches:
        assert batch["schema"] == 1 and batch["cluster"] == "demo"
        assert batch["agent"]["simulated"] is True
        assert len(batch["gpus"]) == 8
        assert {n["kind"] for n in batch["nics"]} == {"infiniband", "ethernet"}
        fields = batch["gpu_samples"]["fields"]
        last = [r for r in batch["gpu_samples"]["rows"] if r[0] == T0 + 30]
        assert len(last) == 8
        for row in last:  # an H100 node: every metric answers
            assert all(v is not None for f, v in zip(fields, row, strict=True) if f != "job")
        assert batch["jobs"], "job attribution"
        for job in batch["jobs"]:
            truth = next(j for j in sim.jobs if j.id == job["id"])
            assert job["user"] == truth.user and job["account"] == truth.account
            assert job["gpus"] == sorted(dict(truth.gpus)[batch["node"]])
        owners = {r[2] for r in last}
        assert owners - {None} == {j["id"] for j in batch["jobs"]}


def test_same_seed_same_batches(tmp_path):
    _, first = _run(tmp_path, "a", seed=3)
    _, second = _run(tmp_path, "b", seed=3)
    _, other = _run(tmp_path, "c", seed=4)

    def strip(batches):
        out = []
        for b in batches:
            b = dict(b, agent={k: v for k, v in b["agent"].items() if k != "boot_id"})
            out.append(json.dumps(b, sort_keys=True))
        return out

    assert strip(first) == strip(second)
    assert strip(first) != strip(other)


def test_demo_cluster_starts_with_every_scenario(tmp_path):
    sim = ClusterSim(nodes=16, seed=1, start=T0, root_dir=str(tmp_path))
    try:
        running = sim.running_jobs(T0)
        assert {j.scenario for j in running} == set(Scenario)
        busy = sum(len(n.busy_gpus(T0)) for n in sim.nodes)
        assert 0.75 * 128 <= busy < 128  # mostly busy, some GPUs free
        assert {len(j.nodes) for j in running} >= {1, 2}
        assert {j.gpus_per_node for j in running} >= {1, 2, 4, 8}
        assert len({j.user for j in running}) >= 4
        assert {n.layout for n in sim.nodes} == {"slurm-v2", "slurm-v1", "k8s"}
        assert any(j.scheduler == "kubernetes" for j in running)
        # jobs keep arriving and ending
        sim.step(T0)
        sim.step(T0 + 4 * 3600)
        assert len(sim.jobs) > len(running)
        assert any(j.end <= T0 + 4 * 3600 for j in sim.jobs)
    finally:
        sim.close()


def test_command_backfills_and_prints_batches(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "collectors.sim.cluster", "--nodes", "2", "--backfill", "60",
         "--duration", "1", "--interval", "10", "--flush", "30", "--stdout",
         "--root", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    batches = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(batches) >= 4 and {b["node"] for b in batches} == {"gpu-a001", "gpu-a002"}
    assert all(b["agent"]["simulated"] for b in batches)
    assert "SIMULATED" in done.stderr
    assert len(done.stderr.splitlines()) <= 3


def test_mig_nodes_run_their_jobs_on_mig_instances(tmp_path):
    sim = ClusterSim(nodes=2, seed=1, start=T0, root_dir=str(tmp_path / "mig"), interval=10,
                     a100_nodes=0, k8s_nodes=0, mig_nodes=1)  # fmt: skip
    try:
        for k in range(4):
            sim.step(T0 + k * 10)
        mig, plain = sim.flush()
    finally:
        sim.close()
    instances = [g for g in mig["gpus"] if "parent_uuid" in g]
    assert len(instances) == 8 and {g["mig_profile"] for g in instances} == {"1g.10gb"}
    assert len(mig["gpus"]) == 8 + 2  # two MIG-enabled H100s: 7 instances and 1
    on_instances = {g for j in mig["jobs"] for g in j["gpus"]}
    assert on_instances and all("parent_uuid" in mig["gpus"][g] for g in on_instances)
    assert not any("parent_uuid" in g for g in plain["gpus"]) and len(plain["gpus"]) == 8


def test_kubernetes_nodes_send_namespace_pod_and_owner(tmp_path):
    """The simulated kubelet (sim/kubelet.py) names each pod's namespace, owner, start and
    user (its label, as a site with kubelet_user_label set reads it); the batch says
    simulated, as every simulated node's does."""
    sim = ClusterSim(nodes=16, seed=1, start=T0, root_dir=str(tmp_path))
    try:
        sim.step(T0)
        batches = {b["node"]: b for b in sim.flush()}
        truth = {j.id: j for j in sim.running_jobs(T0) if j.scheduler == "kubernetes"}
    finally:
        sim.close()
    k8s_nodes = {n.name for n in sim.nodes if n.layout == "k8s"}
    sent = [j for name in k8s_nodes for j in batches[name]["jobs"]]
    assert sent and {j["id"] for j in sent} == set(truth)
    for job in sent:
        expected = truth[job["id"]]
        assert job["scheduler"] == "kubernetes" and job["namespace"] == expected.account
        assert job["owner_name"] == expected.name and job["pod"].startswith(expected.name + "-")
        assert job["owner_kind"] == ("StatefulSet" if expected.scenario is Scenario.IDLE
                                     else "Job")
        assert job["started_at"] == expected.start  # the pod's status.startTime
        assert job["user"] == expected.user
    assert all(batches[name]["agent"]["simulated"] for name in k8s_nodes)
    slurm = [j for b in batches.values() if b["node"] not in k8s_nodes for j in b["jobs"]]
    assert slurm and not any("namespace" in j for j in slurm)


def _job_ids(sim) -> tuple[set[str], set[str]]:
    slurm = {j.id for j in sim.jobs if j.scheduler == "slurm"}
    return slurm, {j.id for j in sim.jobs if j.scheduler == "kubernetes"}


def test_a_run_given_a_first_job_id_names_no_job_as_an_earlier_run_did(tmp_path):
    """A restarted demo continues the stored history: its jobs must not take the earlier
    run's ids (one job would then have "started" twice, on two timelines)."""
    first = ClusterSim(nodes=16, seed=1, start=T0, root_dir=str(tmp_path / "a"))
    again = ClusterSim(nodes=16, seed=1, start=T0 + 3600, root_dir=str(tmp_path / "b"))
    later = ClusterSim(nodes=16, seed=1, start=T0 + 3600, root_dir=str(tmp_path / "c"),
                       first_job_id=900_000)
    for sim in (first, again, later):
        sim.close()
    (slurm1, pods1), (slurm2, pods2), (slurm3, pods3) = map(_job_ids, (first, again, later))
    assert slurm1 == slurm2 and pods1 == pods2  # the same seed alone: the same names
    assert slurm3 and min(map(int, slurm3)) == 900_000
    assert sorted(map(int, slurm3)) == list(range(900_000, 900_000 + len(slurm3)))
    assert pods3 and not pods3 & pods1
    # ... nor looks like one where pages shorten a UUID (its first characters, a pod's name)
    assert not {p[:8] for p in pods3} & {p[:8] for p in pods1}
    assert [j.scenario for j in later.jobs] == [j.scenario for j in again.jobs]


def test_command_after_back_fills_only_past_the_stored_history(tmp_path):
    import time

    after = time.time() - 35
    done = subprocess.run(
        [sys.executable, "-m", "collectors.sim.cluster", "--nodes", "2", "--backfill", "600",
         "--after", repr(after), "--first-job-id", "5000", "--duration", "1",
         "--interval", "10", "--flush", "10", "--stdout", "--root", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    batches = [json.loads(line) for line in done.stdout.splitlines()]
    times = [row[0] for b in batches for row in b["gpu_samples"]["rows"]]
    assert times and min(times) > after and min(times) <= after + 10
    jobs = {j["id"]: j for b in batches for j in b["jobs"]}
    assert jobs and all(int(i) >= 5000 for i in jobs)
    # The earlier run's jobs held the GPUs until then: none of these began before.
    assert all(j["started_at"] > after for j in jobs.values())
    backfilled = int(re.search(r"backfilling (\d+) s", done.stderr).group(1))
    assert backfilled <= 40  # the ~35 s since the stored history, not the 600 asked


def _simcluster(tmp_path, *extra):
    done = subprocess.run(
        # One-second ticks: the second run's first one comes within its two seconds.
        [sys.executable, "-m", "collectors.sim.cluster", "--nodes", "2", "--duration", "2",
         "--interval", "1", "--flush", "1", "--stdout", "--root", str(tmp_path / "trees"),
         *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    batches = [json.loads(line) for line in done.stdout.splitlines()]
    return done, batches


def test_a_restart_with_its_state_file_continues_its_own_history(tmp_path):
    """The Compose demo's simulator has no database to ask where the stored history ends: it
    keeps its own progress, and a restart (a crash, a reboot) goes on from there instead of
    back-filling over what it sent and naming its jobs again."""
    state = tmp_path / "state.json"
    done, first = _simcluster(tmp_path, "--backfill", "60", "--state-file", str(state))
    assert done.returncode == 0, done.stderr
    kept = json.loads(state.read_text())
    sent = [row[0] for b in first for row in b["gpu_samples"]["rows"]]
    ids = [int(j["id"]) for b in first for j in b["jobs"] if j["id"].isdigit()]
    assert kept["after"] == max(sent) and kept["next_job_id"] > max(ids)

    done, again = _simcluster(tmp_path, "--backfill", "60", "--state-file", str(state))
    assert done.returncode == 0, done.stderr
    resent = [row[0] for b in again for row in b["gpu_samples"]["rows"]]
    assert resent and min(resent) > max(sent)  # nothing written over
    new_ids = {int(j["id"]) for b in again for j in b["jobs"] if j["id"].isdigit()}
    assert new_ids and min(new_ids) >= kept["next_job_id"]  # no id twice
    assert json.loads(state.read_text())["after"] == max(resent)


def test_a_state_file_it_did_not_write_stops_it_with_the_reason(tmp_path):
    state = tmp_path / "state.json"
    state.write_text('{"after": "yesterday"}')
    done, batches = _simcluster(tmp_path, "--state-file", str(state))
    assert done.returncode == 2 and batches == []
    assert f"--state-file {state}: not a state clusterui-simcluster wrote" in done.stderr
    assert "remove it to start afresh" in done.stderr


def test_a_run_that_made_no_sample_leaves_its_state_as_it_was(tmp_path):
    # Stopped before its first tick came: it must not claim a sample it never sent (the
    # next start would leave a gap there).
    import time

    state = tmp_path / "state.json"
    ahead = {"version": 1, "after": time.time() + 30, "next_job_id": 900}
    state.write_text(json.dumps(ahead))
    done, batches = _simcluster(tmp_path, "--state-file", str(state))
    assert done.returncode == 0, done.stderr
    assert [r for b in batches for r in b["gpu_samples"]["rows"]] == []
    assert json.loads(state.read_text()) == ahead
