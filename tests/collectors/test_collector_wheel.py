"""The collector as a GPU node gets it: its wheel, built as `make dist` builds it, installed
alone into a fresh virtual environment (dependencies from the package index pip is set up
with). Nothing of the server comes with it, it prints a batch, and what it sends, with no
Celery installed, is stored by the server's real bulk consumer in PostgreSQL."""

import importlib.util
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from clusterui.ingest.consumer import Consumer
from clusterui.ingest.models import IngestBatch
from clusterui.ingest.queue import ReliableQueue
from collectors import __version__

_DIST = Path(__file__).resolve().parents[2] / "scripts" / "dist.py"
_spec = importlib.util.spec_from_file_location("clusterui_dist", _DIST)
dist = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dist)

pytestmark = pytest.mark.slow

# What the collector wheel may bring, besides the installers a fresh venv starts with.
CLOSURE = {"clusterui-collector", "nvidia-ml-py", "redis"}
VENV_TOOLS = {"pip", "setuptools"}
SERVER_ONLY = {"django", "celery", "kombu", "hiredis", "psycopg", "clusterui",
               "clusterui-collector-sim", "djangorestframework", "orjson", "numpy"}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    return {w.name.split("-")[0]: w for w in dist.build(["collector", "sim"], out)}


def fresh_venv_with_the_collector(wheels, directory):
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip(venv, "install", str(wheels["clusterui_collector"]))
    return venv


@pytest.fixture(scope="module")
def node(wheels, tmp_path_factory):
    """(venv directory, wheels) with only the collector wheel installed."""
    return fresh_venv_with_the_collector(wheels, tmp_path_factory.mktemp("node")), wheels


def node_env() -> dict[str, str]:
    """Only what the node would have: no PYTHONPATH into this checkout, no settings of ours."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CLUSTERUI_", "PYTHON", "DJANGO", "VIRTUAL_ENV"))}


def pip(venv, *args):
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip",
                           "--disable-pip-version-check", *args],
                          env=node_env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def installed(venv) -> dict[str, str]:
    listing = json.loads(pip(venv, "list", "--format=json"))
    return {p["name"].lower().replace("_", "-"): p["version"] for p in listing}


def collector(venv, tmp_path, *args, **settings):
    env = node_env()
    env.update({f"CLUSTERUI_{k.upper()}": str(v) for k, v in settings.items()})
    env.setdefault("CLUSTERUI_SPOOL_DIR", str(tmp_path / "spool"))
    return subprocess.run([str(venv / "bin" / "clusterui-collector"), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)


def test_the_wheel_brings_only_what_a_node_needs(node):
    venv, _ = node
    packages = installed(venv)
    assert set(packages) - VENV_TOOLS == CLOSURE
    assert not set(packages) & SERVER_ONLY
    assert packages["clusterui-collector"] == __version__
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import collectors, importlib.util as u; print(collectors.__file__); "
                            "print(u.find_spec('collectors.sim'), u.find_spec('celery'))"],
                           cwd="/", env=node_env(), capture_output=True, text=True,
                           timeout=30)
    module, absent = where.stdout.splitlines()
    assert module.startswith(str(venv))
    assert absent == "None None"  # no simulator, no Celery
    # The user's command (clusterui jobstats, tests/collectors/test_jobstats.py) comes along.
    helped = subprocess.run([str(venv / "bin" / "clusterui"), "jobstats", "--help"],
                            cwd="/", env=node_env(), capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "JOBID" in helped.stdout, helped.stderr


def test_kubernetes_attribution_without_its_extra_says_what_to_install(node, tmp_path):
    """The wheel carries the pod-resources messages (collectors/attribution/podresources.py,
    no proto or generated stubs); without the kubernetes extra (grpcio, protobuf) a node
    told to read the kubelet still sends its batch, and says why pods are attributed by
    cgroups only."""
    venv, _ = node
    shipped = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import importlib.resources as r; p = r.files('collectors.attribution'); "
         "print(sorted(f.name for f in p.iterdir() if f.name.startswith('podresources')))"],
        cwd="/", env=node_env(), capture_output=True, text=True, timeout=30)
    assert shipped.stdout.strip() == "['podresources.py']", shipped.stderr
    done = collector(venv, tmp_path, "--once", "--stdout", nvml="none",
                     kubelet_socket=str(tmp_path / "kubelet.sock"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == 1
    assert "kubelet_socket is set but Kubernetes attribution cannot run" in done.stderr
    assert "pip install 'clusterui-collector[kubernetes]'" in done.stderr


def test_once_stdout_prints_a_batch(node, tmp_path):
    venv, _ = node
    done = collector(venv, tmp_path, "--once", "--stdout", "--config", "/dev/null")
    assert done.returncode == 0, done.stderr
    batch = json.loads(done.stdout)
    assert batch["schema"] == 1 and batch["agent"]["version"] == __version__
    assert batch["agent"]["simulated"] is False
    assert batch["gpu_samples"]["fields"][:3] == ["ts", "gpu", "job"]
    physical = [n for n in os.listdir("/sys/class/net")
                if os.path.exists(f"/sys/class/net/{n}/device")]
    assert {n["name"] for n in batch["nics"]} >= set(physical)
    if "NVML not available" in done.stderr:  # no GPU here: said once, and no GPU rows
        assert batch["gpus"] == [] and batch["gpu_samples"]["rows"] == []
    else:  # a GPU node: every GPU sampled at both ticks
        assert batch["gpus"] and len(batch["gpu_samples"]["rows"]) == 2 * len(batch["gpus"])
    assert not (tmp_path / "spool").exists()  # --stdout never touches the spool


@pytest.mark.django_db(transaction=True)
def test_the_simulator_extra_and_a_batch_the_server_stores(wheels, tmp_path, broker,
                                                           broker_url, clean_samples):
    venv = fresh_venv_with_the_collector(wheels, tmp_path)
    without = collector(venv, tmp_path, "--once", "--stdout", nvml="sim")
    assert without.returncode == 2
    assert "nvml: 'sim' needs the simulator" in without.stderr and "[sim]" in without.stderr

    pip(venv, "install", f"{wheels['clusterui_collector']}[sim]",
        str(wheels["clusterui_collector_sim"]))
    assert set(installed(venv)) - VENV_TOOLS == CLOSURE | {"clusterui-collector-sim"}
    shown = collector(venv, tmp_path, "--once", "--stdout", nvml="sim", node="gpu-w001")
    assert shown.returncode == 0, shown.stderr
    batch = json.loads(shown.stdout)
    assert batch["agent"]["simulated"] is True
    assert len(batch["gpus"]) == 8 and len(batch["gpu_samples"]["rows"]) == 16

    queue = f"wheel-{uuid.uuid4().hex[:8]}"
    sent = collector(venv, tmp_path, "--once", nvml="sim", node="gpu-w001", cluster="wheel",
                     broker_url=broker_url, queue=queue)
    assert sent.returncode == 0, sent.stderr
    assert broker.llen(queue) == 1  # queued, not spooled
    consumer = Consumer(queue=ReliableQueue(broker, queue, ttl_s=60))
    result = consumer.flush(consumer.queue.take(10, block_s=0))
    consumer.queue.ack()
    assert (result.stored, result.refused, result.dead_lettered) == (1, 0, 0)
    stored = IngestBatch.objects.get(node__name="gpu-w001")
    assert stored.gpu_samples == 16
