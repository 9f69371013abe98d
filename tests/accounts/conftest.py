import pytest

from tests.accounts import slapd as slapd_server


@pytest.fixture(scope="session")
def slapd(tmp_path_factory):
    """A private OpenLDAP for this test session (tests/accounts/slapd.py): its URI."""
    process, uri = slapd_server.start(tmp_path_factory.mktemp("slapd"))
    yield uri
    process.terminate()
    try:
        process.wait(10)
    except Exception:
        process.kill()
        process.wait()
