"""The site icon answers at /favicon.ico, where browsers ask for it on pages that name none
(the API's), before anyone signs in."""

from django.test import Client


def test_favicon_ico_leads_to_the_sites_svg_icon_without_signing_in(db):
    client = Client()
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert icon["Content-Type"] == "image/svg+xml"
    assert b"".join(icon.streaming_content).startswith(b"<svg")


def test_the_pages_link_the_same_icon(admin_client):
    page = admin_client.get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
