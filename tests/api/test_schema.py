"""GET /api/v1/schema/ (OpenAPI) and /api/v1/docs/ (Swagger UI served from this server)."""

import re

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

PATHS = {
    "/api/v1/nodes/", "/api/v1/nodes/{id}/", "/api/v1/nodes/{id}/metrics/",
    "/api/v1/gpus/", "/api/v1/gpus/{id}/", "/api/v1/gpus/{id}/metrics/",
    "/api/v1/nics/", "/api/v1/nics/{id}/", "/api/v1/nics/{id}/metrics/",
    "/api/v1/nics/{id}/errors/",
    "/api/v1/jobs/", "/api/v1/jobs/{id}/", "/api/v1/jobs/{id}/metrics/",
    "/api/v1/findings/", "/api/v1/findings/{id}/", "/api/v1/findings/{id}/acknowledge/",
    "/api/v1/usage/", "/api/v1/tokens/", "/api/v1/tokens/{id}/", "/api/v1/",
}


def test_the_schema_describes_every_endpoint(api):
    response = api("alice").get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.") and schema["info"]["title"] == "ClusterUI API"
    assert set(schema["paths"]) == PATHS
    assert schema["components"]["securitySchemes"]["tokenAuth"]["name"] == "Authorization"
    jobs = {p["name"] for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    assert {"user", "account", "state", "active_from", "active_to", "finding", "ordering",
            "limit", "offset"} <= jobs
    metrics = schema["paths"]["/api/v1/jobs/{id}/metrics/"]["get"]
    assert {p["name"] for p in metrics["parameters"]} == {"id", "metrics", "from", "to", "step",
                                                          "agg"}
    nic = schema["paths"]["/api/v1/nics/{id}/metrics/"]["get"]
    assert "`rx_bytes_per_s`, `tx_bytes_per_s`" in nic["description"]
    assert "util_pct" not in nic["description"]  # a NIC has no GPU metrics
    errors = schema["paths"]["/api/v1/nics/{id}/errors/"]["get"]
    assert {p["name"] for p in errors["parameters"]} == {"id", "from", "to", "step"}
    assert "`symbol_error`" in errors["description"]
    error = schema["paths"]["/api/v1/jobs/{id}/"]["get"]["responses"]["4XX"]
    assert error["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"}


def test_the_schema_needs_credentials():
    response = APIClient().get("/api/v1/schema/")
    assert response.status_code == 401


def test_docs_are_served_locally_to_a_signed_in_browser(client, users):
    assert client.get("/api/v1/docs/").status_code == 302  # to the login page
    client.force_login(users["alice"])
    page = client.get("/api/v1/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/api/v1/schema/" in html
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', html)
    assert any("swagger-ui-bundle.js" in a for a in assets)
    for asset in assets:
        assert asset.startswith("/static/"), f"{asset} is not served by this server"
        assert client.get(asset).status_code == 200, asset


BROWSER_ACCEPT = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
                  "image/webp,*/*;q=0.8")


def test_the_schema_opened_in_a_browser_is_shown_not_downloaded(api):
    """Following the schema link from the API root saved a file: the YAML came as
    application/vnd.oai.openapi. A browser gets it as text it can show."""
    response = api("alice").get("/api/v1/schema/", HTTP_ACCEPT=BROWSER_ACCEPT)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert "attachment" not in response.get("Content-Disposition", "")
    assert response.content.decode().startswith("openapi: 3.")
    # Tools still get what they ask for.
    yaml = api("alice").get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert yaml["Content-Type"].startswith("application/vnd.oai.openapi")
    as_json = api("alice").get("/api/v1/schema/",
                               HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert as_json.json()["openapi"].startswith("3.")
