"""Real services for the tests: Celery workers started as processes, and helpers to wait.

No mocks: a worker here is ``celery -A clusterui worker`` talking to the real Redis and to
pytest-django's test database, exactly as in production but with short time limits.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"


def database_url() -> str:
    s = connection.settings_dict
    user = s.get("USER") or "postgres"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{s['NAME']}"


def connect(**kwargs) -> psycopg.Connection:
    """A session of its own on the test database, beside Django's (to hold a lock, to watch
    ``pg_stat_activity``)."""
    return psycopg.connect(database_url().replace("postgres://", "postgresql://", 1), **kwargs)


def wait_for(predicate, *, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll until ``predicate()`` is truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Worker:
    """A real consumer of the ingest queue, as a process: a Celery worker (prefork pool,
    ``kind="celery"``) or the bulk consumer (``kind="bulk"``, ``manage.py ingest_worker``)."""

    _count = 0

    def __init__(self, broker_url: str, *, concurrency: int = 1, queues: str = "ingest,default",
                 extra_env: dict | None = None, kind: str = "celery", beat: bool = False):
        assert kind in ("celery", "bulk"), kind
        assert not (beat and kind == "bulk"), "beat runs inside a Celery worker"
        self.beat = beat
        Worker._count += 1
        self.name = f"w{Worker._count}-{os.getpid()}"
        self.kind = kind
        self.broker_url = broker_url
        self.concurrency = concurrency
        self.queues = queues
        self.extra_env = extra_env or {}
        (OUTPUT / "workers").mkdir(parents=True, exist_ok=True)
        self.log_path = OUTPUT / "workers" / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "Worker":
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "clusterui.settings_test",
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": self.broker_url,
            # settings_test takes the broker from TEST_BROKER_URL whatever else is set.
            "TEST_BROKER_URL": self.broker_url,
            **self.extra_env,
        }
        self._log = open(self.log_path, "w")
        if self.kind == "bulk":
            command = [sys.executable, "manage.py", "ingest_worker", "--processes",
                       str(self.concurrency)]
        else:
            command = [sys.executable, "-m", "celery", "-A", "clusterui", "worker", "-Q",
                       self.queues, "-c", str(self.concurrency), "-n", f"{self.name}@%h",
                       "--without-mingle", "--without-gossip", "--without-heartbeat",
                       "--loglevel", "INFO"]
            if self.beat:  # Celery beat inside this worker, as `make demo` runs it
                command += ["-B", "-s", str(OUTPUT / "workers" / f"{self.name}-schedule")]
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self._ready, timeout=timeout, what=f"worker {self.name} to be ready "
                 f"(log: {self.log_path})")
        return self

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"worker {self.name} exited with {self.proc.returncode}: "
                                 f"{self.log_path.read_text()[-3000:]}")
        text = self.log_path.read_text()
        if self.kind == "bulk":
            return text.count("bulk ingest consumer") >= self.concurrency
        return " ready." in text

    def log(self) -> str:
        return self.log_path.read_text()

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children): no warm shutdown,
        no chance to requeue anything itself."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        if getattr(self, "_log", None):
            self._log.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A redis-server of the test's own, with an append-only file, that the test can stop and
    start (the machine's shared Redis keeps nothing on disk and must not be stopped)."""

    def __init__(self, directory: Path, port: int | None = None):
        import shutil

        self.server = shutil.which("redis-server")
        if not self.server:
            raise AssertionError("redis-server is not installed: apt-get install redis-server")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "PrivateRedis":
        import redis

        self.proc = subprocess.Popen(
            [self.server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.directory)],
            stdout=open(self.directory / "redis.log", "a"), stderr=subprocess.STDOUT,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)

        def up():
            try:
                return client.ping()
            except redis.exceptions.ConnectionError:
                return False

        wait_for(up, timeout=20, what=f"redis-server on port {self.port}")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)


class PrivatePostgres:
    """A PostgreSQL server of the test's own (initdb in a temporary directory), which the
    test may stop and start; the machine's shared server must never be stopped."""

    def __init__(self, directory: Path, port: int | None = None):
        import glob
        import shutil

        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
        pg_ctl = shutil.which("pg_ctl") or (found[0] if found else None)
        if not pg_ctl:
            raise AssertionError("PostgreSQL server binaries are not installed "
                                 "(apt-get install postgresql)")
        self.bin = Path(pg_ctl).parent
        self.directory = Path(directory)
        self.port = port or free_port()
        self.as_postgres = (["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else [])

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/clusterui"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_postgres, *args], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT)

    def init(self) -> "PrivatePostgres":
        import shutil
        import tempfile

        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root, and the postgres user cannot enter pytest's
            # private (0700) temporary tree: use a directory of its own under /tmp.
            self.directory = Path(tempfile.mkdtemp(prefix="clusterui-test-pg-"))
            shutil.chown(self.directory, "postgres", "postgres")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._run(str(self.bin / "initdb"), "-D", str(self.directory / "data"), "-U", "postgres",
                  "--auth=trust", "-E", "UTF8")
        self.start()
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE clusterui")
        return self

    def start(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.directory / "data"), "-w", "-l",
                  str(self.directory / "server.log"), "-o",
                  f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
                  "-c fsync=off", "start")

    def remove(self) -> None:
        import shutil

        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def stop(self) -> None:
        subprocess.run([*self.as_postgres, str(self.bin / "pg_ctl"), "-D",
                        str(self.directory / "data"), "-m", "fast", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def migrate(self) -> None:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "clusterui.settings_test",
               "DATABASE_URL": self.url}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env,
                       check=True)


def publish(*envelopes) -> None:
    """Send batches as a collector does: ``clusterui.ingest`` Celery tasks on the queue."""
    from clusterui.celery import app

    with app.producer_or_acquire() as producer:
        for envelope in envelopes:
            app.send_task("clusterui.ingest", args=[envelope], queue="ingest",
                          producer=producer)
