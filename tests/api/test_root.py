"""GET /api/v1/: where everything is."""

import pytest

pytestmark = pytest.mark.django_db


def test_root_lists_the_endpoints(api):
    body = api("alice").get("/api/v1/").json()
    assert body["jobs"] == "http://testserver/api/v1/jobs/"
    assert body["schema"] == "http://testserver/api/v1/schema/"
    assert set(body) == {"nodes", "gpus", "nics", "jobs", "findings", "usage", "tokens",
                         "schema", "docs"}
