"""The two pages of an OpenID Connect sign-in: ``/oidc/authenticate/`` sends the browser to
the provider, ``/oidc/callback/`` takes it back (mozilla-django-oidc's views, reading their
settings through clusterui/accounts/oidc_discovery.py). Both are open to signed-out users,
and answer 404 while OIDC sign-in is off.

A sign-in that fails comes back to the sign-in page with a sentence saying why (the
backend's ``Refused``, the provider unreachable, the person cancelling at the provider, an
answer that belongs to no sign-in this browser started), kept in the session for one
showing (``pop_error``); never a bare 400 or a silent return to the form.
"""

import logging
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from mozilla_django_oidc import views

from clusterui.accounts import oidc_discovery

log = logging.getLogger(__name__)
SESSION_KEY = "clusterui_signin_error"
STALE = ("This sign-in answer belongs to no sign-in started in this browser (it expired, "
         "or was opened elsewhere). Start again.")


def _to_sign_in(request, message: str):
    request.session[SESSION_KEY] = message
    return HttpResponseRedirect(reverse("login"))


def pop_error(request) -> str | None:
    """The message of the OIDC sign-in that just failed, once."""
    return request.session.pop(SESSION_KEY, None)


class Start(views.OIDCAuthenticationRequestView):
    get_settings = staticmethod(oidc_discovery.setting)

    def __init__(self, *args, **kwargs):
        views.View.__init__(self, *args, **kwargs)  # the endpoint is read in get()

    def get(self, request):
        if not settings.OIDC:
            raise Http404("OpenID Connect sign-in is off")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = self.get_settings("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except oidc_discovery.ProviderUnavailable as exc:
            log.error("OIDC: the provider's discovery failed: %s", exc)
            return _to_sign_in(request, oidc_discovery.message(exc))
        self.OIDC_RP_CLIENT_ID = self.get_settings("OIDC_RP_CLIENT_ID")
        return super().get(request)


class Callback(views.OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc_discovery.setting)

    def get(self, request):
        if not settings.OIDC:
            raise Http404("OpenID Connect sign-in is off")
        try:
            return super().get(request)
        except SuspiciousOperation as exc:  # a state this session never issued
            log.warning("OIDC: callback refused: %s", exc)
            return _to_sign_in(request, STALE)

    def login_failure(self):
        request = self.request
        message = getattr(request, "oidc_refused", None)
        if message is None and request.GET.get("error"):
            message = ("The identity provider did not sign you in "
                       f"({request.GET['error'][:64]}). Start again, or sign in with a "
                       "password.")
        if message is None and "oidc_states" not in request.session:
            message = STALE
        if message is None:
            message = "The sign-in was refused; ask an administrator if it goes on."
        return _to_sign_in(request, message)


class SignOut(auth_views.LogoutView):
    """Django's sign-out (a POST), and with OIDC_SIGN_OUT_AT_PROVIDER for a person who
    signed in through the provider, then the provider's: the browser goes to its
    ``end_session_endpoint`` (OpenID Connect RP-Initiated Logout 1.0) with the ID token as
    the hint, and the provider sends it back to the sign-in page. Without that, a shared
    terminal would stay signed in at the provider, and "Sign in with ..." would let the
    next person in as the last one. A provider that cannot be reached or names no such
    endpoint: ClusterUI's session ends all the same, and the log says the provider's did
    not."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        config = settings.OIDC
        if not (config and config["SIGN_OUT_AT_PROVIDER"] and id_token):
            return response
        try:
            endpoint = oidc_discovery.metadata(config).get("end_session_endpoint")
        except oidc_discovery.ProviderUnavailable as exc:
            log.warning("OIDC: signed out here only, the provider is unavailable: %s", exc)
            return response
        if not endpoint:
            log.warning("OIDC: signed out here only, the provider names no "
                        "end_session_endpoint")
            return response
        query = urlencode({"id_token_hint": id_token, "client_id": config["CLIENT_ID"],
                           "post_logout_redirect_uri":
                               request.build_absolute_uri(reverse("login"))})
        return HttpResponseRedirect(f"{endpoint}{'&' if '?' in endpoint else '?'}{query}")
