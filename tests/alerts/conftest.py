import pytest

from tests.alerts.factories import make_user
from tests.alerts.smtp import SmtpServer


@pytest.fixture
def smtp(settings):
    """A real SMTP server on a free port, and this process's mail settings pointing at it
    (pytest-django swaps in the locmem backend: put SMTP back)."""
    server = SmtpServer().start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    settings.SITE_URL = "http://clusterui.test"
    settings.ALLOWED_HOSTS = ["clusterui.test", "testserver"]
    yield server
    server.stop()


@pytest.fixture
def cast(db):
    """The shared cast: a job owner, a colleague, an outsider and a staff member."""
    return {
        "owner": make_user("alice"),
        "colleague": make_user("carol"),
        "outsider": make_user("mallory"),
        "staff": make_user("ops", email="ops@example.org", staff=True),
    }
