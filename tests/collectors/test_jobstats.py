"""``clusterui jobstats JOBID`` as a user on a login node runs it: the collector wheel
installed alone (``--no-deps``: the command needs the standard library only) into a fresh
virtual environment, its ``clusterui`` console script run as a subprocess against a live
server (real PostgreSQL) whose job was stored through the real ingest path and judged by
the real detector pass.

The job (``4242`` on cluster ``hand``, alice's): two nodes of two GPUs, 60 samples 10 s
apart after a 10-minute start. ``h101``'s GPUs at 70 % SM activity (90 % NVML), ``h102``'s
GPU 0 the same and its GPU 1 idle. By hand: node efficiencies 70 % and 35 %, the job's
52.5 %. Another job ``4242`` lives on cluster ``east``."""

import datetime as dt
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from clusterui.api.tokens import create_token
from clusterui.findings.runner import run_pass
from clusterui.ingest.tasks import ingest_envelope
from tests.findings.batches import Job, Node, Sample, node_batch

_DIST = Path(__file__).resolve().parents[2] / "scripts" / "dist.py"
_spec = importlib.util.spec_from_file_location("clusterui_dist", _DIST)
dist = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dist)

OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "jobstats"
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]

N = 60
T0 = (time.time() // 60 - 60) * 60
TIMES = [T0 + 10 * (k + 1) for k in range(N)]
BUSY = dict(util=90.0, sm=70.0)


def _gpu(busy: bool) -> list[Sample]:
    return [Sample(mem=2000 + 100 * k, energy=1000.0 + 3000.0 * k, **BUSY) if busy
            else Sample(util=0.0, sm=0.0, mem=500, energy=1000.0 + 500.0 * k)
            for k in range(N)]


def _store():
    job = Job("4242", gpus=[0, 1], started_at=T0 - 600)
    for seq, (name, busy) in enumerate((("h101", (True, True)), ("h102", (True, False))), 1):
        batch = node_batch(Node(name), seq=seq, times=TIMES, jobs=[job],
                           gpu={i: _gpu(b) for i, b in enumerate(busy)},
                           owner={0: "4242", 1: "4242"}, cores={"4242": [6.0] * N})
        assert ingest_envelope(batch).rejected == 0
    east = node_batch(Node("e001", gpus=1), seq=1, times=TIMES, cluster="east",
                      jobs=[Job("4242", gpus=[0], started_at=T0 - 600)],
                      gpu={0: _gpu(True)}, owner={0: "4242"})
    assert ingest_envelope(east).rejected == 0
    run_pass(now=dt.datetime.fromtimestamp(TIMES[-1] + 30, dt.UTC))


@pytest.fixture(scope="module")
def login_node(tmp_path_factory):
    """A venv holding only the collector wheel, without its dependencies."""
    out = tmp_path_factory.mktemp("dist")
    (wheel,) = dist.build(["collector"], out)
    venv = tmp_path_factory.mktemp("login") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check",
                    "--python", str(venv / "bin" / "python"), "install", "--no-deps",
                    "--quiet", str(wheel)], check=True, timeout=180, env=_node_env())
    return venv


def _node_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CLUSTERUI_", "PYTHON", "DJANGO", "VIRTUAL_ENV"))}


@pytest.fixture
def server(live_server, clean_samples):
    _store()
    alice = get_user_model().objects.create_user("alice", "alice@example.org", "pw")
    _, key = create_token(alice, "login node")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return live_server.url, key, api


