"""OpenID Connect sign-in, driven end to end against a real provider (tests/accounts/
oidc_provider/: django-oidc-provider under gunicorn, RS256 ID tokens, discovery, JWKS and
userinfo over HTTP). The test is the browser: it opens "Sign in with ..." on ClusterUI,
follows the redirect to the provider, posts the provider's own sign-in form, and brings the
provider's answer back to ClusterUI's callback, which exchanges the code with the provider.

Checked: the person lands signed in with their names, staff from the groups claim at each
sign-in, their jobs by scheduler name; tokens for another audience, expired or forged are
refused with a sentence on the sign-in page; local accounts keep working and are never
taken over; a provider that is down is said to be down."""

import html
import re
import time
from urllib.parse import urljoin, urlsplit

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model

from clusterui.accounts import oidc_discovery
from clusterui.accounts.oidc_backend import OIDCBackend, Refused
from clusterui.accounts.oidc_config import oidc_config
from clusterui.jobs.models import Job
from tests import rows
from tests.accounts.oidc_provider import people
from tests.accounts.oidcop import free_port

pytestmark = pytest.mark.django_db
BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend",
            "clusterui.accounts.oidc_backend.OIDCBackend"]


def configure(settings, issuer, **extra):
    settings.OIDC = oidc_config({
        "OIDC_ISSUER": issuer, "OIDC_ALLOW_HTTP": "1", "OIDC_CLIENT_ID": people.CLIENT_ID,
        "OIDC_CLIENT_SECRET": people.CLIENT_SECRET, "OIDC_PROVIDER_NAME": "Example SSO",
        "OIDC_SCOPES": "openid,email,profile,groups", "OIDC_STAFF_GROUP": "hpc-admins",
        "OIDC_TIMEOUT_S": "5", **extra})
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    oidc_discovery.forget()


@pytest.fixture
def oidc(settings, oidc_provider, broker):  # `broker` empties the cache's Redis
    configure(settings, oidc_provider)
    return oidc_provider


def sign_in(client, login, password, next_url="", browser=None):
    """Click "Sign in with Example SSO", sign in at the provider, come back: ClusterUI's
    answer to the callback. ``browser``: the provider's cookies (a ``requests.Session``)."""
    start = client.get("/oidc/authenticate/" + (f"?next={next_url}" if next_url else ""))
    assert start.status_code == 302, start
    browser = browser if browser is not None else requests.Session()
    page = browser.get(start["Location"], timeout=10)  # authorize -> the provider's form
    assert page.status_code == 200 and 'name="password"' in page.text, page.text[:500]
    form = {name: html.unescape(value) for name, value in re.findall(
        r'<input type="hidden" name="(\w+)" value="([^"]*)"', page.text)}
    answer = browser.post(page.url, data={**form, "username": login, "password": password},
                          allow_redirects=False, timeout=10)
    while answer.is_redirect and not answer.headers["Location"].startswith(
            people.REDIRECT_URI):
        answer = browser.get(urljoin(answer.url, answer.headers["Location"]),
                             allow_redirects=False, timeout=10)
    assert answer.is_redirect, answer.text[:500]
    back = urlsplit(answer.headers["Location"])
    return client.get(f"{back.path}?{back.query}")


def refusal(client, response) -> str:
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
    page = client.get("/login/").content.decode()
    return html.unescape(re.search(r'<p class="error" role="alert">([^<]*)</p>', page)[1])


def test_the_sign_in_page_offers_the_provider_only_when_configured(client, settings):
    settings.OIDC = None
    page = client.get("/login/").content.decode()
    assert "Sign in with" not in page
    assert client.get("/oidc/authenticate/").status_code == 404
    configure(settings, "https://sso.example.org/realms/hpc")
    page = client.get("/login/?next=/jobs/").content.decode()
    assert ">Sign in with Example SSO</a>" in page
    assert 'href="/oidc/authenticate/?next=/jobs/"' in page


def test_a_provider_user_signs_in_and_sees_exactly_their_own_jobs(client, oidc):
    mine, _theirs = rows.job("alice"), rows.job("bob")
    response = sign_in(client, "alice", people.PASSWORDS["alice"], next_url="/jobs/")
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    alice = get_user_model().objects.get(username="alice")
    assert client.session["_auth_user_id"] == str(alice.pk)
    assert (alice.is_staff, alice.has_usable_password()) == (False, False)
    assert (alice.first_name, alice.last_name, alice.email) == (
        "Alice", "Archer", "alice@example.org")
    assert alice.directory_account.source == "oidc"
    assert alice.directory_account.dn.startswith(f"{oidc}#")
    assert list(Job.objects.visible_to(alice)) == [mine]
    assert client.get("/jobs/").status_code == 200
    api = client.get("/api/v1/jobs/")
    assert [j["user"] for j in api.json()["results"]] == ["alice"]
    # The next sign-in finds the same account (by the provider's subject).
    client.logout()
    sign_in(client, "alice", people.PASSWORDS["alice"])
    assert get_user_model().objects.filter(username="alice").count() == 1


