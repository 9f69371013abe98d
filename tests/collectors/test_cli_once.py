import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERUI_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "collectors.cli", *args],
        cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_once_stdout_on_this_machine():
    done = run_cli("--once", "--stdout", "--config", "/dev/null",
                   env={"CLUSTERUI_SPOOL_DIR": "/proc/not-creatable"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    batch = json.loads(done.stdout)
    assert batch["schema"] == 1
    assert batch["agent"]["seq"] == 1
    assert batch["nic_samples"]["fields"][:4] == ["ts", "nic", "rx_bytes_per_s", "tx_bytes_per_s"]
    physical = [n for n in os.listdir("/sys/class/net")
                if os.path.exists(f"/sys/class/net/{n}/device")]  # fmt: skip
    if physical:  # this machine has a physical (or virtio) NIC: it must be sampled
        assert batch["nic_samples"]["rows"]
        assert {n["name"] for n in batch["nics"]} >= set(physical)
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        has_nvml = True
    except Exception:
        has_nvml = False
    if not has_nvml:
        assert batch["gpus"] == []
        assert "NVML not available" in done.stderr


def test_bad_config_exits_2_naming_the_key():
    done = run_cli("--once", "--stdout", env={"CLUSTERUI_INTERVAL": "abc"})
    assert done.returncode == 2
    assert "interval" in done.stderr and "abc" in done.stderr
    assert done.stdout == ""


def test_uncreatable_spool_dir_is_named(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    done = run_cli("--once", env={"CLUSTERUI_SPOOL_DIR": str(blocker / "spool"),
                                  "CLUSTERUI_NVML": "none"})  # fmt: skip
    assert done.returncode == 2
    assert "spool_dir" in done.stderr


def test_sigterm_makes_a_final_flush_and_exits_0(tmp_path):
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERUI_")}
    env.update({"CLUSTERUI_NVML": "none", "CLUSTERUI_INTERVAL": "1", "CLUSTERUI_FLUSH": "60",
                "CLUSTERUI_SPOOL_DIR": str(tmp_path / "spool"),
                "CLUSTERUI_BROKER_URL": "redis://127.0.0.1:1/0"})  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "collectors.cli"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    time.sleep(2.5)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    spooled = [n for n in os.listdir(tmp_path / "spool") if n.endswith(".json")]
    assert len(spooled) == 1  # the final flush could not be sent, so it waits in the spool
    with open(tmp_path / "spool" / spooled[0]) as fh:
        assert json.load(fh)["nic_samples"]["fields"][0] == "ts"
