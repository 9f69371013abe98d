"""The production stack as docker-compose.yml runs it, on this machine without Docker.

Each service's own command runs with the environment Compose would give it (read from
docker-compose.yml and .env.example by ``tests.deploy.compose``, the secrets written by
deploy/make-secrets.sh, the hosts postgres and redis mapped to services here): Redis started
by the shipped deploy/redis/start-redis.sh with its two users, migrate, the web service's
image command (gunicorn, production settings: DEBUG off, HTTPS redirect and secure cookies
on), Debian's caddy with deploy/Caddyfile in front (its own CA: "tls internal"), the bulk
ingest consumer, the Celery worker and beat. Then, as a site would: create the admin with
``manage.py createsuperuser``, sign in through the proxy over HTTPS in Chromium, send a
signed batch as a GPU node does (the collector's Redis user and a node key), and see the
node on the nodes page; and run each service's health check as Compose would, healthy, and
the web's unhealthy once gunicorn stops.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import redis

from collectors import signing
from collectors.transport import RedisSender
from tests.deploy.compose import Compose
from tests.factories import node_batch
from tests.services import ROOT, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HOST = "clusterui.example.org"  # ALLOWED_HOSTS in .env.example
DB = "clusterui_compose_test"
BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"


def pg_address() -> str:
    """The test run's PostgreSQL (make test's, or DATABASE_URL's), where "postgres" maps."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    return f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.compose = Compose()
        self.procs: dict[str, subprocess.Popen] = {}
        self.redis_port, self.web_port = free_port(), free_port()
        self.https_port, self.http_port, self.admin_port = free_port(), free_port(), free_port()
        (tmp / "deploy").mkdir()
        shutil.copy(ROOT / "deploy" / "make-secrets.sh", tmp / "deploy")
        subprocess.run(["sh", str(tmp / "deploy" / "make-secrets.sh")], check=True,
                       capture_output=True)
        self.secrets = tmp / "deploy" / "secrets"

    def secret(self, name: str) -> str:
        return (self.secrets / name).read_text().strip()

    def _map(self, value: str) -> str:
        value = value.replace("/tmp/", f"{self.tmp}/")
        value = value.replace("/var/lib/clusterui-sim/", f"{self.tmp}/simstate/")  # a volume
        value = re.sub(r"/run/secrets/(\w+)", lambda m: str(self.secrets / m.group(1)), value)
        value = value.replace("@postgres:5432/clusterui", f"@{pg_address()}/{DB}")
        return value.replace("redis:6379", f"127.0.0.1:{self.redis_port}")

    def env(self, service: str, **extra) -> dict[str, str]:
        env = {k: self._map(v) for k, v in self.compose.service_env(service).items()}
        for name in self.compose.secrets(service):
            assert (self.secrets / name).exists(), name
        return {"PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(self.tmp),
                "PYTHONPATH": str(ROOT), "WEB_PORT": str(self.web_port), **env, **extra}

    def command(self, service: str) -> list[str]:
        if service == "web":  # the image's CMD
            line = [x for x in (ROOT / "Dockerfile").read_text().splitlines()
                    if x.startswith("CMD ")][-1]
            cmd = json.loads(line[4:])
            cmd[cmd.index("--bind") + 1] = f"127.0.0.1:{self.web_port}"
            cmd[cmd.index("--workers") + 1] = "2"  # this machine has two cores
        else:
            cmd = list(self.compose.service(service)["command"])
        cmd = [self._map(c) for c in cmd]
        if cmd[0] == "python":
            cmd[0] = sys.executable
        elif cmd[0] in ("celery", "gunicorn"):
            cmd[0] = str(BIN / cmd[0])
        return cmd

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        log = open(self.tmp / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()[-3000:]

    def healthcheck(self, service: str) -> subprocess.CompletedProcess:
        test = self.compose.service(service)["healthcheck"]["test"]
        assert test[0] == "CMD", test
        cmd = [self._map(c) for c in test[1:]]
        cmd[0] = sys.executable if cmd[0] == "python" else cmd[0]
        return subprocess.run(cmd, cwd=ROOT, env=self.env(service), capture_output=True,
                              text=True, timeout=60)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _database(password: str, drop: bool = False) -> None:
    with psycopg.connect(f"postgresql://postgres@{pg_address()}/postgres",
                         autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        if drop:
            return
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'clusterui'").fetchone():
            conn.execute("CREATE ROLE clusterui LOGIN")
        # The role's password is the secret (this machine trusts local connections, so it is
        # not what lets the services in; the URL that carries it is what is tested).
        conn.execute(psycopg.sql.SQL("ALTER ROLE clusterui PASSWORD {}").format(
            psycopg.sql.Literal(password)))
        conn.execute(f'CREATE DATABASE "{DB}" OWNER clusterui')


@pytest.fixture
def stack(tmp_path):
    s = Stack(tmp_path)
    _database(s.secret("postgres_password"))
    try:
        yield s
    finally:
        s.stop()
        _database("", drop=True)


def test_the_compose_stack_signs_in_through_its_proxy_ingests_and_is_healthy(stack, tmp_path):
    s = stack
    # Redis with the shipped script and the collector user.
    redis_env = s.env("redis", REDIS_ACL_FILE=str(tmp_path / "users.acl"))
    s.start("redis", ["sh", str(ROOT / "deploy" / "redis" / "start-redis.sh"), "--port",
                      str(s.redis_port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
                      "--save", "", "--appendonly", "no"], redis_env)
    server = redis.Redis(port=s.redis_port, password=s.secret("redis_password"))
    wait_for(lambda: _pings(server), timeout=15, what="redis " + s.log("redis"))

    # The image's build step: static files collected for whitenoise's manifest.
    build = subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input",
                            "-v", "0"], cwd=ROOT, capture_output=True, text=True, timeout=180,
                           env={"PATH": os.environ["PATH"], "SECRET_KEY": "build-only",
                                "DATABASE_URL": "postgres://build@localhost/build"})
    assert build.returncode == 0, build.stderr
    migrate = subprocess.run(s.command("migrate"), cwd=ROOT, env=s.env("migrate"),
                             capture_output=True, text=True, timeout=180)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    web_env = s.env("web")
    assert "DEBUG" not in web_env  # production settings, as the image runs them
    s.start("web", s.command("web"), web_env)
    wait_for(lambda: s.healthcheck("web").returncode == 0, timeout=60,
             what="web healthy: " + s.log("web"))
    caddy_env = {**s.env("web"), "SITE_ADDRESS": f"{HOST}:{s.https_port}",
                 "HTTPS_PORT": str(s.https_port), "HTTP_PORT": str(s.http_port),
                 "CADDY_ADMIN": f"127.0.0.1:{s.admin_port}", "TLS_MODE": "internal",
                 "UPSTREAM": f"127.0.0.1:{s.web_port}",
                 "XDG_DATA_HOME": str(tmp_path / "caddy-data"),
                 "XDG_CONFIG_HOME": str(tmp_path / "caddy-config")}
    assert shutil.which("caddy"), "caddy is missing: make test installs it (devstack caddy)"
    s.start("proxy", ["caddy", "run", "--config", str(ROOT / "deploy" / "Caddyfile"),
                      "--adapter", "caddyfile"], caddy_env)
    for name in ("ingest", "worker", "beat"):
        s.start(name, s.command(name), s.env(name))

    # TLS: the proxy's certificate verifies against its own CA for the site's name.
    root = tmp_path / "caddy-data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"
    wait_for(lambda: _tls_ok(root, s.https_port), timeout=30,
             what="Caddy's TLS: " + s.log("proxy"))

    admin = subprocess.run([sys.executable, "manage.py", "createsuperuser", "--no-input"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60,
                           env=s.env("web", DJANGO_SUPERUSER_USERNAME="admin",
                                     DJANGO_SUPERUSER_PASSWORD="compose-admin-pw-1",
                                     DJANGO_SUPERUSER_EMAIL="admin@example.org"))
    assert admin.returncode == 0, admin.stderr

    # A GPU node's batch: the collector's Redis user, a key derived for this node.
    created = subprocess.run([sys.executable, "manage.py", "ingest_key", "create", "site"],
                             cwd=ROOT, env=s.env("web"), capture_output=True, text=True,
                             timeout=60)
    assert created.returncode == 0, created.stderr
    key = dict(line.split("=", 1) for line in created.stdout.split())
    from clusterui.envconfig import with_password

    collector_url = with_password(f"redis://collector@127.0.0.1:{s.redis_port}/0",
                                  s.secret("redis_collector_password"))
    sender = RedisSender(collector_url, signing_key=signing.node_signer(
        key["ingest_key_id"], key["ingest_key"]))
    sender.send(node_batch("gpu-compose-1", cluster="site", samples=3))

    # Every service healthy, as Compose would see it.
    for name in ("web", "ingest", "worker", "beat"):
        wait_for(lambda n=name: s.healthcheck(n).returncode == 0, timeout=60,
                 what=f"{name} healthy: {s.healthcheck(name).stderr} {s.log(name)}")

    # A user, through the proxy, over HTTPS, in a real browser.
    from playwright.sync_api import sync_playwright

    base = f"https://{HOST}:{s.https_port}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", f"--host-resolver-rules=MAP {HOST} 127.0.0.1"])
        context = browser.new_context(ignore_https_errors=True)  # Caddy's own CA
        # Ten wrong passwords for bob through the proxy: bob's name is locked for that
        # address (the limiter sees the client, not the proxy), and nobody else is.
        attacker = browser.new_context(ignore_https_errors=True).new_page()
        for _ in range(10):
            attacker.goto(f"{base}/login/")
            attacker.fill("#id_username", "bob")
            attacker.fill("#id_password", "wrong-guess")
            attacker.click("button[type=submit]")
            attacker.wait_for_load_state()
        assert "Too many failed sign-in attempts" in attacker.content()
        page = context.new_page()
        page.goto(f"{base}/")
        assert page.url.startswith(f"{base}/login/")
        assert page.locator("#id_username").count() == 1, page.content()[:2000]
        css = page.evaluate("document.querySelector('link[rel=stylesheet]').href")
        served = page.evaluate("u => fetch(u).then(r => [r.status, r.headers.get('content-type')])", css)
        assert served == [200, "text/css; charset=\"utf-8\""], (css, served)
        assert page.evaluate("getComputedStyle(document.documentElement).backgroundColor") \
            == "rgb(245, 246, 248)"  # the stylesheet, served by whitenoise through the proxy
        page.fill("#id_username", "admin")
        page.fill("#id_password", "compose-admin-pw-1")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        cookies = {c["name"]: c for c in context.cookies()}
        assert cookies["sessionid"]["secure"] and cookies["sessionid"]["httpOnly"]

        def node_listed():
            page.goto(f"{base}/nodes/")
            return "gpu-compose-1" in page.content()

        wait_for(node_listed, timeout=60, what="the node on the nodes page: " + s.log("ingest"))
        assert page.goto(f"{base}/jobs/").status == 200
        browser.close()

    # Plain HTTP on the proxy's port 80 is sent to HTTPS.
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(f"http://127.0.0.1:{s.http_port}/",
                                     headers={"Host": f"{HOST}:{s.https_port}"})
    try:
        opener.open(request, timeout=10)
        pytest.fail("plain HTTP was served")
    except urllib.error.HTTPError as exc:
        assert exc.code in (301, 302, 307, 308)
        assert exc.headers["Location"].startswith("https://")

    _demo_profile_continues_its_history(s, tmp_path)

    # Down is unhealthy: the web's check fails once gunicorn has stopped.
    web = s.procs["web"]
    os.killpg(web.pid, signal.SIGTERM)
    web.wait(20)
    down = s.healthcheck("web")
    assert down.returncode == 1 and "unhealthy" in down.stderr


