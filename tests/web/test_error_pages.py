"""Error pages keep the site around them (issue 20): a missing page, a researcher's 403 and
a server error each say what happened in the site's frame, with the way back; an ordinary
client error is one line in the web log, not a traceback."""

import io
import logging
from urllib.parse import unquote

import pytest
from django.test import RequestFactory
from django.views.defaults import server_error

pytestmark = pytest.mark.django_db


def test_a_missing_page_is_the_sites_own_with_its_navigation(client_for):
    response = client_for("alice").get("/gpus/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "Nothing here" in page and "<code>/gpus/</code>" in page
    assert 'href="/jobs/"' in page and "Sign out" in page  # the navigation is there
    assert "app.css" in page


def test_a_job_the_user_may_not_see_is_not_found_and_says_why_it_might_be(client_for):
    from tests import rows as f

    job = f.job("bob")
    response = client_for("alice").get(f"/jobs/{job.pk}/")
    assert response.status_code == 404
    assert "a job you may not see" in response.content.decode()


def test_a_researcher_on_a_staff_page_is_told_why_in_the_sites_frame(client_for):
    response = client_for("alice").get("/ingest/health/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "The ingest health page is for staff." in page
    assert "signed in as alice" in page and 'href="/findings/"' in page


def test_a_researcher_opening_the_admin_is_told_it_is_for_staff(client_for, client):
    response = client_for("alice").get("/admin/", follow=True)
    assert response.status_code == 403
    assert "The admin site is for staff." in response.content.decode()
    # Signed out, the admin still signs in through the rate-limited sign-in page.
    response = client.get("/admin/")
    assert response.status_code == 302
    assert unquote(client.get(response["Location"])["Location"]) == "/login/?next=/admin/"


def test_a_server_error_page_renders_without_a_request_context():
    response = server_error(RequestFactory().get("/jobs/1/"))
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in page and 'href="/"' in page


def test_an_ordinary_client_error_is_one_line_in_the_web_log(client_for):
    handler = next(h for h in logging.getLogger().handlers
                   if any(type(f).__name__ == "ClientErrorsOneLine" for f in h.filters))
    client = client_for("alice")  # signing in logs lines of its own
    out = io.StringIO()
    previous = handler.setStream(out)
    try:
        client.get("/ingest/health/")
    finally:
        handler.setStream(previous)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "Forbidden" in lines[0] and "/ingest/health/" in lines[0], lines
