#!/usr/bin/env python3
"""The local stack behind ``make demo``, ``make test`` and ``make bench``.

It uses PostgreSQL and Redis on their default local ports when they answer, and otherwise
starts private ones under ``var/`` from the installed ``postgres`` / ``redis-server``
binaries; when neither is possible it says exactly what to install.

    devstack.py demo              # the whole product on a simulated cluster; Ctrl-C stops it
    devstack.py run -- CMD ...    # run CMD with DATABASE_URL etc. pointing at the stack
"""

import argparse
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
VENV_BIN = Path(sys.executable).parent
# DEVSTACK_PRIVATE=1 ignores services on the default ports and uses private ones under var/,
# each on a free port chosen when it is first started and reused only while the process
# that answers there is the one it started (its pid file), never someone else's service.
PRIVATE_ONLY = os.environ.get("DEVSTACK_PRIVATE") == "1"

children: list[subprocess.Popen] = []
# Children that exited, waiting for their restart: (due, name, cmd, env, failures).
restarts: list[tuple[float, str, list[str], dict, int]] = []
stopping = False
# A child that dies is restarted after 2 s, then 4, 8 ... at most this many seconds while it
# keeps dying soon after its start; one that ran for STABLE_S starts the series again.
RESTART_BACKOFF_S = 2.0
RESTART_BACKOFF_MAX_S = 60.0
STABLE_S = 60.0
# Private services this run started, stopped again when it ends: (description, command).
started_services: list[tuple[str, list[str]]] = []


