"""docker-compose.yml against the Compose specification's JSON schema (the copy
check-jsonschema vendors as ``vendor.compose-spec``, from compose-spec/compose-spec), and
the promises a reader of the file relies on."""

import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tests.deploy.compose import Compose
from tests.services import ROOT

CHECK = str(Path(sys.executable).parent / "check-jsonschema")
APP_SERVICES = ("web", "ingest", "worker", "beat")


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHECK, "--builtin-schema", "vendor.compose-spec", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_the_compose_file_is_valid_against_the_compose_specification(tmp_path):
    ok = validate(ROOT / "docker-compose.yml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The check can fail: a misspelt key is refused.
    broken = tmp_path / "docker-compose.yml"
    shutil.copy(ROOT / "docker-compose.yml", broken)
    broken.write_text(broken.read_text().replace("healthcheck:", "healtcheck:", 1))
    bad = validate(broken)
    assert bad.returncode != 0 and "healtcheck" in bad.stdout + bad.stderr


def test_every_long_running_service_has_its_own_health_check():
    compose = Compose()
    for name in (*APP_SERVICES, "postgres", "redis", "proxy"):
        assert compose.service(name).get("healthcheck", {}).get("test"), name
    for name in APP_SERVICES:
        assert compose.service(name)["healthcheck"]["test"][1:5] == ["python",
            "-m", "clusterui.healthcheck", name], name


def test_no_secret_is_written_into_the_environment_or_a_url():
    compose = Compose()
    for name in compose.doc["services"]:
        env = compose.service_env(name)
        for key, value in env.items():
            if any(word in key for word in ("PASSWORD", "SECRET", "KEY")) \
                    and not key.endswith(("_FILE", "_ID")):
                raise AssertionError(f"{name}: {key} is in the environment, not a secret file")
            if "://" in value:
                assert urlsplit(value).password is None, (name, key, value)


def test_only_the_proxy_is_trusted_for_client_addresses():
    compose = Compose()
    proxy_ip = compose.service("proxy")["networks"]["clusterui"]["ipv4_address"]
    for name in APP_SERVICES:
        assert compose.service_env(name)["LOGIN_TRUSTED_PROXIES"] == f"{proxy_ip}/32"
    assert "ports" not in compose.service("web")  # reached through the proxy only