def _demo_profile_continues_its_history(s: Stack, tmp_path: Path) -> None:
    """--profile demo: demo-key makes the demo cluster's key, the simulated cluster pushes as
    the collector user with node keys, and a restart of it (crash, reboot, down and up)
    continues the history it sent from its state volume instead of back-filling over it;
    so does one whose state volume is new while the database was kept, from where demo-key
    finds the stored history ends."""
    (tmp_path / "simstate").mkdir()
    state_file = tmp_path / "simstate" / "state.json"

    def demo_key() -> None:
        key = subprocess.run(s.command("demo-key"), cwd=ROOT, env=s.env("demo-key"),
                             capture_output=True, text=True, timeout=120)
        assert key.returncode == 0, key.stdout + key.stderr

    demo_key()
    assert not state_file.exists()  # nothing stored yet: the simulator starts afresh
    url = f"postgresql://postgres@{pg_address()}/{DB}"
    # The service's own command, smaller and quicker (later options win in argparse): the
    # restart's first tick comes within its run.
    short = ["--nodes", "2", "--backfill", "60", "--interval", "2", "--flush", "2",
             "--duration", "5"]

    def stored() -> tuple[int, object, int]:
        with psycopg.connect(url) as conn:
            return conn.execute(
                "SELECT count(*), max(b.last_ts), max(b.id) FROM ingest_ingestbatch b "
                "JOIN inventory_node n ON n.id = b.node_id JOIN inventory_cluster c "
                "ON c.id = n.cluster_id WHERE c.name = 'demo'").fetchone()

    def run_sim() -> tuple[tuple, dict]:
        """The simulator run once more: what was stored when it ended, its state file."""
        before = stored()
        sim = subprocess.run(s.command("simcollector") + short, cwd=ROOT,
                             env=s.env("simcollector"), capture_output=True, text=True,
                             timeout=180)
        assert sim.returncode == 0, sim.stdout + sim.stderr
        sent = int(re.findall(r"(\d+) batches sent", sim.stderr)[-1])
        wait_for(lambda b=before, n=sent: stored()[0] == b[0] + n, timeout=60,
                 what="the simulated batches stored: " + s.log("ingest"))
        return stored(), json.loads(state_file.read_text())

    def continued(previous: tuple, next_job_id: int) -> None:
        """What was stored after ``previous`` (count, newest sample, last batch id) starts
        after its newest sample, and its jobs are numbered from ``next_job_id`` on."""
        with psycopg.connect(url) as conn:
            earliest_again = conn.execute(
                "SELECT min(first_ts) FROM ingest_ingestbatch WHERE id > %s",
                [previous[2]]).fetchone()[0]
            new_jobs = [int(r[0]) for r in conn.execute(
                "SELECT external_id FROM jobs_job WHERE scheduler = 'slurm' "
                "AND first_seen > %s", [previous[1]]).fetchall()]
        assert earliest_again > previous[1]  # nothing written over the stored history
        # its jobs are new ones, not the stored ids given to other simulated jobs
        assert new_jobs and min(new_jobs) >= next_job_id

    first, state1 = run_sim()
    assert first[1].timestamp() == state1["after"]  # its newest sample, as stored
    second, state2 = run_sim()
    continued(first, state1["next_job_id"])
    assert state2["after"] > state1["after"]

    # The state volume recreated, the database kept (a `docker volume rm`, a new host).
    state_file.unlink()
    demo_key()
    seeded = json.loads(state_file.read_text())
    assert seeded["after"] == second[1].timestamp()
    with psycopg.connect(url) as conn:
        largest = conn.execute("SELECT max(external_id::bigint) FROM jobs_job "
                               "WHERE scheduler = 'slurm'").fetchone()[0]
    assert seeded["next_job_id"] == largest + 1
    run_sim()
    continued(second, seeded["next_job_id"])


def _pings(client) -> bool:
    try:
        return client.ping()
    except redis.RedisError:
        return False


def _tls_ok(root: Path, port: int) -> bool:
    if not root.exists():
        return False
    context = ssl.create_default_context(cafile=str(root))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            with context.wrap_socket(sock, server_hostname=HOST) as tls:
                return tls.version() is not None
    except (OSError, ssl.SSLError):
        return False