def say(message: str) -> None:
    print(f"[clusterui] {message}", flush=True)


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def wait_port(host: str, port: int, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not port_open(host, port):
        if time.monotonic() > deadline:
            sys.exit(f"[clusterui] {what} did not come up on {host}:{port} within {timeout:.0f} s")
        time.sleep(0.2)


def find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


# --- PostgreSQL ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pidfile: Path) -> bool:
    try:
        os.kill(int(pidfile.read_text().split()[0]), 0)
        return True
    except (OSError, ValueError, IndexError):
        return False


def _ours(name: str, pidfile: Path) -> int | None:
    """The port of the private ``name`` this script started earlier, if it still runs."""
    port_file = VAR / f"{name}.port"
    if port_file.exists() and _alive(pidfile):
        port = int(port_file.read_text())
        if port_open("127.0.0.1", port):
            return port
    return None


def _new_port(name: str) -> int:
    VAR.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    (VAR / f"{name}.port").write_text(str(port))
    return port


def postgres_url() -> str:
    if os.environ.get("DATABASE_URL") and not PRIVATE_ONLY:
        return os.environ["DATABASE_URL"]
    if not PRIVATE_ONLY and port_open("127.0.0.1", 5432):
        return "postgres://postgres@127.0.0.1:5432/clusterui"
    data = VAR / "pg"
    if (port := _ours("pg", data / "postmaster.pid")) is not None:
        return f"postgres://postgres@127.0.0.1:{port}/clusterui"
    initdb, pg_ctl = find_binary("initdb"), find_binary("pg_ctl")
    if not (initdb and pg_ctl):
        sys.exit("[clusterui] PostgreSQL is not answering on 127.0.0.1:5432 and no postgres "
                 "binaries were found to start a private one.\n  Install it: "
                 "sudo apt-get install postgresql  (or set DATABASE_URL)")
    run_as = _unprivileged_prefix(data)
    port = _new_port("pg")
    if not (data / "PG_VERSION").exists():
        data.mkdir(parents=True, exist_ok=True)
        say(f"creating a private PostgreSQL in {data}")
        _chown_for(data)
        subprocess.run([*run_as, initdb, "-D", str(data), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8"], check=True, stdout=subprocess.DEVNULL)
    say(f"starting a private PostgreSQL on port {port}")
    subprocess.run([*run_as, pg_ctl, "-D", str(data), "-l", str(data / "server.log"), "-w",
                    "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1",
                    "start"], check=True, stdout=subprocess.DEVNULL)
    started_services.append(("PostgreSQL", [*run_as, pg_ctl, "-D", str(data), "-m", "fast",
                                            "stop"]))
    return f"postgres://postgres@127.0.0.1:{port}/clusterui"


def _unprivileged_prefix(path: Path) -> list[str]:
    """PostgreSQL refuses to run as root: run it as the ``postgres`` user when we are root."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if not runuser:
        sys.exit("[clusterui] running as root and cannot drop to the postgres user (no runuser)")
    return [runuser, "-u", "postgres", "--"]


def _chown_for(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def ensure_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres".replace("postgres://", "postgresql://", 1),
                         autocommit=True, connect_timeout=5) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            say(f"creating database {name}")
            conn.execute(f'CREATE DATABASE "{name}"')


# --- Redis ------------------------------------------------------------------------------

def redis_url(persistent: bool = False) -> str:
    if os.environ.get("CELERY_BROKER_URL") and not PRIVATE_ONLY:
        return os.environ["CELERY_BROKER_URL"]
    if not PRIVATE_ONLY and port_open("127.0.0.1", 6379):
        return "redis://127.0.0.1:6379/0"
    data = VAR / "redis"
    if (port := _ours("redis", data / "redis.pid")) is not None:
        return f"redis://127.0.0.1:{port}/0"
    server = shutil.which("redis-server")
    if not server:
        sys.exit("[clusterui] Redis is not answering on 127.0.0.1:6379 and redis-server is not "
                 "installed.\n  Install it: sudo apt-get install redis-server  "
                 "(or set CELERY_BROKER_URL)")
    data.mkdir(parents=True, exist_ok=True)
    port = _new_port("redis")
    say(f"starting a private Redis on port {port} (append-only file in {data})")
    subprocess.run([server, "--port", str(port), "--bind", "127.0.0.1",
                    "--pidfile", str(data / "redis.pid"),
                    "--dir", str(data), "--appendonly", "yes", "--daemonize", "yes",
                    "--logfile", str(data / "redis.log")], check=True)
    wait_port("127.0.0.1", port, "Redis")
    cli = shutil.which("redis-cli")
    if cli:
        started_services.append(("Redis", [cli, "-p", str(port), "shutdown"]))
    return f"redis://127.0.0.1:{port}/0"


def stop_services() -> None:
    while started_services:
        what, command = started_services.pop()
        say(f"stopping the private {what}")
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stack_env() -> dict:
    db = postgres_url()
    ensure_database(db)
    broker = redis_url()
    env = dict(os.environ, DATABASE_URL=db, CELERY_BROKER_URL=broker)
    env.setdefault("CACHE_URL", broker.rsplit("/", 1)[0] + "/1")
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    # The test suite's broker is a separate Redis database on the same server.
    env.setdefault("TEST_BROKER_URL", env["CELERY_BROKER_URL"].rsplit("/", 1)[0] + "/9")
    return env


# --- the demo ---------------------------------------------------------------------------

def manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)


def spawn(name: str, cmd, env: dict, failures: int = 0) -> subprocess.Popen:
    """Start a supervised child. ``cmd``: its argv, or a function returning it, called again
    at each restart (the simulator's depends on what is stored by then)."""
    logs = VAR / "log"
    logs.mkdir(parents=True, exist_ok=True)
    log = open(logs / f"{name}.log", "a")
    proc = subprocess.Popen(cmd() if callable(cmd) else cmd, cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    log.close()  # the child holds its own copy
    proc.name, proc.cmd, proc.env = name, cmd, env
    proc.started, proc.failures = time.monotonic(), failures
    children.append(proc)
    return proc


def supervise_once() -> None:
    """Restart children that exited, with capped exponential backoff, saying so; one
    child's death never stops the others (Ctrl-C does, through stop_children)."""
    now = time.monotonic()
    for proc in list(children):
        if stopping or proc.poll() is None:
            continue
        children.remove(proc)
        failures = 1 if now - proc.started >= STABLE_S else proc.failures + 1
        delay = min(RESTART_BACKOFF_S * 2 ** (failures - 1), RESTART_BACKOFF_MAX_S)
        say(f"{proc.name} exited with code {proc.returncode}; restarting in {delay:.0f} s "
            f"(see var/log/{proc.name}.log)")
        restarts.append((now + delay, proc.name, proc.cmd, proc.env, failures))
    for entry in list(restarts):
        due, name, cmd, env, failures = entry
        if not stopping and now >= due:
            restarts.remove(entry)
            try:
                spawn(name, cmd, env, failures)
            except (OSError, subprocess.CalledProcessError) as exc:  # its argv could not be made
                delay = min(RESTART_BACKOFF_S * 2 ** failures, RESTART_BACKOFF_MAX_S)
                say(f"{name} could not be restarted ({exc}); trying again in {delay:.0f} s")
                restarts.append((now + delay, name, cmd, env, failures + 1))
                continue
            say(f"{name} restarted")


def stop_children(*_):
    global stopping
    stopping = True
    restarts.clear()
    for proc in children:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in children:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    children.clear()


def sim_root() -> Path:
    """Where the simulated nodes' sysfs/proc trees live: on tmpfs when there is one. The
    simulator rewrites them at every step, and on disk that is most of its time (about six
    times slower): the demo's hour of history would take minutes to appear."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm / f"clusterui-sim-{os.getuid()}"
    return VAR / "sim"


def sim_resume(env: dict) -> dict:
    """Where the demo cluster's stored history ends (``manage.py sim_resume``)."""
    return json.loads(subprocess.run(
        [sys.executable, "manage.py", "sim_resume", "--cluster", "demo"], cwd=ROOT, env=env,
        check=True, capture_output=True, text=True).stdout)


def continue_from(resume: dict) -> list[str]:
    """A demo run after an earlier one (or the simulator restarted after a crash) continues
    the stored history: it back-fills only after the newest stored sample and numbers its
    jobs after the stored ones."""
    return [*(["--after", repr(resume["after"])] if resume["after"] else []),
            *(["--first-job-id", str(resume["first_job_id"])] if resume["first_job_id"]
              else [])]


def demo(args) -> None:
    env = stack_env()
    VAR.mkdir(exist_ok=True)
    secret_file = VAR / "secret_key"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(48))
    env.update(
        SECRET_KEY=secret_file.read_text().strip(), DEBUG="0", STATIC_MANIFEST="1",
        # The demo serves plain http on localhost: secure-only cookies would never be sent.
        SESSION_COOKIE_SECURE="0", CSRF_COOKIE_SECURE="0", SECURE_HSTS_SECONDS="0",
        SECURE_SSL_REDIRECT="0",
        SITE_URL=f"http://localhost:{args.port}",
        ALLOWED_HOSTS=env.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]"),
        # Alert emails go to a local SMTP sink whose Maildir the web UI shows at /demo/mail/.
        EMAIL_URL=f"smtp://127.0.0.1:{args.smtp_port}", DEMO_MAILBOX_DIR=str(VAR / "mail"),
        ADMIN_EMAILS=env.get("ADMIN_EMAILS", "admin@localhost"),
        # The admins' digest at the first check of the day, once the detectors caught up.
        ALERT_DIGEST_HOUR=env.get("ALERT_DIGEST_HOUR", "0"),
        BEAT_DIGEST_S=env.get("BEAT_DIGEST_S", "300"),
        # A small cluster: judge and email every 20 s, so the back-filled hour's findings show
        # within seconds of loading instead of at the next minute.
        BEAT_DETECTORS_S=env.get("BEAT_DETECTORS_S", "20"),
        BEAT_ALERTS_S=env.get("BEAT_ALERTS_S", "20"),
        # And compact every minute: the back-filled hours reach the trends and the cluster
        # history within a minute of the start, not at the first 5-minute compaction.
        BEAT_COMPACT_S=env.get("BEAT_COMPACT_S", "60"),
    )
    say("applying database migrations")
    manage(env, "migrate", "--no-input", "-v", "0")
    manage(env, "collectstatic", "--no-input", "-v", "0")
    manage(env, "demo_users")
    # The demo cluster's ingest key: the simulator holds its secret (as configuration
    # management would) and signs each simulated node's batches with that node's own
    # derived key; the key accepts node signatures only.
    key_file = VAR / "demo_ingest_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(32))
    ingest_key = key_file.read_text().strip()
    manage(env, "ingest_key", "ensure", "demo", "--key-id", "demo-sim", "--secret", ingest_key)
    resume = sim_resume(env)
    signal.signal(signal.SIGINT, stop_children)
    signal.signal(signal.SIGTERM, stop_children)
    bin_ = str(VENV_BIN)
    spawn("smtp", [sys.executable, "-m", "clusterui.alerts.smtpsink", "--port",
                   str(args.smtp_port), "--maildir", str(VAR / "mail")], env)
    spawn("web", [f"{bin_}/gunicorn", "clusterui.wsgi", "-b", f"127.0.0.1:{args.port}",
                  "-w", "2", "--access-logfile", "-"], env)
    spawn("ingest", [sys.executable, "manage.py", "ingest_worker"], env)
    spawn("worker", [f"{bin_}/celery", "-A", "clusterui", "worker", "-Q", "default",
                     "-c", "2", "-n", "demo@%h", "--loglevel", "INFO"], env)
    spawn("beat", [f"{bin_}/celery", "-A", "clusterui", "beat", "--loglevel", "INFO",
                   "-s", str(VAR / "celerybeat-schedule")], env)
    # The first start continues from what was asked above; a restart (after a crash) asks
    # again, since the history has moved on since.
    resumes = [resume]
    spawn("simcluster", lambda: [
        f"{bin_}/clusterui-simcluster", "--nodes", str(args.nodes), "--gpus", str(args.gpus),
        "--seed", str(args.seed), "--interval", str(args.interval), "--flush",
        str(args.interval), "--broker-url", env["CELERY_BROKER_URL"], "--cluster", "demo",
        "--root", str(sim_root()), "--spool-dir", str(VAR / "spool"),
        "--backfill", str(args.backfill), "--backfill-flush", "120",
        "--ingest-key-id", "demo-sim", "--mig-nodes", "1",
        *continue_from(resumes.pop() if resumes else sim_resume(env))],
        {**env, "CLUSTERUI_INGEST_KEY": ingest_key})
    wait_port("127.0.0.1", args.port, "the web server")
    say("")
    say(f"ClusterUI is running: http://localhost:{args.port}/")
    say("  sign in as  admin / clusterui-demo   (staff: sees every job)")
    say("          or  alice / clusterui-demo   (a researcher: sees her own jobs)")
    history = (f"with {args.backfill // 60:g} min of history" if not resume["after"] else
               "continuing the history stored until "
               + time.strftime("%Y-%m-%d %H:%M", time.localtime(resume["after"])))
    # gpu-a001's GPU slots become 1g.10gb instances of MIG-enabled H100s (--mig-nodes 1),
    # so that node has fewer physical GPUs than the others.
    from collectors.sim.sharing import PROFILES

    per_gpu = PROFILES["1g.10gb"][0]
    say(f"  a SIMULATED cluster of {args.nodes} nodes x {args.gpus} GPUs (gpu-a001's are "
        f"{args.gpus} MIG instances on {-(-args.gpus // per_gpu)} H100s) is feeding it, "
        f"{history}")
    say(f"  alert emails: http://localhost:{args.port}/demo/mail/  (a local SMTP sink on port "
        f"{args.smtp_port}; nothing leaves this machine)")
    say(f"  logs: {VAR / 'log'}/   ·   Ctrl-C stops everything")
    try:
        while not stopping:
            supervise_once()
            time.sleep(0.5)
    finally:
        stop_children()
        stop_services()
        say("stopped")


# --- the browser tests -----------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
SYSTEMD_ANALYZE = "/usr/bin/systemd-analyze"
CADDY = "/usr/bin/caddy"
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
VICTORIA_METRICS = "/usr/bin/victoria-metrics"
SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"


def _apt_install(package: str, path: str, why: str) -> None:
    """Install Debian's ``package`` when ``path`` is missing and we are root, or stop and say
    how. Does nothing when it is there."""
    if os.path.exists(path):
        return
    apt = shutil.which("apt-get")
    if os.geteuid() == 0 and apt:
        say(f"installing {package} for {why}: apt-get install -y {package}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = [apt, "install", "-y", "-q", "--no-install-recommends", package]
        if subprocess.run(install, env=env).returncode != 0:  # stale package lists
            subprocess.run([apt, "update", "-q"], env=env, check=False)
            subprocess.run(install, env=env, check=False)
    if not os.path.exists(path):
        sys.exit(f"[clusterui] {why} need Debian's {package} ({path}).\n"
                 f"  Install it: sudo apt-get install -y {package}")


def ensure_chromium(args=None) -> None:
    """The browser tests drive Debian's chromium."""
    _apt_install("chromium", CHROMIUM, "the browser tests")


def ensure_caddy(args=None) -> None:
    """The Compose stack test puts Debian's caddy in front of the web server, as Compose does."""
    _apt_install("caddy", CADDY, "the Compose stack test")


def ensure_prometheus(args=None) -> None:
    """tests/prometheus has Debian's prometheus scrape /metrics of a live server."""
    _apt_install("prometheus", PROMETHEUS, "the Prometheus scrape test")


def ensure_peer_stores(args=None) -> None:
    """benchmarks/storage_vs_peers.py builds Prometheus' TSDB (promtool comes with Debian's
    prometheus) and VictoriaMetrics (Debian's victoria-metrics) from its samples."""
    _apt_install("prometheus", PROMTOOL, "the storage comparison with Prometheus")
    _apt_install("victoria-metrics", VICTORIA_METRICS,
                 "the storage comparison with VictoriaMetrics")


def ensure_slapd(args=None) -> None:
    """tests/accounts/test_ldap_signin.py signs in against a private OpenLDAP: Debian's
    slapd (slapadd comes with it). Its debconf is told to create no directory of its own
    (slapd/no_configuration), so the install neither prompts nor sets up a system slapd;
    the tests start their own from a generated configuration."""
    if os.path.exists(SLAPD) and os.path.exists(SLAPADD):
        return
    debconf = shutil.which("debconf-set-selections")
    if os.geteuid() == 0 and debconf:
        subprocess.run([debconf], input=b"slapd slapd/no_configuration boolean true\n",
                       check=False)
    _apt_install("slapd", SLAPD, "the LDAP sign-in tests")


def ensure_ldap_build_deps(args=None) -> None:
    """python-ldap (for django-auth-ldap, the LDAP sign-in) has no wheels: pip compiles it
    against OpenLDAP's and Cyrus SASL's headers and the headers of the Python that builds
    the venv (this one: ``make venv`` runs this script with $(PYTHON)), with a C compiler.
    Install the missing ones; does nothing when they are there."""
    import sysconfig

    why = "building python-ldap (LDAP sign-in)"
    _apt_install("gcc", shutil.which("cc") or "/usr/bin/gcc", why)
    _apt_install("libc6-dev", "/usr/include/stdio.h", why)
    _apt_install("libldap2-dev", "/usr/include/ldap.h", why)
    _apt_install("libsasl2-dev", "/usr/include/sasl/sasl.h", why)
    python_h = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    if os.path.exists(python_h):
        return
    if not os.path.realpath(sys.executable).startswith("/usr/bin/"):
        sys.exit(f"[clusterui] {why} needs {sys.executable}'s headers ({python_h}), which are "
                 "not Debian's to install: use a Python built with its headers.")
    # Debian's headers for exactly this Python (python3-dev is only the default version's).
    _apt_install(f"python3.{sys.version_info.minor}-dev", python_h, why)


def ensure_systemd_analyze(args=None) -> None:
    """The packaging tests check the collector's systemd unit with systemd-analyze."""
    _apt_install("systemd", SYSTEMD_ANALYZE, "the systemd unit's tests")


# --- the Slurm tests ---------------------------------------------------------------

SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch")


def ensure_slurm(args=None) -> None:
    """tests/slurm runs a real slurmctld and slurmd: install Debian's slurm-wlm and munge
    when missing and we are root, or stop and say how. Does nothing when they are there."""
    if all(shutil.which(b) for b in SLURM_BINARIES):
        return
    apt = shutil.which("apt-get")
    if os.geteuid() == 0 and apt:
        say("installing Slurm for the Slurm tests: apt-get install -y slurm-wlm munge")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = [apt, "install", "-y", "-q", "--no-install-recommends", "slurm-wlm", "munge"]
        if subprocess.run(install, env=env).returncode != 0:  # stale package lists
            subprocess.run([apt, "update", "-q"], env=env, check=False)
            subprocess.run(install, env=env, check=False)
    missing = [b for b in SLURM_BINARIES if not shutil.which(b)]
    if missing:
        sys.exit(f"[clusterui] the Slurm tests need Debian's slurm-wlm and munge "
                 f"({', '.join(missing)} missing).\n"
                 "  Install them: sudo apt-get install -y slurm-wlm munge")


def run(args) -> None:
    try:
        env = stack_env()
        code = subprocess.call(args.command, cwd=ROOT, env=env)
    finally:
        stop_services()
    sys.exit(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    d = sub.add_parser("demo", help="run the product on a simulated cluster")
    d.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", 8000)))
    d.add_argument("--nodes", type=int, default=16)
    d.add_argument("--gpus", type=int, default=8)
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--interval", type=float, default=10)
    d.add_argument("--backfill", type=int, default=3600, help="seconds of history to generate")
    d.add_argument("--smtp-port", type=int, default=int(os.environ.get("DEMO_SMTP_PORT", 1025)))
    d.set_defaults(func=demo)
    c = sub.add_parser("chromium", help="install chromium for the browser tests if missing")
    c.set_defaults(func=ensure_chromium)
    cd = sub.add_parser("caddy", help="install caddy for the Compose stack test if missing")
    cd.set_defaults(func=ensure_caddy)
    pr = sub.add_parser("prometheus",
                        help="install prometheus for the /metrics scrape test if missing")
    pr.set_defaults(func=ensure_prometheus)
    sl = sub.add_parser("slapd", help="install slapd for the LDAP sign-in tests if missing")
    sl.set_defaults(func=ensure_slapd)
    lb = sub.add_parser("ldap-build-deps",
                        help="install what building python-ldap needs if missing (make venv)")
    lb.set_defaults(func=ensure_ldap_build_deps)
    sa = sub.add_parser("systemd-analyze",
                        help="install systemd-analyze for the systemd unit's tests if missing")
    sa.set_defaults(func=ensure_systemd_analyze)
    s = sub.add_parser("slurm", help="install slurm-wlm and munge for the Slurm tests if missing")
    s.set_defaults(func=ensure_slurm)
    r = sub.add_parser("run", help="run a command against the stack")
    r.add_argument("command", nargs=argparse.REMAINDER)
    r.set_defaults(func=run)
    args = parser.parse_args()
    if args.what == "run" and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    args.func(args)


if __name__ == "__main__":
    main()