def jobstats(venv, tmp_path, *args, url=None, token=None, token_file=None):
    env = _node_env()
    env["HOME"] = str(tmp_path)  # no ~/.config/clusterui/token unless a test writes one
    env["PYTHONIOENCODING"] = "utf-8"
    if url:
        env["CLUSTERUI_URL"] = url
    if token:
        env["CLUSTERUI_TOKEN"] = token
    extra = ["--token-file", str(token_file)] if token_file else []
    return subprocess.run([str(venv / "bin" / "clusterui"), *extra, "jobstats", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def _detail(api, cluster="hand"):
    rows = api.get("/api/v1/jobs/", {"external_id": "4242", "cluster": cluster}).json()
    (row,) = rows["results"]
    return api.get(f"/api/v1/jobs/{row['id']}/").json()


def test_the_report_prints_the_apis_figures(login_node, server, tmp_path):
    url, key, api = server
    token_file = tmp_path / "token"
    token_file.write_text(key + "\n")
    done = jobstats(login_node, tmp_path, "4242", "--cluster", "hand", url=url,
                    token_file=token_file)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "jobstats.txt").write_text(out)  # the README shows it
    job = _detail(api)
    eff = job["efficiency"]

    assert "Job ID: 4242" in out and "Cluster: hand (slurm)" in out
    assert "User/Account: alice/nlp" in out and "GPUs: 4" in out and "Nodes: 2" in out
    # The job's figures, as the API gives them, and by hand.
    assert eff["efficiency_pct"] == pytest.approx(52.5)
    assert f"{eff['efficiency_pct']:.1f}%" in out
    assert (f"GPU-hours: {eff['gpu_hours_allocated']:.2f} allocated, "
            f"{eff['gpu_hours_used']:.2f} used, {eff['gpu_hours_wasted']:.2f} wasted") in out
    assert eff["mem_peak_mib"] == 2000 + 100 * (N - 1)
    assert f"GPU memory high-water: {eff['mem_peak_mib']:,.0f} MiB of 81,920 MiB" in out
    assert f"GPU energy: {eff['energy_j'] / 3.6e6:.3f} kWh" in out
    assert "Used time weighted by: SM activity (GPM)" in out
    # Samples from T0 only, ten minutes after the job's start: half of its run measured.
    assert eff["measured_pct"] == pytest.approx(50.0)
    assert f"Measured from: {eff['measured_from']} (50 % of the run; the rest" in out
    # Per node: the API's per_node, and by hand.
    nodes = {n["node"]: n for n in eff["per_node"]}
    assert (nodes["h101"]["efficiency_pct"], nodes["h102"]["efficiency_pct"]) == (
        pytest.approx(70.0), pytest.approx(35.0))
    for name, n in nodes.items():
        assert (f"{name}: 2 GPUs, efficiency {n['efficiency_pct']:.1f}%, NVML utilization "
                f"{n['nvml_util_mean_pct']:.1f}%, memory high-water {n['mem_peak_mib']:,.0f} "
                f"MiB") in out
    # Per GPU: SM activity, NVML utilization and a sparkline of each.
    for gpu in job["gpus"]:
        figures = eff["per_gpu"][gpu["uuid"]]
        assert f"GPU {gpu['index']} ({gpu['uuid']}, {gpu['model']}):" in out
        assert (f"SM activity (GPM) {figures['mean']:.1f}% (p10 {figures['p10']:.1f}%, "
                f"p90 {figures['p90']:.1f}%), NVML utilization {figures['nvml_mean']:.1f}%"
                ) in out
    lines = out.splitlines()
    util = [ln.split("|")[1] for ln in lines if "NVML util |" in ln]
    sm = [ln.split("|")[1] for ln in lines if "SM active |" in ln]
    assert len(util) == len(sm) == 4
    # h101/gpu0, h101/gpu1, h102/gpu0 at 90 % NVML, the top step; h102/gpu1 idle, the
    # bottom one; the job's first 10 minutes, before any sample, blank.
    assert [set(s.strip()) for s in util] == [{"█"}, {"█"}, {"█"}, {"▁"}]
    assert [set(s.strip()) for s in sm] == [{"▆"}, {"▆"}, {"▆"}, {"▁"}]  # 70 %: 5.6 -> 6th
    assert util[0].startswith(" ") and len(util[0]) <= 60
    # Findings, with what to do.
    assert job["findings"], "the idle GPU beside three busy ones is a finding"
    for f in job["findings"]:
        assert f"[{f['severity'].upper()}] {f['title']}" in out
        assert f"What to do: {f['suggestion']}" in out


def test_json_output_is_the_apis_job_detail(login_node, server, tmp_path):
    url, key, api = server
    done = jobstats(login_node, tmp_path, "4242", "--cluster", "hand", "--json", url=url,
                    token=key)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["job"] == _detail(api)
    gpus = {s["id"] for s in report["metrics"]["series"] if s["source"] == "gpu"}
    assert gpus == {g["id"] for g in report["job"]["gpus"]}


def test_exit_codes(login_node, server, tmp_path):
    url, key, _ = server
    ambiguous = jobstats(login_node, tmp_path, "4242", url=url, token=key)
    assert ambiguous.returncode == 2
    assert "east (slurm), hand (slurm)" in ambiguous.stderr and "--cluster" in ambiguous.stderr
    east = jobstats(login_node, tmp_path, "4242", "--cluster", "east", url=url, token=key)
    assert east.returncode == 0 and "Cluster: east (slurm)" in east.stdout

    unknown = jobstats(login_node, tmp_path, "999999", url=url, token=key)
    assert unknown.returncode == 3 and "no job '999999'" in unknown.stderr
    bad_token = jobstats(login_node, tmp_path, "4242", url=url, token="cui_not-a-token")
    assert bad_token.returncode == 5 and "refused the token (401" in bad_token.stderr

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = jobstats(login_node, tmp_path, "4242", url=f"http://127.0.0.1:{port}", token=key)
    assert gone.returncode == 4 and "server unreachable" in gone.stderr

    no_token = jobstats(login_node, tmp_path, "4242", url=url)
    assert no_token.returncode == 2 and ".config/clusterui/token" in no_token.stderr
    (tmp_path / ".config" / "clusterui").mkdir(parents=True)
    (tmp_path / ".config" / "clusterui" / "token").write_text(key)
    default_file = jobstats(login_node, tmp_path, "4242", "--cluster", "hand", url=url)
    assert default_file.returncode == 0, default_file.stderr
    no_url = jobstats(login_node, tmp_path, "4242", token=key)
    assert no_url.returncode == 2 and "CLUSTERUI_URL" in no_url.stderr
