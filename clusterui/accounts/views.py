from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.shortcuts import render

from clusterui.accounts import attempt_gate, oidc_views
from clusterui.accounts.client_address import client_address


def _refused(request, message: str):
    form = AuthenticationForm(request, data=request.POST)
    form.add_error(None, message)
    return render(request, "registration/login.html",
                  {"form": form, "next": request.POST.get("next", "")}, status=429)


def _minutes() -> int:
    return max(1, settings.LOGIN_FAILURE_WINDOW_S // 60)


def locked_out(request, response, credentials):
    """django-axes' AXES_LOCKOUT_CALLABLE: this user name is locked for this address only."""
    return _refused(request, "Too many failed sign-in attempts for this user from your "
                             f"address. Try again in {_minutes()} minutes.")


DIRECTORY_DOWN = ("The directory (LDAP) cannot be reached, so directory accounts cannot "
                  "sign in just now; local accounts still can. Try again in a few minutes.")


class SignInForm(AuthenticationForm):
    def get_invalid_login_error(self):
        """Say so when the directory did not answer (clusterui/accounts/ldap_backend.py),
        rather than blame the password."""
        if getattr(self.request, "ldap_unavailable", False):
            return ValidationError(DIRECTORY_DOWN, code="ldap_unavailable")
        return super().get_invalid_login_error()


class LoginView(auth_views.LoginView):
    """Django's sign-in. django-axes locks a (user name, address) pair after repeated
    failures; the attempt gate checks one pair's attempts one at a time and limits one
    address's failures across user names (clusterui/accounts/attempt_gate.py)."""

    form_class = SignInForm

    def get_context_data(self, **kwargs):
        """The "Sign in with <provider>" button when OpenID Connect sign-in is on, and why
        the last one failed (clusterui/accounts/oidc_views.py)."""
        context = super().get_context_data(**kwargs)
        if settings.OIDC:
            context["oidc_provider_name"] = settings.OIDC["PROVIDER_NAME"]
            context["oidc_error"] = oidc_views.pop_error(self.request)
        return context

    def post(self, request, *args, **kwargs):
        address = client_address(request)
        if attempt_gate.address_blocked(address):
            return _refused(request, "Too many failed sign-in attempts from your address. "
                                     f"Try again in {_minutes()} minutes.")
        with attempt_gate.one_at_a_time(request.POST.get("username", ""), address) as turn:
            if not turn:
                return _refused(request, "Another sign-in attempt for this user is still "
                                         "being checked. Try again in a moment.")
            response = super().post(request, *args, **kwargs)
            # A directory that did not answer is no guess against this address.
            if not (request.user.is_authenticated
                    or getattr(request, "ldap_unavailable", False)):
                attempt_gate.record_address_failure(address)
        return response
