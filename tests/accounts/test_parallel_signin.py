"""Twenty wrong passwords sent at once for one user from one address: no more passwords are
checked than the limit allows. Threads send them to a live server (threads in this process)
and to gunicorn (worker processes, production settings but DEBUG off and plain HTTP),
through a trusted proxy header; real Redis, real PostgreSQL."""

import http.cookiejar
import ipaddress
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model

from tests.accounts.hashers import COUNT_KEY
from tests.services import OUTPUT, ROOT, database_url, free_port, wait_for

PARALLEL = 20
ATTACKER, ALICE = "203.0.113.9", "198.51.100.7"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def post_login(url, username, password, forwarded):
    """A browser's sign-in: fetch the form (CSRF cookie and token), then post it."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), _NoRedirect())
    page = opener.open(f"{url}/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    body = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrfmiddlewaretoken": token}).encode()
    request = urllib.request.Request(f"{url}/login/", data=body,
                                     headers={"X-Forwarded-For": forwarded})
    try:
        return opener.open(request).status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def alice(settings, transactional_db, broker):
    settings.PASSWORD_HASHERS = ["tests.accounts.hashers.CountingHasher"]
    # The server's peer is this machine, standing in for the TLS proxy.
    settings.LOGIN_TRUSTED_PROXIES = (ipaddress.ip_network("127.0.0.1/32"),)
    get_user_model().objects.create_user("alice", password="right-password-1")
    broker.delete(COUNT_KEY)
    return broker


@pytest.fixture
def threaded_server(live_server, alice):
    return live_server.url


@pytest.fixture
def gunicorn(alice, broker_url):
    port = free_port()
    (OUTPUT / "workers").mkdir(parents=True, exist_ok=True)
    log_path = OUTPUT / "workers" / f"gunicorn-signin-{os.getpid()}.log"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.accounts.settings_counting",
           "DATABASE_URL": database_url(), "TEST_BROKER_URL": broker_url,
           "LOGIN_TRUSTED_PROXIES": "127.0.0.1/32"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "clusterui.wsgi", "--workers", "3",
             "--bind", f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)

    def up():
        if proc.poll() is not None:
            raise AssertionError(f"gunicorn exited: {log_path.read_text()[-3000:]}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(up, timeout=60, what="gunicorn to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize("server", ["threaded_server", "gunicorn"])
def test_parallel_wrong_passwords_check_at_most_the_limit(server, request, alice, settings):
    url = request.getfixturevalue(server)
    with ThreadPoolExecutor(PARALLEL) as pool:
        statuses = list(pool.map(lambda _: post_login(url, "alice", "guess", ATTACKER),
                                 range(PARALLEL)))
    checked = int(alice.get(COUNT_KEY) or 0)
    print(f"{server}: {PARALLEL} parallel wrong attempts, {checked} passwords checked, "
          f"statuses {sorted(statuses)}")
    assert checked <= settings.LOGIN_MAX_FAILURES_PER_PAIR
    assert statuses.count(429) >= PARALLEL - settings.LOGIN_MAX_FAILURES_PER_PAIR
    # The attacker's pair is locked; alice from her own address is not.
    assert post_login(url, "alice", "right-password-1", ATTACKER) == 429
    assert post_login(url, "alice", "right-password-1", ALICE) == 302
