import pytest

from tests.accounts import oidcop
from tests.accounts import slapd as slapd_server


@pytest.fixture(scope="session")
def slapd(tmp_path_factory):
    """A private OpenLDAP for this test session (tests/accounts/slapd.py): its URI."""
    process, uri = slapd_server.start(tmp_path_factory.mktemp("slapd"))
    yield uri
    _stop(process)


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory):
    """A real OpenID Connect provider for this test session (tests/accounts/oidcop.py):
    its issuer URL."""
    process, issuer = oidcop.start(tmp_path_factory.mktemp("oidc-provider"))
    yield issuer
    _stop(process)


def _stop(process):
    process.terminate()
    try:
        process.wait(10)
    except Exception:
        process.kill()
        process.wait()
