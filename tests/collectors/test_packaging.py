"""The collector's install files: the systemd unit (checked by systemd's own systemd-analyze)
and the Kubernetes DaemonSet (checked against Kubernetes' schemas, and against what the
collector reads: every path it is told to read is a mount of that path on the host)."""

import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from collectors.config import Config

PACKAGING = Path(__file__).resolve().parents[2] / "collectors" / "packaging"
UNIT = PACKAGING / "clusterui-collector.service"
DAEMONSET = PACKAGING / "kubernetes" / "daemonset.yaml"
INSTALLED_BINARY = "/opt/clusterui-collector/bin/clusterui-collector"
# `make test` installs it (scripts/devstack.py systemd-analyze).
SYSTEMD_ANALYZE = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"


def unit_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


@pytest.fixture
def unit_here(tmp_path):
    """The unit with ExecStart pointing at an executable that exists on this machine
    (systemd-analyze verify checks that it does)."""
    binary = tmp_path / "clusterui-collector"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(INSTALLED_BINARY, str(binary)))
    return unit


def test_systemd_verifies_the_unit_without_a_warning(unit_here):
    done = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit_here)],
                          capture_output=True, text=True, timeout=60)
    # verify exits 0 on unknown keys and bad values: it only warns. Any warning fails here.
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_systemd_rates_the_unit_well_hardened(unit_here):
    """systemd's own exposure score (0 safest .. 10): the shipped unit rates 2.5; a change
    that loosens it past 3.0 (a dropped Protect*, a capability more) fails."""
    done = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=yes", "--threshold=30",
                           "--no-pager", str(unit_here)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert score and float(score.group(1)) <= 3.0, done.stdout[-500:]


def test_the_unit_runs_the_installed_collector_unprivileged_with_its_spool_and_secrets():
    settings = unit_settings()
    assert settings["ExecStart"] == [f"{INSTALLED_BINARY} --config /etc/clusterui/collector.toml"]
    for key, value in {"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
                       "ProtectHome": "yes", "PrivateTmp": "yes", "DevicePolicy": "closed",
                       "StateDirectory": "clusterui-collector"}.items():
        assert settings[key] == [value], key
    assert "char-nvidia-frontend rw" in settings["DeviceAllow"]
    assert settings["EnvironmentFile"] == ["-/etc/clusterui/collector.env"]
    env = dict(v.split("=", 1) for v in settings["Environment"])
    # The spool is the state directory systemd creates and gives to the service's user.
    assert env["CLUSTERUI_SPOOL_DIR"] == "%S/clusterui-collector"
    assert env["CLUSTERUI_INGEST_KEY_FILE"] == "%d/ingest-key"
    assert settings["LoadCredential"] == ["ingest-key:/etc/clusterui/ingest-key"]
    # Every variable it sets is a setting the collector knows, with a value it accepts.
    Config.load(None, {**{k: v.replace("%S", "/var/lib").replace("%d", "/run/creds")
                          for k, v in env.items()}, "CLUSTERUI_INGEST_KEY_ID": "k"})


def test_the_example_settings_file_loads():
    config = Config.load(str(PACKAGING / "collector.toml"), {})
    assert config.ingest_key_id == "default-1" and config.interval == 10


def daemonset_docs():
    return list(yaml.safe_load_all(DAEMONSET.read_text()))


def test_the_daemonset_is_valid_kubernetes():
    docs = daemonset_docs()
    assert [d["kind"] for d in docs] == ["DaemonSet", "ConfigMap"]
    for doc in docs:
        # strict: an unknown or misspelt field is an error, not silently dropped.
        kubernetes_validate.validate(doc, "1.37.0", strict=True)


def test_the_daemonset_is_checked_for_real():
    bad = daemonset_docs()[0]
    bad["spec"]["template"]["spec"]["hostPid"] = True  # misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.37.0", strict=True)


def test_every_path_the_collector_reads_is_the_hosts(tmp_path):
    daemonset, configmap = daemonset_docs()
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["hostPID"] is True  # NVML's PIDs are the host's; /proc is the host's
    assert container["securityContext"]["privileged"] is True  # the host cgroup namespace
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}

    env = {}
    for item in container["env"]:
        value = item.get("value")
        if value is None:
            value = {"CLUSTERUI_NODE": "gpu-a001", "CLUSTERUI_BROKER_URL":
                     "redis://collector:pw@redis:6379/0"}[item["name"]]
        env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], value)
    settings = {k: v for k, v in env.items() if k.startswith("CLUSTERUI_")}
    config_path = container["args"][container["args"].index("--config") + 1]
    assert mounts[config_path]["subPath"] == Path(config_path).name
    toml = tmp_path / "collector.toml"
    toml.write_text(configmap["data"][Path(config_path).name])
    config = Config.load(str(toml), settings)  # every setting known and accepted

    def host_path_of(path_in_container: str) -> str | None:
        """The host path mounted at (or above) this container path."""
        best = None
        for mount_path, mount in mounts.items():
            if path_in_container == mount_path or path_in_container.startswith(
                    mount_path.rstrip("/") + "/"):
                if best is None or len(mount_path) > len(best[0]):
                    best = (mount_path, mount)
        if best is None:
            return None
        host = volumes[best[1]["name"]].get("hostPath", {}).get("path")
        return host and host + path_in_container[len(best[0]):]

    defaults = Config()
    # What the collector reads on a node by default is what it reads here, from the host.
    for key in ("sysfs_root", "cgroup_root", "job_map_dir", "spool_dir"):
        wanted = getattr(defaults, key) if key != "spool_dir" else "/var/lib/clusterui-collector"
        assert host_path_of(getattr(config, key)) == wanted, key
    for key in ("sysfs_root", "cgroup_root", "job_map_dir"):
        assert mounts_read_only(mounts, getattr(config, key)), key
    assert config.procfs_root == "/proc"  # hostPID: the container's /proc is the host's
    assert config.ingest_key_file == "/etc/clusterui/ingest-keys/gpu-a001"
    assert volumes[mounts["/etc/clusterui/ingest-keys"]["name"]]["secret"]["secretName"] == \
        "clusterui-collector"


def mounts_read_only(mounts, path):
    return any(m.get("readOnly") for p, m in mounts.items()
               if path == p or path.startswith(p.rstrip("/") + "/"))
