"""Sign-in with the site's directory (LDAP), next to the local accounts: django-auth-ldap's
LDAPBackend, configured from the LDAP_* settings (clusterui/accounts/ldap_config.py), with
ClusterUI's rules on top through its hooks.

Django's ModelBackend runs first: a local account signs in as before, whether or not the
directory answers. Then django-auth-ldap searches for the login's entry as the service
account, binds as it to check the password, reads the user's groups (LDAP_GROUP_FILTER,
clusterui/accounts/ldap_groups.py) and writes the Django user: created on first sign-in
with no usable local password, its names and email copied, ``is_staff`` from membership of
LDAP_STAFF_GROUP at every sign-in (AUTH_LDAP_USER_FLAGS_BY_GROUP; removal from the group
takes staff away at the next one). This subclass adds the ``DirectoryAccount``: the
scheduler user name (LDAP_SCHEDULER_USER) that decides which jobs are theirs and the
accounts they lead (the groups named LDAP_ACCOUNT_LEADER_GROUP_PREFIX + account), likewise
at every sign-in. A login that names a local or OpenID Connect account is left alone: the
directory never takes such an account over.

When the directory cannot be reached (django-auth-ldap's ``ldap_error`` signal) the attempt
fails and the request is marked, so the sign-in form says so (clusterui/accounts/views.py)
instead of "wrong password".
"""

import logging

import ldap
from django.conf import settings
from django.db import transaction
from django.dispatch import receiver
from django_auth_ldap import backend as auth_ldap

from clusterui.accounts.choices import AccountSource
from clusterui.accounts.ldap_config import auth_ldap_settings
from clusterui.accounts.models import DirectoryAccount

log = logging.getLogger(__name__)


class _Attributes(dict):
    """The entry's attributes (first values) by lower-case name: attribute names are
    case-insensitive, so ``{uid}`` finds ``UID``."""

    def __init__(self, attrs, **extra):
        super().__init__({k.lower(): str(v[0]) if v else "" for k, v in (attrs or {}).items()},
                         **extra)

    def __missing__(self, key):
        if key != key.lower():
            return self[key.lower()]
        raise KeyError(key)


def _scheduler_user(config: dict, ldap_user, login: str) -> str | None:
    try:
        name = config["SCHEDULER_USER"].format_map(
            _Attributes(ldap_user.attrs, login=login, dn=ldap_user.dn))
    except KeyError as exc:
        log.error("LDAP: %s has no attribute %s for LDAP_SCHEDULER_USER", ldap_user.dn, exc)
        return None
    return name.strip() or None


def _not_the_directorys(User, username: str) -> bool:
    """A local or OpenID Connect account answers to this login (case aside, as
    django-auth-ldap looks users up)."""
    return (User._default_manager
            .filter(**{f"{User.USERNAME_FIELD}__iexact": username})
            .exclude(directory_account__source=AccountSource.LDAP).exists())


class LDAPBackend(auth_ldap.LDAPBackend):
    login = ""  # the login being checked, and its request: set by authenticate
    request = None

    @property
    def default_settings(self):
        # Read at each sign-in (Django builds a backend per attempt), so the settings are
        # always those of settings.LDAP; AUTH_LDAP_* in the Django settings would override.
        return auth_ldap_settings(settings.LDAP) if settings.LDAP else {}

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not settings.LDAP or not username or not password:
            return None
        if _not_the_directorys(self.get_user_model(), username.strip()):
            return None
        self.login = username.strip()  # {login} in LDAP_GROUP_FILTER (ldap_groups.py)
        self.request = request
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_or_build_user(self, username, ldap_user):
        user, built = super().get_or_build_user(username, ldap_user)
        if not built and _not_the_directorys(self.get_user_model(), username):
            raise ldap_user.AuthenticationFailed("a local or OpenID Connect account")
        return user, built

    def authenticate_ldap_user(self, ldap_user, password):
        # One transaction: a user is never left without the DirectoryAccount that marks it
        # as the directory's (without one it would count as a local account).
        config = settings.LDAP
        with transaction.atomic():
            user = super().authenticate_ldap_user(ldap_user, password)
            if user is None:
                return None
            # {login}: the ClusterUI user name, which django-auth-ldap lower-cases, so the
            # same person gets the same scheduler name however they typed it.
            scheduler_user = _scheduler_user(config, ldap_user, user.get_username())
            if scheduler_user is None:
                transaction.set_rollback(True)
                return None
            prefix = config["ACCOUNT_LEADER_GROUP_PREFIX"]
            try:
                groups = ldap_user.group_names if prefix else set()
            except ldap.LDAPError as exc:
                transaction.set_rollback(True)
                _directory_unavailable(type(self), "authenticate", user, self.request, exc)
                return None
            led = sorted(g[len(prefix):] for g in groups
                         if g.startswith(prefix) and len(g) > len(prefix))
            DirectoryAccount.objects.update_or_create(
                user=user, defaults={"source": AccountSource.LDAP, "dn": ldap_user.dn,
                                     "scheduler_user": scheduler_user[:64],
                                     "led_accounts": led})
        return user if getattr(user, "is_active", True) else None


@receiver(auth_ldap.ldap_error, sender=LDAPBackend)
def _directory_unavailable(sender, context, user, request, exception, **kwargs):
    """An LDAP error while signing in is the directory's trouble, not a wrong password (that
    one django-auth-ldap turns into a plain failure): say so on the form, log it."""
    if context not in ("authenticate", "search_for_user_dn"):
        return
    log.error("LDAP: cannot check a sign-in against %s: %s",
              settings.LDAP["SERVER_URI"] if settings.LDAP else "?", exception)
    if request is not None:
        request.ldap_unavailable = True
