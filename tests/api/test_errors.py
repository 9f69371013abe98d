"""Every API error is JSON ``{"error": "..."}`` with the right 4xx, whatever went wrong."""

import pytest
from rest_framework.test import APIClient

from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(api):
    factories.job("alice")
    return api("alice")


def test_unknown_path_is_a_json_404(alice):
    response = alice.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "No API endpoint at /api/v1/no-such-thing/."}


def test_unknown_id_is_a_json_404(alice):
    response = alice.get("/api/v1/gpus/123456789/")
    assert response.status_code == 404 and response.json() == {
        "error": "No Gpu matches the given query."}


def test_a_path_without_its_trailing_slash_is_served(alice):
    response = alice.get("/api/v1/jobs")
    assert response.status_code == 200 and response.json()["count"] == 1


def test_method_not_allowed(alice):
    response = alice.put("/api/v1/nodes/", {}, format="json")
    assert response.status_code == 405
    assert response.json() == {"error": 'Method "PUT" not allowed.'}


def test_no_credentials_is_401_with_a_challenge():
    response = APIClient().get("/api/v1/jobs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Token realm="api"'
    assert response.json() == {"error": "Authentication credentials were not provided."}


@pytest.mark.parametrize(("params", "message"), [
    ({"state": "paused"},
     "state: Select a valid choice. paused is not one of the available choices."),
    ({"active_from": "last week"}, "active_from: Enter a valid date/time."),
    ({"active_from": "2026-01-01T00:00:00-19:53"}, None),  # valid ISO: turned to UTC
    ({"ordering": "-cost"},
     "ordering: Select a valid choice. -cost is not one of the available choices."),
    ({"q": "a\x00b"}, "q: Null characters are not allowed."),
    ({"limit": "many"}, "limit: must be an integer from 1 to 1000, got 'many'"),
    ({"limit": "0"}, "limit: must be an integer from 1 to 1000, got '0'"),
    ({"offset": "-1"}, "offset: must be an integer from 0 to 1000000000, got '-1'"),
])
def test_bad_query_values_are_400_naming_the_parameter(alice, params, message):
    response = alice.get("/api/v1/jobs/", params)
    if message is None:
        assert response.status_code == 200
        return
    assert response.status_code == 400
    assert response.json() == {"error": message}


def test_several_bad_values_are_reported_together(alice):
    response = alice.get("/api/v1/findings/", {"kind": "slow", "severity": "dire"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert "kind: Select a valid choice. slow" in error and "; severity: " in error


def test_only_json_is_served(alice):
    response = alice.get("/api/v1/jobs/", HTTP_ACCEPT="application/xml")
    assert response.status_code == 406
    assert response.json() == {"error": 'Could not satisfy the request Accept header.'}