def test_the_account_follows_the_subject_not_the_login(client, settings, oidc):
    """The login claim changes (here: the site switches to email addresses): the same
    person keeps the same account, renamed; nobody else gets the old name's account."""
    sign_in(client, "alice", people.PASSWORDS["alice"])
    alice = get_user_model().objects.get(username="alice")
    client.logout()
    configure(settings, oidc, OIDC_USERNAME_CLAIM="email")
    sign_in(client, "alice", people.PASSWORDS["alice"])
    alice.refresh_from_db()
    assert alice.username == "alice@example.org"
    assert client.session["_auth_user_id"] == str(alice.pk)
    assert get_user_model().objects.count() == 1


def test_staff_comes_from_the_groups_claim_at_each_sign_in(client, settings, oidc):
    rows.job("alice")
    sign_in(client, "bob", people.PASSWORDS["bob"])
    bob = get_user_model().objects.get(username="bob")
    assert bob.is_staff and Job.objects.visible_to(bob).count() == 1
    client.logout()
    configure(settings, oidc, OIDC_STAFF_GROUP="gpu-admins")  # bob is not in this one
    sign_in(client, "bob", people.PASSWORDS["bob"])
    bob.refresh_from_db()
    assert not bob.is_staff and Job.objects.visible_to(bob).count() == 0


def test_a_leader_group_in_the_claim_shows_the_accounts_jobs(client, settings, oidc):
    """carol is in the provider's group lead-nlp: with the prefix lead- she leads nlp and
    sees its jobs beside her own; out of the group (the prefix changed here), she does not
    at her next sign-in."""
    configure(settings, oidc, OIDC_ACCOUNT_LEADER_GROUP_PREFIX="lead-")
    nlp, _vision = rows.job("alice", account="nlp"), rows.job("alice", account="vision")
    sign_in(client, "carol", people.PASSWORDS["carol"])
    carol = get_user_model().objects.get(username="carol")
    assert carol.directory_account.led_accounts == ["nlp"]
    assert list(Job.objects.visible_to(carol)) == [nlp]
    assert [j["id"] for j in client.get("/api/v1/jobs/").json()["results"]] == [nlp.pk]
    client.logout()
    sign_in(client, "alice", people.PASSWORDS["alice"])  # in no leader group
    assert get_user_model().objects.get(username="alice").directory_account.led_accounts == []
    client.logout()
    configure(settings, oidc, OIDC_ACCOUNT_LEADER_GROUP_PREFIX="head-")
    sign_in(client, "carol", people.PASSWORDS["carol"])
    carol = get_user_model().objects.get(username="carol")
    assert carol.directory_account.led_accounts == []
    assert list(Job.objects.visible_to(carol)) == []
    assert client.get("/api/v1/jobs/").json()["results"] == []


def provider_form_shown(client, browser) -> bool:
    """Does "Sign in with Example SSO" ask for a password at the provider again (False:
    the provider still has a session and answers straight back)?"""
    start = client.get("/oidc/authenticate/")
    page = browser.get(start["Location"], timeout=10, allow_redirects=False)
    while page.is_redirect and not page.headers["Location"].startswith(people.REDIRECT_URI):
        page = browser.get(urljoin(page.url, page.headers["Location"]), timeout=10,
                           allow_redirects=False)
    return page.status_code == 200 and 'name="password"' in page.text


def test_signing_out_ends_the_providers_session_too_when_asked(client, settings, oidc):
    configure(settings, oidc, OIDC_SIGN_OUT_AT_PROVIDER="1")
    browser = requests.Session()
    sign_in(client, "alice", people.PASSWORDS["alice"], browser=browser)
    assert "_auth_user_id" in client.session
    out = client.post("/logout/")
    assert "_auth_user_id" not in client.session
    assert out.status_code == 302 and out["Location"].startswith(f"{oidc}/end-session")
    assert "id_token_hint=" in out["Location"]
    back = browser.get(out["Location"], allow_redirects=False, timeout=10)
    assert back.is_redirect and back.headers["Location"] == people.POST_LOGOUT_REDIRECT_URI
    assert provider_form_shown(client, browser)  # the next person must sign in


