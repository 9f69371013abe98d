"""A real OpenID Connect provider for the OIDC sign-in tests, started once per session: the
Django project in tests/accounts/oidc_provider/ (django-oidc-provider), its database seeded,
then served by gunicorn on a free port as a separate process. ``scripts/devstack.py`` needs
to install nothing for it: both packages are in the venv (the server and test extras)."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(workdir: Path) -> tuple[subprocess.Popen, str]:
    """The provider on a free port, seeded; its issuer URL. The caller stops the process."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(DJANGO_SETTINGS_MODULE="tests.accounts.oidc_provider.settings",
               OIDC_OP_DIR=str(workdir), OIDC_OP_URL=issuer, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "tests.accounts.oidc_provider.seed"], cwd=ROOT,
                   env=env, check=True, capture_output=True)
    log = open(workdir / "provider.log", "w")  # noqa: SIM115 (the child holds it)
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2",
         "--access-logfile", "-", "--no-control-socket",
         "tests.accounts.oidc_provider.wsgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        _wait_ready(process, issuer, workdir)
    except BaseException:  # never leave a provider behind (an interrupted session too)
        process.kill()
        process.wait()
        raise
    return process, issuer


def _wait_ready(process: subprocess.Popen, issuer: str, workdir: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"{issuer}/.well-known/openid-configuration", timeout=5)
            return
        except requests.RequestException:  # not listening yet, or still booting
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the OIDC provider did not start: "
                                   + (workdir / "provider.log").read_text()[-2000:]) from None
            time.sleep(0.2)