def test_by_default_signing_out_ends_clusteruis_session_only(client, oidc):
    browser = requests.Session()
    sign_in(client, "alice", people.PASSWORDS["alice"], browser=browser)
    out = client.post("/logout/")
    assert out.status_code == 302 and out["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
    assert not provider_form_shown(client, browser)  # single sign-on: still signed in there


def test_the_login_maps_to_the_scheduler_user_from_a_claim(client, settings, oidc):
    configure(settings, oidc, OIDC_SCOPES="openid,email,profile,groups,hpc",
              OIDC_SCHEDULER_USER="{hpc_user}")
    hers, _ = rows.job("cc0042"), rows.job("carol")
    sign_in(client, "carol", people.PASSWORDS["carol"])
    carol = get_user_model().objects.get(username="carol")
    assert carol.directory_account.scheduler_user == "cc0042"
    assert list(Job.objects.visible_to(carol)) == [hers]


def test_a_token_issued_for_another_application_is_refused(client, oidc):
    response = sign_in(client, "mallory", people.PASSWORDS["mallory"])
    message = refusal(client, response)
    assert "issued for another application, not for ClusterUI (client clusterui)" in message
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_an_expired_token_is_refused(client, oidc):
    message = refusal(client, sign_in(client, "erin", people.PASSWORDS["erin"]))
    assert "the identity provider's token has expired" in message
    assert not get_user_model().objects.filter(username="erin").exists()


def test_a_forged_token_is_refused(oidc, rf):
    """Signed with a key that is not the provider's, under the provider's key id or another
    one; everything else as the provider would write it."""
    kid = requests.get(f"{oidc}/jwks", timeout=5).json()["keys"][0]["kid"]
    now = int(time.time())
    claims = {"iss": oidc, "aud": people.CLIENT_ID, "sub": "1", "iat": now,
              "exp": now + 600, "nonce": "n"}
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    backend = OIDCBackend()
    with pytest.raises(Refused, match="signature does not match the identity provider's keys"):
        backend.verify_token(jwt.encode(claims, forger, "RS256", headers={"kid": kid}),
                             nonce="n")
    with pytest.raises(Refused, match="not signed with any of the identity provider's keys"):
        backend.verify_token(jwt.encode(claims, forger, "RS256", headers={"kid": "mine"}),
                             nonce="n")


def test_local_accounts_keep_working_and_are_never_taken_over(client, oidc):
    User = get_user_model()
    User.objects.create_user("alice", password="local-password-2")  # a provider name too
    message = refusal(client, sign_in(client, "alice", people.PASSWORDS["alice"]))
    assert "An account named alice already exists here and is not linked to your identity" in (
        message)
    assert not hasattr(User.objects.get(username="alice"), "directory_account")
    response = client.post("/login/", {"username": "alice", "password": "local-password-2"},
                           REMOTE_ADDR="192.0.2.10")
    assert response.status_code == 302 and response["Location"] == "/"


def test_provider_down_is_said_and_local_accounts_sign_in(client, settings, broker):
    configure(settings, f"http://127.0.0.1:{free_port()}")
    get_user_model().objects.create_user("dave", password="local-password-1")
    assert refusal(client, client.get("/oidc/authenticate/")) == oidc_discovery.DOWN
    response = client.post("/login/", {"username": "dave", "password": "local-password-1"},
                           REMOTE_ADDR="192.0.2.10")
    assert response.status_code == 302 and response["Location"] == "/"


def test_a_provider_that_is_not_oidc_issuer_is_said_to_be_misconfigured(
        client, settings, oidc):
    # The same provider by another name: its discovery document declares 127.0.0.1.
    configure(settings, oidc.replace("127.0.0.1", "localhost"))
    message = refusal(client, client.get("/oidc/authenticate/"))
    assert message == oidc_discovery.MISCONFIGURED


def test_an_answer_this_browser_did_not_ask_for_is_refused(client, oidc):
    message = refusal(client, client.get("/oidc/callback/?code=stolen&state=forged"))
    assert "belongs to no sign-in started in this browser" in message


def test_cancelling_at_the_provider_says_so(client, oidc):
    client.get("/oidc/authenticate/")
    state = next(iter(client.session["oidc_states"]))
    message = refusal(client, client.get(f"/oidc/callback/?error=access_denied&state={state}"))
    assert "did not sign you in (access_denied)" in message


def test_refused_tokens_do_not_lock_the_address_out_of_signing_in(client, oidc):
    for _ in range(6):
        refusal(client, sign_in(client, "mallory", people.PASSWORDS["mallory"]))
    response = sign_in(client, "alice", people.PASSWORDS["alice"])
    assert response.status_code == 302 and response["Location"] == "/"


def test_a_wrong_client_secret_is_reported_from_the_providers_answer(client, settings, oidc):
    configure(settings, oidc, OIDC_CLIENT_SECRET="not-the-secret")
    message = refusal(client, sign_in(client, "alice", people.PASSWORDS["alice"]))
    assert message.startswith("The identity provider refused to complete the sign-in "
                              "(invalid_client")


def test_a_user_made_inactive_is_signed_out_and_cannot_sign_in_again(client, oidc):
    sign_in(client, "alice", people.PASSWORDS["alice"])
    get_user_model().objects.filter(username="alice").update(is_active=False)
    assert client.get("/jobs/").status_code == 302  # back to the sign-in page
    client.logout()
    message = refusal(client, sign_in(client, "alice", people.PASSWORDS["alice"]))
    assert message == "The account alice is disabled here; ask an administrator."
